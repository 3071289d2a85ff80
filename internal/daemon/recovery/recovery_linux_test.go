//go:build linux

package recovery

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/lockfile"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
	"github.com/seed-86a41135/supervisor/store"
)

// daemonSide is the daemon's side of recovery, as the daemon acts on it:
// it commits what Lose closes, and writes down every act, which the test
// checks. It signals nothing: recovery must not either.
type daemonSide struct {
	reg     *registry.Registry
	mu      sync.Mutex
	adopted []string
	lost    map[string]string
	events  []string
	watched []string
	// adoptFails makes Adopt of these ids fail.
	adoptFails map[string]bool
}

func (c *daemonSide) Adopt(p registry.Process) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.adoptFails[p.ID] {
		return false, fmt.Errorf("cannot watch pid %d", p.PID)
	}
	c.adopted = append(c.adopted, p.ID)
	return false, nil
}

func (c *daemonSide) Lose(p registry.Process, why string) {
	if _, err := c.reg.Transition(p.ID, registry.StateLost, func(r *registry.Process) { r.Error = why }); err != nil {
		panic(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost[p.ID] = why
}

func (c *daemonSide) Target(p registry.Process) shutdown.Target {
	return shutdown.Target{ID: p.ID, PID: p.PID, PGID: p.PGID, Token: p.Token, Session: p.Session}
}

func (c *daemonSide) WatchHost(s registry.Session) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watched = append(c.watched, s.ID)
	if proc.Verify(s.HostPID, s.HostToken) != nil {
		return fmt.Errorf("host %d is gone", s.HostPID)
	}
	return nil
}

func (c *daemonSide) Event(kind, session, process, detail string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, kind+" "+process+" "+detail)
}

// marked starts a sleeping process carrying the instance marker for id
// (none when id is ""), in session sess with host marker host, and kills
// it, by PID, when the test ends.
func marked(t *testing.T, instance, id, sess, host string) proc.Info {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Env = append(os.Environ(), spawn.EnvInstance+"="+instance, spawn.EnvSessionID+"="+sess)
	if id != "" {
		cmd.Env = append(cmd.Env, spawn.EnvProcID+"="+id)
	}
	if host != "" {
		cmd.Env = append(cmd.Env, spawn.EnvHost+"="+host)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	tok, err := proc.TokenOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return proc.Info{PID: cmd.Process.Pid, PGID: cmd.Process.Pid, Token: tok}
}

// record commits a process record as the daemon before would have left
// it: state to, with pid and token (none when pid is 0).
func record(t *testing.T, reg *registry.Registry, id, sess string, to registry.ProcState, p proc.Info) {
	t.Helper()
	if _, err := reg.AddProcess(registry.Process{ID: id, Session: sess, Name: "sleep", Argv: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	if to == registry.StateStarting {
		return
	}
	_, err := reg.Update(id, func(r *registry.Process) error {
		r.PID, r.PGID, r.Token, r.State = p.PID, p.PGID, p.Token, registry.StateRunning
		return nil
	})
	if err == nil && to != registry.StateRunning {
		_, err = reg.Transition(id, to, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestReconcileDecidesEachCase runs one recovery over every case the design
// names (§7), with real processes, real /proc and a real bbolt registry,
// and checks what it decided for each.
func TestReconcileDecidesEachCase(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "registry.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := registry.New(st, nil, nil, nil)
	instance := fmt.Sprintf("test-%d-%d", os.Getpid(), time.Now().UnixNano())
	me, err := proc.TokenOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A live host (this test) and a dead one (a process that exited).
	liveHost := fmt.Sprintf("%d-%d", os.Getpid(), me.StartTicks)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadHost := fmt.Sprintf("%d-1", gone.Process.Pid)
	if _, _, err := reg.OpenSession(registry.Session{ID: "s-live", HostPID: os.Getpid(), HostToken: me}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.OpenSession(registry.Session{ID: "s-ending", HostPID: os.Getpid(), HostToken: me}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.SetSessionState("s-ending", registry.SessionEnding, "host exited"); err != nil {
		t.Fatal(err)
	}

	alive := marked(t, instance, "p-alive", "s-live", "")
	record(t, reg, "p-alive", "s-live", registry.StateRunning, alive)

	stopping := marked(t, instance, "p-stopping", "s-live", "")
	record(t, reg, "p-stopping", "s-live", registry.StateStopping, stopping)

	// Forked, but the daemon died before it recorded the PID: the marker
	// names it.
	unrecorded := marked(t, instance, "p-nopid", "s-live", "")
	record(t, reg, "p-nopid", "s-live", registry.StateStarting, proc.Info{})

	// Its PID is alive, but under another start time: a stranger.
	stranger := marked(t, "another-instance", "", "s-live", "")
	wrong := stranger
	wrong.Token.StartTicks++
	record(t, reg, "p-recycled", "s-live", registry.StateRunning, wrong)

	// An intent record whose process never started.
	record(t, reg, "p-never", "s-live", registry.StateStarting, proc.Info{})

	// Markers the store does not know: one of a live host, one of a dead.
	strayLive := marked(t, instance, "p-stray-live", "host-"+liveHost, liveHost)
	strayDead := marked(t, instance, "p-stray-dead", "host-"+deadHost, deadHost)

	// A marker of another instance is not ours, whatever it claims.
	marked(t, "another-instance", "p-alive", "s-live", "")

	// Alive, but the daemon cannot watch it: closed, and left to stop.
	unwatchable := marked(t, instance, "p-adopt-fails", "s-live", "")
	record(t, reg, "p-adopt-fails", "s-live", registry.StateRunning, unwatchable)

	ports := filepath.Join(dir, "ports")
	if err := os.MkdirAll(ports, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(ports, "8080.lock")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	heldPath := filepath.Join(ports, "9090.lock")
	held, err := os.Create(heldPath)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// A lock held by another open file description, as a live taker
	// holds it (flock conflicts between descriptions, even in one process).
	if err := lockfile.TryLock(held); err != nil {
		t.Fatal(err)
	}

	side := &daemonSide{reg: reg, lost: map[string]string{}, adoptFails: map[string]bool{"p-adopt-fails": true}}
	res := Reconcile(Config{Registry: reg, Instance: instance, StateDir: dir}, side)

	sort.Strings(side.adopted)
	if got, want := strings.Join(side.adopted, " "), "p-alive p-nopid p-stopping p-stray-live"; got != want {
		t.Errorf("adopted %q, want %q", got, want)
	}
	if got := strings.Join(res.Resume, " "); got != "p-stopping" {
		t.Errorf("resumed %q, want the record found stopping", got)
	}
	if p, err := reg.Process("p-nopid"); err != nil || p.PID != unrecorded.PID || !p.Token.Matches(unrecorded.Token) {
		t.Errorf("the unrecorded PID was not taken from its marker: %+v (%v), want pid %d", p, err, unrecorded.PID)
	}
	for id, want := range map[string]string{
		"p-recycled":    fmt.Sprintf("pid %d now belongs to another process", stranger.PID),
		"p-never":       "the daemon stopped before the process was started",
		"p-adopt-fails": "gone while the daemon was down",
	} {
		if !strings.Contains(side.lost[id], want) {
			t.Errorf("%s closed as %q, want %q", id, side.lost[id], want)
		}
	}
	if len(side.lost) != 3 {
		t.Errorf("closed %v as lost, want three", side.lost)
	}
	// What lost records left, and the dead host's stray, are for the
	// daemon to stop; the live ones are not among them.
	targets := map[string]shutdown.Target{}
	for _, tg := range res.Leftovers {
		targets[tg.ID] = tg
	}
	for _, id := range []string{"p-recycled", "p-never", "p-adopt-fails", "p-stray-dead"} {
		if _, ok := targets[id]; !ok {
			t.Errorf("no leftovers target for %s: %v", id, res.Leftovers)
		}
	}
	if len(targets) != 4 {
		t.Errorf("leftovers %v, want four", res.Leftovers)
	}
	if tg := targets["p-stray-dead"]; tg.PID != strayDead.PID || !tg.Token.Matches(strayDead.Token) {
		t.Errorf("the dead host's stray is targeted as %+v, want pid %d with its token", tg, strayDead.PID)
	}
	// The stranger's target carries the recorded token, which its process
	// does not have: the cascade's token check spares it.
	if tg := targets["p-recycled"]; proc.Verify(tg.PID, tg.Token) == nil {
		t.Errorf("the stranger on a recycled pid verifies against the record's token: it would be signalled")
	}
	if p, err := reg.Process("p-stray-live"); err != nil || p.PID != strayLive.PID || p.State != registry.StateRunning {
		t.Errorf("the live host's stray was not recorded as running with its pid %d: %+v (%v)", strayLive.PID, p, err)
	}
	if s, err := reg.Session("host-" + liveHost); err != nil || s.State != registry.SessionActive {
		t.Errorf("the stray's session was not opened for its live host: %+v (%v)", s, err)
	}
	if got := strings.Join(res.Ending, " "); got != "s-ending" {
		t.Errorf("ending sessions %q, want s-ending", got)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale port lock is still there: %v", err)
	}
	if _, err := os.Stat(heldPath); err != nil {
		t.Errorf("a held port lock was removed: %v", err)
	}
	want := struct{ adopted, lost, stopped, removed int }{4, 3, 2, 1}
	s := res.Summary
	if got := (struct{ adopted, lost, stopped, removed int }{s.Adopted, s.Lost, s.Stopped, s.FilesRemoved}); got != want {
		t.Errorf("summary adopted/lost/stopped/removed = %+v, want %+v", got, want)
	}
	strayEvent := false
	for _, e := range side.events {
		strayEvent = strayEvent || strings.HasPrefix(e, "process.stray p-stray-dead")
	}
	if !strayEvent {
		t.Errorf("no process.stray event for the dead host's stray: %v", side.events)
	}
	// Recovery signals nothing itself: every process is still alive.
	for _, p := range []proc.Info{alive, stopping, unrecorded, stranger, strayLive, strayDead} {
		if err := proc.Verify(p.PID, p.Token); err != nil {
			t.Errorf("pid %d is no longer alive after recovery: %v", p.PID, err)
		}
	}
}
