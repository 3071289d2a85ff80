//go:build linux

package main

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/proc"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/shutdown"
)

// pastBackoff is longer than any restart backoff these tests can meet
// (1 s first, 4 s after two crashes): a restart that a stop failed to
// cancel has happened by then. The one place these tests wait on time:
// they assert that something does not happen.
const pastBackoff = 6 * time.Second

// assertStoppedForGood checks that the shared server id on port, whose
// last process was pid, stayed stopped: no process of it lives, nothing
// listens on the port, its record is final (exited, not stopping) and no
// other record runs on the port; then that an ensure starts a fresh one.
func assertStoppedForGood(t *testing.T, in *instance, id string, pid, port int, ensureArgs ...string) {
	t.Helper()
	time.Sleep(pastBackoff)
	if ls := proc.PortListeners(port); len(ls) > 0 {
		t.Errorf("port %d is listened on again after the stop, by pid %d (%v): the stop was undone", port, ls[0].PID, ls[0].Argv)
	}
	for _, p := range in.mustProcesses(true) {
		switch {
		case p.ID == id:
			if p.State != registry.StateExited {
				t.Errorf("record %s is %s (health %q), want exited: a stop by request is final", p.ID, p.State, p.Health)
			}
			if p.PID != pid {
				t.Errorf("record %s names pid %d, the stopped one was %d: it was restarted", p.ID, p.PID, pid)
			}
			if p.PID > 0 && alive(p.PID, p.Token) {
				t.Errorf("record %s's process %d is alive", p.ID, p.PID)
			}
		case p.Port == port && !p.State.Final():
			t.Errorf("record %s (pid %d) is %s on port %d after the stop", p.ID, p.PID, p.State, port)
		}
	}
	again, errOut, code := in.ensure(t, ensureArgs...)
	if code != 0 {
		t.Fatalf("ensure after the stop: exit %d: %s", code, errOut)
	}
	cleanupByPID(t, again.PID)
	if !again.Started || again.ID == id || again.PID == pid {
		t.Fatalf("ensure after the stop got %+v; want a fresh server (the old was %s, pid %d)", again, id, pid)
	}
}

// A `supervisor stop` of a shared server is final: its restart policy
// does not undo it (issue 13, item 3).
func TestStopOfSharedServerIsFinal(t *testing.T) {
	in := newInstance(t)
	port := freePort(t)
	ps := strconv.Itoa(port)
	args := []string{"--session", "sr", "--port", ps, "--name", "stopme", "--interval", "200ms", "--", bin, "_fixture", "listen", ps}
	res, errOut, code := in.ensure(t, args...)
	if code != 0 {
		t.Fatalf("ensure: exit %d: %s", code, errOut)
	}
	cleanupByPID(t, res.PID)
	tok := mustToken(t, res.PID)
	out := in.mustRun("stop", "--json", "stopme")
	var outs []shutdown.Outcome
	if err := json.Unmarshal([]byte(out), &outs); err != nil || len(outs) != 1 {
		t.Fatalf("stop --json: %v: %s", err, out)
	}
	if outs[0].Result != shutdown.ExitedOnSIGTERM {
		t.Errorf("stop outcome %q, want %q", outs[0].Result, shutdown.ExitedOnSIGTERM)
	}
	waitGonePID(t, res.PID, tok)
	assertStoppedForGood(t, in, res.ID, res.PID, port, args...)
}

// A stop by id while the shared server is between a crash and its restart
// (in backoff) cancels the restart.
func TestStopOfSharedServerInBackoffIsFinal(t *testing.T) {
	in := newInstance(t)
	port := freePort(t)
	ps := strconv.Itoa(port)
	args := []string{"--session", "sb", "--port", ps, "--name", "crashy", "--interval", "200ms", "--", bin, "_fixture", "listen", ps}
	res, errOut, code := in.ensure(t, args...)
	if code != 0 {
		t.Fatalf("ensure: exit %d: %s", code, errOut)
	}
	cleanupByPID(t, res.PID)
	// Two crashes double the backoff to 4 s, room enough to land a stop
	// in the third one's.
	pid := res.PID
	for n := 1; n <= 2; n++ {
		killByPIDNow(t, pid)
		p := waitRecord(t, in, 0, func(p registry.Process) bool {
			return p.ID == res.ID && p.Restarts == n && p.Health == "healthy" && p.PID != pid
		})
		pid = p.PID
		cleanupByPID(t, pid)
	}
	killByPIDNow(t, pid)
	waitRecord(t, in, 0, func(p registry.Process) bool { return p.ID == res.ID && p.Health == "restarting" })
	out := in.mustRun("stop", "--json", res.ID)
	var outs []shutdown.Outcome
	if err := json.Unmarshal([]byte(out), &outs); err != nil || len(outs) != 1 {
		t.Fatalf("stop --json: %v: %s", err, out)
	}
	if outs[0].Result != shutdown.AlreadyGone {
		t.Errorf("stop outcome %q, want %q: the stop did not land in the backoff", outs[0].Result, shutdown.AlreadyGone)
	}
	assertStoppedForGood(t, in, res.ID, pid, port, args...)
}
