package registry

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePersister records every commit and fails on demand.
type fakePersister struct {
	mu       sync.Mutex
	sessions []Session
	procs    []Process
	events   []Event
	fail     error // when set, PutSession, PutProcess and DeleteMany return it

	deletedSessions, deletedProcs []string
	ops                           []string // "put s:ID", "put p:ID", "del s:ID", "del p:ID", in commit order
}

func (f *fakePersister) PutSession(s Session, evs ...Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.sessions = append(f.sessions, s)
	f.ops = append(f.ops, "put s:"+s.ID)
	f.events = append(f.events, evs...)
	return nil
}

func (f *fakePersister) PutProcess(p Process, evs ...Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.procs = append(f.procs, p)
	f.ops = append(f.ops, "put p:"+p.ID)
	f.events = append(f.events, evs...)
	return nil
}

func (f *fakePersister) AppendEvent(e Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
	return nil
}

func (f *fakePersister) DeleteMany(sessionIDs, processIDs []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.deletedSessions = append(f.deletedSessions, sessionIDs...)
	f.deletedProcs = append(f.deletedProcs, processIDs...)
	for _, id := range sessionIDs {
		f.ops = append(f.ops, "del s:"+id)
	}
	for _, id := range processIDs {
		f.ops = append(f.ops, "del p:"+id)
	}
	return nil
}

func (f *fakePersister) setFail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = err
}

func (f *fakePersister) lastProc(t *testing.T) Process {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.procs) == 0 {
		t.Fatal("no process was committed")
	}
	return f.procs[len(f.procs)-1]
}

func (f *fakePersister) procPuts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.procs)
}

func (f *fakePersister) sessionPuts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sessions)
}

// fakeClock advances one second per reading so ordering by StartedAt is
// deterministic.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func newTestRegistry() (*Registry, *fakePersister) {
	p := &fakePersister{}
	c := &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	return New(p, c.now, nil, nil), p
}

func TestCanTransition(t *testing.T) {
	all := []ProcState{StateStarting, StateRunning, StateStopping, StateExited, StateFailed, StateLost}
	allowed := map[[2]ProcState]bool{
		{StateStarting, StateRunning}:  true,
		{StateStarting, StateFailed}:   true,
		{StateStarting, StateStopping}: true,
		{StateStarting, StateLost}:     true,
		{StateStarting, StateExited}:   true,
		{StateRunning, StateStopping}:  true,
		{StateRunning, StateExited}:    true,
		{StateRunning, StateLost}:      true,
		{StateRunning, StateFailed}:    true,
		{StateStopping, StateExited}:   true,
		{StateStopping, StateFailed}:   true,
		{StateStopping, StateLost}:     true,
	}
	for _, from := range all {
		for _, to := range all {
			want := allowed[[2]ProcState{from, to}]
			t.Run(string(from)+"->"+string(to), func(t *testing.T) {
				if got := CanTransition(from, to); got != want {
					t.Errorf("CanTransition(%s, %s): got %v, want %v", from, to, got, want)
				}
			})
		}
	}
	// Final states admit no transition at all.
	for _, s := range all {
		if s.Final() {
			for _, to := range all {
				if CanTransition(s, to) {
					t.Errorf("final state %s: CanTransition to %s: got true, want false", s, to)
				}
			}
		}
	}
	// Unknown states admit nothing.
	if CanTransition("bogus", StateRunning) {
		t.Errorf("CanTransition(bogus, running): got true, want false")
	}
}

func TestFinal(t *testing.T) {
	tests := []struct {
		s    ProcState
		want bool
	}{
		{StateStarting, false},
		{StateRunning, false},
		{StateStopping, false},
		{StateExited, true},
		{StateFailed, true},
		{StateLost, true},
	}
	for _, tt := range tests {
		if got := tt.s.Final(); got != tt.want {
			t.Errorf("%s.Final(): got %v, want %v", tt.s, got, tt.want)
		}
	}
}

func TestAddProcessCommitsStarting(t *testing.T) {
	r, p := newTestRegistry()
	got, err := r.AddProcess(Process{ID: "p1", Session: "s1", Name: "srv", Argv: []string{"srv", "-x"}, State: StateRunning})
	if err != nil {
		t.Fatalf("AddProcess: %v", err)
	}
	if got.State != StateStarting {
		t.Errorf("returned state: got %s, want %s", got.State, StateStarting)
	}
	if got.StartedAt.IsZero() {
		t.Errorf("StartedAt: got zero, want the clock reading")
	}
	if got.Health != "none" {
		t.Errorf("Health: got %q, want %q", got.Health, "none")
	}
	committed := p.lastProc(t)
	if committed.State != StateStarting || committed.ID != "p1" {
		t.Errorf("committed: got %s/%s, want p1/%s", committed.ID, committed.State, StateStarting)
	}
	stored, err := r.Process("p1")
	if err != nil {
		t.Fatalf("Process(p1): %v", err)
	}
	if !reflect.DeepEqual(stored, got) {
		t.Errorf("stored record: got %+v, want %+v", stored, got)
	}

	// The caller's slices are not shared with the registry.
	got.Argv[0] = "mutated"
	if again, _ := r.Process("p1"); again.Argv[0] != "srv" {
		t.Errorf("Argv after mutating a returned copy: got %q, want %q", again.Argv[0], "srv")
	}

	if _, err := r.AddProcess(Process{ID: "p1"}); err == nil {
		t.Errorf("AddProcess of a duplicate id: got nil error, want an error")
	}
}

func TestAddProcessPersistFailure(t *testing.T) {
	r, p := newTestRegistry()
	boom := errors.New("disk full")
	p.setFail(boom)
	if _, err := r.AddProcess(Process{ID: "p1"}); !errors.Is(err, boom) {
		t.Fatalf("AddProcess with a failing persister: got %v, want %v", err, boom)
	}
	if _, err := r.Process("p1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Process after a failed add: got %v, want %v", err, ErrNotFound)
	}
	p.setFail(nil)
	if _, err := r.AddProcess(Process{ID: "p1"}); err != nil {
		t.Errorf("AddProcess after the persister recovered: got %v, want nil", err)
	}
}

func TestTransitionLifecycle(t *testing.T) {
	r, p := newTestRegistry()
	if _, err := r.AddProcess(Process{ID: "p1"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		to     ProcState
		mutate func(*Process)
	}{
		{StateRunning, func(p *Process) { p.PID = 42 }},
		{StateStopping, nil},
		{StateExited, func(p *Process) { c := 3; p.ExitCode = &c }},
	}
	for _, st := range steps {
		got, err := r.Transition("p1", st.to, st.mutate)
		if err != nil {
			t.Fatalf("Transition to %s: %v", st.to, err)
		}
		if got.State != st.to {
			t.Errorf("returned state: got %s, want %s", got.State, st.to)
		}
		if c := p.lastProc(t); c.State != st.to {
			t.Errorf("committed state: got %s, want %s", c.State, st.to)
		}
	}
	final, _ := r.Process("p1")
	if final.PID != 42 {
		t.Errorf("PID: got %d, want 42", final.PID)
	}
	if final.ExitCode == nil || *final.ExitCode != 3 {
		t.Errorf("ExitCode: got %v, want 3", final.ExitCode)
	}

	// A transition to the current state is a no-op that succeeds.
	if _, err := r.Transition("p1", StateExited, nil); err != nil {
		t.Errorf("Transition exited→exited: got %v, want nil", err)
	}
	if _, err := r.Transition("nope", StateRunning, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("Transition of an unknown id: got %v, want %v", err, ErrNotFound)
	}
}

func TestTransitionForbidden(t *testing.T) {
	tests := []struct {
		name string
		path []ProcState // transitions applied first
		to   ProcState
	}{
		{"starting→running after exit", []ProcState{StateExited}, StateRunning},
		{"stopping→running", []ProcState{StateRunning, StateStopping}, StateRunning},
		{"exited→running", []ProcState{StateRunning, StateExited}, StateRunning},
		{"failed→stopping", []ProcState{StateFailed}, StateStopping},
		{"lost→exited", []ProcState{StateRunning, StateLost}, StateExited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, p := newTestRegistry()
			if _, err := r.AddProcess(Process{ID: "p1", Name: "srv"}); err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.path {
				if _, err := r.Transition("p1", s, nil); err != nil {
					t.Fatalf("Transition to %s: %v", s, err)
				}
			}
			before, _ := r.Process("p1")
			puts := p.procPuts()
			mutated := false
			got, err := r.Transition("p1", tt.to, func(p *Process) { mutated = true; p.Name = "changed" })
			if !errors.Is(err, ErrBadTransition) {
				t.Fatalf("Transition to %s: got %v, want %v", tt.to, err, ErrBadTransition)
			}
			if mutated {
				t.Errorf("mutate ran for a forbidden transition")
			}
			if !reflect.DeepEqual(got, before) {
				t.Errorf("returned record: got %+v, want %+v", got, before)
			}
			after, _ := r.Process("p1")
			if !reflect.DeepEqual(after, before) {
				t.Errorf("stored record: got %+v, want %+v", after, before)
			}
			if n := p.procPuts(); n != puts {
				t.Errorf("commits: got %d, want %d (nothing committed)", n, puts)
			}
		})
	}
}

func TestUpdateForbiddenStateChange(t *testing.T) {
	r, _ := newTestRegistry()
	if _, err := r.AddProcess(Process{ID: "p1"}); err != nil {
		t.Fatal(err)
	}
	_, err := r.Update("p1", func(p *Process) error { p.State = StateStarting + "-bogus"; return nil })
	if !errors.Is(err, ErrBadTransition) {
		t.Errorf("Update starting→bogus: got %v, want %v", err, ErrBadTransition)
	}
	fnErr := errors.New("abort")
	if _, err := r.Update("p1", func(p *Process) error { p.Name = "x"; return fnErr }); !errors.Is(err, fnErr) {
		t.Errorf("Update with a failing fn: got %v, want %v", err, fnErr)
	}
	if got, _ := r.Process("p1"); got.State != StateStarting || got.Name != "" {
		t.Errorf("record after refused updates: got %s/%q, want %s/\"\"", got.State, got.Name, StateStarting)
	}
}

func TestCommitBeforeReport(t *testing.T) {
	r, p := newTestRegistry()
	if _, err := r.AddProcess(Process{ID: "p1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Transition("p1", StateRunning, func(p *Process) { p.PID = 10 }); err != nil {
		t.Fatal(err)
	}
	before, _ := r.Process("p1")

	boom := errors.New("disk full")
	p.setFail(boom)
	got, err := r.Transition("p1", StateStopping, func(p *Process) { p.PID = 99 })
	if !errors.Is(err, boom) {
		t.Fatalf("Transition with a failing persister: got %v, want %v", err, boom)
	}
	if !reflect.DeepEqual(got, before) {
		t.Errorf("returned record: got %+v, want %+v", got, before)
	}
	after, _ := r.Process("p1")
	if !reflect.DeepEqual(after, before) {
		t.Errorf("stored record after a failed commit: got %+v, want %+v", after, before)
	}

	// Sessions obey the same rule.
	p.setFail(nil)
	if _, _, err := r.OpenSession(Session{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	p.setFail(boom)
	if _, err := r.SetSessionState("s1", SessionEnding, "bye"); !errors.Is(err, boom) {
		t.Errorf("SetSessionState with a failing persister: got %v, want %v", err, boom)
	}
	if s, _ := r.Session("s1"); s.State != SessionActive || s.EndReason != "" {
		t.Errorf("session after a failed commit: got %s/%q, want %s/\"\"", s.State, s.EndReason, SessionActive)
	}
	if _, _, err := r.OpenSession(Session{ID: "s2"}); !errors.Is(err, boom) {
		t.Errorf("OpenSession with a failing persister: got %v, want %v", err, boom)
	}
	if _, err := r.Session("s2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Session(s2) after a failed open: got %v, want %v", err, ErrNotFound)
	}
}

func TestLookup(t *testing.T) {
	r, _ := newTestRegistry()
	add := func(id, name string) {
		t.Helper()
		if _, err := r.AddProcess(Process{ID: id, Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	add("p1", "unique")
	add("p2", "twin")
	add("p3", "twin")
	add("p4", "gone")
	if _, err := r.Transition("p4", StateFailed, nil); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		query   string
		wantID  string
		wantErr error
	}{
		{"p1", "p1", nil},
		{"p2", "p2", nil},
		{"unique", "p1", nil},
		{"twin", "", ErrAmbiguous},
		{"gone", "", ErrNotFound}, // only a final process carries it
		{"nothing", "", ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			got, err := r.Lookup(tt.query)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Lookup(%q) error: got %v, want %v", tt.query, err, tt.wantErr)
			}
			if got.ID != tt.wantID {
				t.Errorf("Lookup(%q): got id %q, want %q", tt.query, got.ID, tt.wantID)
			}
		})
	}

	_, err := r.Lookup("twin")
	for _, id := range []string{"p2", "p3"} {
		if err == nil || !strings.Contains(err.Error(), id) {
			t.Errorf("ambiguous error %q: want it to list %s", err, id)
		}
	}
}

func TestOpenSession(t *testing.T) {
	r, p := newTestRegistry()
	s, created, err := r.OpenSession(Session{ID: "s1", HostPID: 7, State: SessionEnded})
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	if !created {
		t.Errorf("created: got false, want true")
	}
	if s.State != SessionActive || s.StartedAt.IsZero() {
		t.Errorf("new session: got state %s, started %v; want active with a start time", s.State, s.StartedAt)
	}
	if n := p.sessionPuts(); n != 1 {
		t.Errorf("session commits: got %d, want 1", n)
	}

	// Idempotent while active: same record, no new commit.
	again, created, err := r.OpenSession(Session{ID: "s1", HostPID: 8})
	if err != nil {
		t.Fatalf("OpenSession again: %v", err)
	}
	if created {
		t.Errorf("created on reopen: got true, want false")
	}
	if !reflect.DeepEqual(again, s) {
		t.Errorf("reopened session: got %+v, want %+v", again, s)
	}
	if n := p.sessionPuts(); n != 1 {
		t.Errorf("session commits after reopen: got %d, want 1", n)
	}

	// Refused while ending.
	if _, err := r.SetSessionState("s1", SessionEnding, "host died"); err != nil {
		t.Fatalf("SetSessionState ending: %v", err)
	}
	if _, _, err := r.OpenSession(Session{ID: "s1"}); !errors.Is(err, ErrBadTransition) {
		t.Errorf("OpenSession while ending: got %v, want %v", err, ErrBadTransition)
	}

	// Ended sets EndedAt and the reason.
	ended, err := r.SetSessionState("s1", SessionEnded, "")
	if err != nil {
		t.Fatalf("SetSessionState ended: %v", err)
	}
	if ended.EndedAt == nil {
		t.Fatalf("EndedAt: got nil, want a time")
	}
	if ended.EndReason != "host died" {
		t.Errorf("EndReason: got %q, want %q", ended.EndReason, "host died")
	}
	if _, err := r.SetSessionState("s1", SessionActive, ""); !errors.Is(err, ErrBadTransition) {
		t.Errorf("SetSessionState ended→active: got %v, want %v", err, ErrBadTransition)
	}
	if _, err := r.SetSessionState("nope", SessionEnded, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetSessionState of an unknown id: got %v, want %v", err, ErrNotFound)
	}

	// An ended session is replaced by a fresh one on reopen.
	fresh, created, err := r.OpenSession(Session{ID: "s1", HostPID: 9})
	if err != nil {
		t.Fatalf("OpenSession after end: %v", err)
	}
	if !created || fresh.State != SessionActive || fresh.EndedAt != nil || fresh.EndReason != "" || fresh.HostPID != 9 {
		t.Errorf("reopened ended session: got created=%v %+v, want a fresh active session of host 9", created, fresh)
	}
}

func TestSessions(t *testing.T) {
	r, _ := newTestRegistry()
	for _, id := range []string{"a", "b", "c"} {
		if _, _, err := r.OpenSession(Session{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.SetSessionState("b", SessionEnded, "done"); err != nil {
		t.Fatal(err)
	}
	ids := func(ss []Session) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	if got, want := ids(r.Sessions(false)), []string{"a", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Sessions(false): got %v, want %v", got, want)
	}
	if got, want := ids(r.Sessions(true)), []string{"a", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Sessions(true): got %v, want %v", got, want)
	}
}

func TestProcessesFilter(t *testing.T) {
	r, _ := newTestRegistry()
	for _, p := range []Process{
		{ID: "a1", Session: "A"},
		{ID: "a2", Session: "A"},
		{ID: "b1", Session: "B"},
		{ID: "b2", Session: "B"},
	} {
		if _, err := r.AddProcess(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Transition("a2", StateFailed, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Transition("b2", StateLost, nil); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"live", Filter{}, []string{"a1", "b1"}},
		{"all", Filter{All: true}, []string{"a1", "a2", "b1", "b2"}},
		{"session A live", Filter{Session: "A"}, []string{"a1"}},
		{"session A all", Filter{Session: "A", All: true}, []string{"a1", "a2"}},
		{"session B all", Filter{Session: "B", All: true}, []string{"b1", "b2"}},
		{"unknown session", Filter{Session: "C", All: true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range r.Processes(tt.f) {
				got = append(got, p.ID)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Processes(%+v): got %v, want %v", tt.f, got, tt.want)
			}
		})
	}
}

func TestNewSeedsRecords(t *testing.T) {
	p := &fakePersister{}
	r := New(p, nil, []Session{{ID: "s", State: SessionActive}}, []Process{{ID: "x", State: StateRunning, Name: "srv"}})
	if _, err := r.Session("s"); err != nil {
		t.Errorf("Session(s): got %v, want nil", err)
	}
	got, err := r.Lookup("srv")
	if err != nil || got.ID != "x" {
		t.Errorf("Lookup(srv): got %q, %v; want x, nil", got.ID, err)
	}
	if n := p.procPuts() + p.sessionPuts(); n != 0 {
		t.Errorf("commits while seeding: got %d, want 0", n)
	}
}

// TestUpdateLogged: the event goes to the persister with the record, in
// the same PutProcess call, carrying the record's session; fn refusing
// or the commit failing logs nothing.
func TestUpdateLogged(t *testing.T) {
	r, p := newTestRegistry()
	if _, err := r.AddProcess(Process{ID: "p1", Session: "s1"}); err != nil {
		t.Fatal(err)
	}
	got, err := r.UpdateLogged("p1", Logged{Kind: "process.start", Detail: "pid 7"}, func(pr *Process) error {
		pr.PID, pr.State = 7, StateRunning
		return nil
	})
	if err != nil || got.PID != 7 || got.State != StateRunning {
		t.Fatalf("UpdateLogged: %+v, %v", got, err)
	}
	p.mu.Lock()
	evs := append([]Event(nil), p.events...)
	ops := append([]string(nil), p.ops...)
	p.mu.Unlock()
	if len(evs) != 1 || evs[0].Kind != "process.start" || evs[0].Session != "s1" || evs[0].Process != "p1" || evs[0].Detail != "pid 7" || evs[0].Time.IsZero() {
		t.Fatalf("events: %+v", evs)
	}
	if want := []string{"put p:p1", "put p:p1"}; !reflect.DeepEqual(ops, want) {
		t.Errorf("commits: %v, want %v (the event in the second)", ops, want)
	}

	refused := errors.New("no")
	if _, err := r.UpdateLogged("p1", Logged{Kind: "x"}, func(*Process) error { return refused }); !errors.Is(err, refused) {
		t.Errorf("fn refusing: %v", err)
	}
	p.setFail(errors.New("disk full"))
	if _, err := r.UpdateLogged("p1", Logged{Kind: "y"}, func(pr *Process) error { pr.Health = "ok"; return nil }); err == nil {
		t.Error("a failed commit: no error")
	}
	p.setFail(nil)
	p.mu.Lock()
	n := len(p.events)
	p.mu.Unlock()
	if n != 1 {
		t.Errorf("events after a refused and a failed update: %d, want 1", n)
	}

	// A commit whose events alone were lost is a commit.
	p.setFail(fmt.Errorf("put: %w: damaged log", ErrEventsNotLogged))
	got, err = r.UpdateLogged("p1", Logged{Kind: "z"}, func(pr *Process) error { pr.Health = "ok"; return nil })
	p.setFail(nil)
	if err != nil || got.Health != "ok" {
		t.Errorf("an update whose events were not logged: %+v, %v; want it applied", got, err)
	}
	if again, _ := r.Process("p1"); again.Health != "ok" {
		t.Errorf("the registry did not keep the committed change: %+v", again)
	}
}

// OpenGeneration never reopens an ended session: the host's next session
// is the first of id, id-2, id-3, ... that has not ended.
func TestOpenGeneration(t *testing.T) {
	r, _ := newTestRegistry()
	open := func(want string, wantCreated bool) {
		t.Helper()
		s, created, err := r.OpenGeneration(Session{ID: "host-1-2", HostPID: 1})
		if err != nil || s.ID != want || created != wantCreated || s.State != SessionActive {
			t.Fatalf("OpenGeneration: %s created %v state %s err %v; want %s created %v active", s.ID, created, s.State, err, want, wantCreated)
		}
	}
	end := func(id string) {
		t.Helper()
		if _, err := r.SetSessionState(id, SessionEnded, "test"); err != nil {
			t.Fatal(err)
		}
	}
	open("host-1-2", true)
	open("host-1-2", false)
	end("host-1-2")
	open("host-1-2-2", true)
	open("host-1-2-2", false)
	end("host-1-2-2")
	open("host-1-2-3", true)
	// An id the user chose is reopened as asked.
	if s, _, err := r.OpenSession(Session{ID: "host-1-2", HostPID: 1}); err != nil || s.State != SessionActive {
		t.Fatalf("OpenSession of the ended id: %+v %v, want it reopened", s, err)
	}
}

// UpdateLoggedAfter calls first after fn and before the commit, and a
// reader never sees the change uncommitted; a failing fn skips first, a
// failing commit comes after it.
func TestUpdateLoggedAfter(t *testing.T) {
	r, p := newTestRegistry()
	if _, err := r.AddProcess(Process{ID: "a", Session: "s", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	var order []string
	seen := make(chan Process, 1)
	first := func() {
		p.mu.Lock()
		order = append(order, fmt.Sprintf("first after %d commits", len(p.procs)))
		p.mu.Unlock()
		// A reader asks now; it must wait for the commit.
		go func() {
			got, _ := r.Process("a")
			seen <- got
		}()
		time.Sleep(20 * time.Millisecond) // give the reader its chance to read too early
	}
	got, err := r.UpdateLoggedAfter("a", first, Logged{Kind: "process.start", Detail: "pid 7"}, func(pr *Process) error {
		pr.PID, pr.State = 7, StateRunning
		return nil
	})
	if err != nil || got.PID != 7 {
		t.Fatalf("update: %+v, %v", got, err)
	}
	if want := []string{"first after 1 commits"}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("first ran %v, want %v (before the second commit)", order, want)
	}
	if rd := <-seen; rd.PID != 7 || rd.State != StateRunning {
		t.Errorf("a reader during first saw pid %d %s, want the committed pid 7 running", rd.PID, rd.State)
	}
	if len(p.events) != 1 || p.events[0].Kind != "process.start" {
		t.Errorf("events %+v, want the start event with the commit", p.events)
	}

	called := false
	if _, err := r.UpdateLoggedAfter("a", func() { called = true }, Logged{Kind: "x"}, func(*Process) error { return errors.New("no") }); err == nil || called {
		t.Errorf("fn failing: err %v, first called %v; want an error and first skipped", err, called)
	}
	p.fail = errors.New("disk full")
	called = false
	if _, err := r.UpdateLoggedAfter("a", func() { called = true }, Logged{Kind: "x"}, func(pr *Process) error { pr.Name = "m"; return nil }); err == nil || !called {
		t.Errorf("commit failing: err %v, first called %v; want first called and the error", err, called)
	}
	if rd, _ := r.Process("a"); rd.Name != "n" {
		t.Errorf("name %q after a failed commit, want the old n", rd.Name)
	}
}

// TestCloneProcSharesNothing: a record handed out shares no slice or
// pointer with the registry's own, so a caller that changes its copy
// (a restarted daemon reopening a server's egress proxy, say) cannot
// change the stored record behind the registry's lock and commit. Every
// reference field of Process is set here: a new one makes the test fail
// until it is set and copied.
func TestCloneProcSharesNothing(t *testing.T) {
	code, at := 1, time.Unix(1, 0)
	orig := Process{
		ID: "p", Argv: []string{"srv"}, ExitedAt: &at, ExitCode: &code,
		Stop:         &StopRecord{Procs: []StoppedProc{{PID: 1}}, Left: []int{1}, Spared: []int{2}, Unproven: []int{3}},
		Stdio:        []StdioInode{{Fd: 0}},
		Clients:      []Client{{ID: "c"}},
		Usage:        &Usage{Procs: 1},
		Limits:       &Limits{PidsMax: 1},
		LimitCgroups: []string{"/a"}, LimitHit: []string{"memory"},
		Egress: &Egress{Hosts: []string{"example.com:443"}, Port: 1},
	}
	clone := cloneProc(orig)
	if !reflect.DeepEqual(clone, orig) {
		t.Fatalf("clone differs: %+v, want %+v", clone, orig)
	}
	shared := func(path string, a, b reflect.Value) {
		t.Helper()
		switch a.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map:
			if a.IsNil() {
				t.Errorf("%s is nil in the test's record: set it, so the test checks it is copied", path)
			} else if a.Pointer() == b.Pointer() {
				t.Errorf("%s is shared between a record and its clone", path)
			}
		}
	}
	ov, cv := reflect.ValueOf(orig), reflect.ValueOf(clone)
	for i := range ov.NumField() {
		name := ov.Type().Field(i).Name
		shared(name, ov.Field(i), cv.Field(i))
		// One level down: the slices inside a copied struct.
		if f := ov.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() && f.Elem().Kind() == reflect.Struct {
			for j := range f.Elem().NumField() {
				if sf := f.Elem().Type().Field(j); sf.IsExported() { // not time.Time's location
					shared(name+"."+sf.Name, f.Elem().Field(j), cv.Field(i).Elem().Field(j))
				}
			}
		}
	}
}
