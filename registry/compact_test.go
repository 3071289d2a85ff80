package registry

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCompact(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	before := now.Add(-time.Hour)
	old, recent := now.Add(-2*time.Hour), now.Add(-10*time.Minute)
	at := func(t time.Time) *time.Time { return &t }

	sessions := []struct {
		s        Session
		wantGone bool
	}{
		{Session{ID: "ended-old-empty", State: SessionEnded, StartedAt: old, EndedAt: at(old)}, true},
		{Session{ID: "ended-old-old-procs", State: SessionEnded, StartedAt: old, EndedAt: at(old)}, true},
		{Session{ID: "ended-old-recent-proc", State: SessionEnded, StartedAt: old, EndedAt: at(old)}, false},
		{Session{ID: "ended-old-live-proc", State: SessionEnded, StartedAt: old, EndedAt: at(old)}, false},
		{Session{ID: "ended-recent", State: SessionEnded, StartedAt: old, EndedAt: at(recent)}, false},
		{Session{ID: "ended-no-time", State: SessionEnded, StartedAt: old}, true},
		{Session{ID: "active-old", State: SessionActive, StartedAt: old}, false},
		{Session{ID: "ending-old", State: SessionEnding, StartedAt: old}, false},
	}
	procs := []struct {
		p        Process
		wantGone bool
	}{
		{Process{ID: "exited-old", Session: "ended-old-old-procs", State: StateExited, StartedAt: old, ExitedAt: at(old)}, true},
		{Process{ID: "failed-old", Session: "ended-old-old-procs", State: StateFailed, StartedAt: old, ExitedAt: at(old)}, true},
		{Process{ID: "lost-no-time", Session: "ended-old-old-procs", State: StateLost, StartedAt: old}, true},
		{Process{ID: "exited-recent", Session: "ended-old-recent-proc", State: StateExited, StartedAt: old, ExitedAt: at(recent)}, false},
		{Process{ID: "running-old", Session: "ended-old-live-proc", State: StateRunning, StartedAt: old}, false},
		{Process{ID: "stopping-old", Session: "active-old", State: StateStopping, StartedAt: old}, false},
		{Process{ID: "exited-old-active", Session: "active-old", State: StateExited, StartedAt: old, ExitedAt: at(old)}, true},
		{Process{ID: "exited-old-no-session", Session: "shared-3000", State: StateExited, StartedAt: old, ExitedAt: at(old)}, true},
	}
	var seedS []Session
	var seedP []Process
	var wantS, wantP []string
	for _, c := range sessions {
		seedS = append(seedS, c.s)
		if c.wantGone {
			wantS = append(wantS, c.s.ID)
		}
	}
	for _, c := range procs {
		seedP = append(seedP, c.p)
		if c.wantGone {
			wantP = append(wantP, c.p.ID)
		}
	}
	fp := &fakePersister{}
	r := New(fp, func() time.Time { return now }, seedS, seedP)

	ns, np, err := r.Compact(before)
	if err != nil {
		t.Fatalf("Compact: got %v, want nil", err)
	}
	if ns != len(wantS) || np != len(wantP) {
		t.Errorf("Compact: got %d sessions, %d processes; want %d, %d", ns, np, len(wantS), len(wantP))
	}
	sort.Strings(wantS)
	sort.Strings(wantP)
	gotS := append([]string(nil), fp.deletedSessions...)
	gotP := append([]string(nil), fp.deletedProcs...)
	sort.Strings(gotS)
	sort.Strings(gotP)
	if !reflect.DeepEqual(gotS, wantS) {
		t.Errorf("sessions deleted from the store: got %v, want %v", gotS, wantS)
	}
	if !reflect.DeepEqual(gotP, wantP) {
		t.Errorf("processes deleted from the store: got %v, want %v", gotP, wantP)
	}
	for _, c := range sessions {
		t.Run("session "+c.s.ID, func(t *testing.T) {
			_, err := r.Session(c.s.ID)
			if gone := errors.Is(err, ErrNotFound); gone != c.wantGone {
				t.Errorf("Session(%s) after Compact: got err %v, want gone %v", c.s.ID, err, c.wantGone)
			}
		})
	}
	for _, c := range procs {
		t.Run("process "+c.p.ID, func(t *testing.T) {
			_, err := r.Process(c.p.ID)
			if gone := errors.Is(err, ErrNotFound); gone != c.wantGone {
				t.Errorf("Process(%s) after Compact: got err %v, want gone %v", c.p.ID, err, c.wantGone)
			}
		})
	}
	if got, want := len(r.Sessions(true)), len(sessions)-len(wantS); got != want {
		t.Errorf("Sessions(all) after Compact: got %d, want %d", got, want)
	}
	if got, want := len(r.Processes(Filter{All: true})), len(procs)-len(wantP); got != want {
		t.Errorf("Processes(all) after Compact: got %d, want %d", got, want)
	}
	if ns, np, err := r.Compact(before); ns != 0 || np != 0 || err != nil {
		t.Errorf("second Compact: got %d, %d, %v; want 0, 0, nil", ns, np, err)
	}
}

func TestCompactCommitFailureKeepsRecords(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	old := now.Add(-2 * time.Hour)
	fp := &fakePersister{}
	r := New(fp, func() time.Time { return now },
		[]Session{{ID: "s", State: SessionEnded, StartedAt: old, EndedAt: &old}},
		[]Process{{ID: "p", Session: "s", State: StateExited, StartedAt: old, ExitedAt: &old}})
	boom := errors.New("disk full")
	fp.setFail(boom)
	if _, _, err := r.Compact(now); !errors.Is(err, boom) {
		t.Fatalf("Compact with a failing store: got %v, want %v", err, boom)
	}
	if _, err := r.Session("s"); err != nil {
		t.Errorf("Session(s) after a failed Compact: got %v, want nil", err)
	}
	if _, err := r.Process("p"); err != nil {
		t.Errorf("Process(p) after a failed Compact: got %v, want nil", err)
	}
	fp.setFail(nil)
	if ns, np, err := r.Compact(now); ns != 1 || np != 1 || err != nil {
		t.Errorf("Compact once the store works: got %d, %d, %v; want 1, 1, nil", ns, np, err)
	}
}

// TestCompactRaces runs Compact against updates of the records it deletes
// and a reopening of the session it deletes: whatever wins, no record may be
// written back after its deletion, and a reopened session must survive.
func TestCompactRaces(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	old := now.Add(-2 * time.Hour)
	for round := range 50 {
		fp := &fakePersister{}
		var seedP []Process
		for i := range 20 {
			seedP = append(seedP, Process{ID: fmt.Sprintf("p%d", i), Session: "x", State: StateExited, StartedAt: old, ExitedAt: &old})
		}
		r := New(fp, func() time.Time { return now },
			[]Session{{ID: "s", State: SessionEnded, StartedAt: old, EndedAt: &old}}, seedP)
		var wg sync.WaitGroup
		for _, p := range seedP {
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				_, err := r.Update(id, func(p *Process) error { p.Error = "late"; return nil })
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Errorf("round %d: Update(%s): got %v, want nil or ErrNotFound", round, id, err)
				}
			}(p.ID)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := r.OpenSession(Session{ID: "s", HostPID: 1}); err != nil {
				t.Errorf("round %d: OpenSession(s): got %v, want nil", round, err)
			}
		}()
		if _, _, err := r.Compact(now); err != nil {
			t.Fatalf("round %d: Compact: %v", round, err)
		}
		wg.Wait()

		last := map[string]string{}
		for _, op := range fp.ops {
			verb, key, _ := strings.Cut(op, " ")
			last[key] = verb
		}
		for key, verb := range last {
			kind, id, _ := strings.Cut(key, ":")
			var inMemory bool
			if kind == "s" {
				_, err := r.Session(id)
				inMemory = err == nil
			} else {
				_, err := r.Process(id)
				inMemory = err == nil
			}
			if stored := verb == "put"; stored != inMemory {
				t.Fatalf("round %d: %s: last commit %q but in memory %v; ops %v", round, key, verb, inMemory, fp.ops)
			}
		}
		if s, err := r.Session("s"); err != nil || s.State != SessionActive {
			t.Fatalf("round %d: reopened session: got %+v, %v; want it active", round, s, err)
		}
	}
}

func TestEventFillsSessionAndMarksEnding(t *testing.T) {
	r, fp := newTestRegistry()
	if _, _, err := r.OpenSession(Session{ID: "s", HostPID: 1, HostCommand: "claude"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddProcess(Process{ID: "p", Session: "s"}); err != nil {
		t.Fatal(err)
	}
	r.Event("process.stop", "", "p", "exited on SIGTERM")
	r.Event("daemon.note", "", "unknown", "")
	r.SetSessionState("s", SessionEnding, "host exited")
	r.SetSessionState("s", SessionEnded, "host exited")
	var got []string
	for _, e := range fp.events {
		got = append(got, e.Kind+"/"+e.Session+"/"+e.Process)
	}
	want := []string{"session.start/s/", "process.stop/s/p", "daemon.note//unknown", "session.ending/s/", "session.end/s/"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events: got %v, want %v", got, want)
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer command line", 10, "a longe..."},
		{"héhéhéhé", 6, "hé..."}, // never half a rune
	}
	for _, tt := range tests {
		if got := clip(tt.in, tt.n); got != tt.want {
			t.Errorf("clip(%q, %d): got %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
