//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
)

// eventsJSON runs `events --json ARGS` and decodes the array.
func (in *instance) eventsJSON(args ...string) []api.Event {
	in.t.Helper()
	out := in.mustRun(append([]string{"events", "--json"}, args...)...)
	var evs []api.Event
	if err := json.Unmarshal([]byte(out), &evs); err != nil {
		in.t.Fatalf("decode events --json: %v: %s", err, out)
	}
	return evs
}

// waitEvents polls `events --json ARGS` until ok accepts the list.
func (in *instance) waitEvents(ok func([]api.Event) bool, args ...string) []api.Event {
	in.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		evs := in.eventsJSON(args...)
		if ok(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			in.t.Fatalf("events %v: not there within %v; got %+v", args, wait, evs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kindsOf returns the kinds of session's events, and the process of each
// process.* event.
func kindsOf(evs []api.Event, session string) (kinds map[string]bool, procs map[string]string) {
	kinds, procs = map[string]bool{}, map[string]string{}
	for _, ev := range evs {
		if ev.Session != session {
			continue
		}
		kinds[ev.Kind] = true
		if strings.HasPrefix(ev.Kind, "process.") {
			procs[ev.Kind] = ev.Process
		}
	}
	return kinds, procs
}

// runLifecycle is a whole run in session: the lifecycle the log must show.
func (in *instance) runLifecycle(session string) {
	in.t.Helper()
	in.mustRun("run", "--session", session, "--", bin, "_fixture", "exit", "0")
	in.mustRun("session", "end", session)
}

func hasLifecycle(session string) func([]api.Event) bool {
	return func(evs []api.Event) bool {
		kinds, procs := kindsOf(evs, session)
		return kinds["session.start"] && kinds["process.start"] && kinds["process.exit"] && kinds["session.end"] &&
			procs["process.start"] != "" && procs["process.start"] == procs["process.exit"]
	}
}

func TestEventsLogsLifecycle(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.runLifecycle("ev-1")
	evs := in.waitEvents(hasLifecycle("ev-1"))

	for i, ev := range evs {
		if ev.Time.IsZero() || ev.Kind == "" || ev.Seq == 0 {
			t.Errorf("event %d = %+v: want a time, a kind and a sequence number", i, ev)
		}
		if i > 0 && ev.Seq <= evs[i-1].Seq {
			t.Errorf("event %d has seq %d after %d: want oldest first", i, ev.Seq, evs[i-1].Seq)
		}
	}

	t.Run("json field names", func(t *testing.T) {
		out := in.mustRun("events", "--json", "--lines", "1")
		var objs []map[string]any
		if err := json.Unmarshal([]byte(out), &objs); err != nil || len(objs) != 1 {
			t.Fatalf("events --json --lines 1: %v, %d objects: %s", err, len(objs), out)
		}
		for _, k := range []string{"seq", "time", "kind", "session", "process", "detail"} {
			if _, ok := objs[0][k]; !ok {
				t.Errorf("events --json object lacks %q: %s", k, out)
			}
		}
	})

	t.Run("text", func(t *testing.T) {
		out := in.mustRun("events")
		for _, want := range []string{"TIME", "session.start", "process.start", "process.exit", "ev-1"} {
			if !strings.Contains(out, want) {
				t.Errorf("events printed no %q:\n%s", want, out)
			}
		}
	})

	t.Run("lines", func(t *testing.T) {
		got := in.eventsJSON("--lines", "2")
		if len(got) != 2 || got[1].Seq != evs[len(evs)-1].Seq {
			t.Errorf("events --lines 2: got %+v, want the newest two of %d", got, len(evs))
		}
		if _, errOut, code := in.run("events", "--lines", "-1"); code == 0 || !strings.Contains(errOut, "supervisor: --lines") {
			t.Errorf("events --lines -1: exit %d, stderr %q; want a --lines error", code, errOut)
		}
	})

	t.Run("session filter", func(t *testing.T) {
		in.runLifecycle("ev-2")
		in.waitEvents(hasLifecycle("ev-2"))
		got := in.eventsJSON("--session", "ev-1")
		if !hasLifecycle("ev-1")(got) {
			t.Errorf("events --session ev-1 lacks its lifecycle: %+v", got)
		}
		for _, ev := range got {
			if ev.Session != "ev-1" {
				t.Errorf("events --session ev-1 printed %+v", ev)
			}
		}
		if got := in.eventsJSON("--session", "no-such"); len(got) != 0 {
			t.Errorf("events --session no-such: got %+v, want none", got)
		}
	})
}

// follower is a running `events -f --json` and its decoded lines.
type follower struct {
	cmd    *exec.Cmd
	lines  chan api.Event
	stderr *bytes.Buffer
	done   chan struct{}
}

func (in *instance) startFollower(args ...string) *follower {
	in.t.Helper()
	cmd := in.command(append([]string{"events", "-f", "--json"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		in.t.Fatal(err)
	}
	f := &follower{cmd: cmd, lines: make(chan api.Event, 1000), stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = f.stderr
	if err := cmd.Start(); err != nil {
		in.t.Fatal(err)
	}
	t := in.t
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(f.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev api.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("events -f --json printed a line that is no JSON object: %q: %v", sc.Text(), err)
				continue
			}
			f.lines <- ev
		}
	}()
	in.t.Cleanup(func() {
		cmd.Process.Kill()
		<-f.done
	})
	// Wait closes the pipe: only once the reader has seen its end.
	go func() {
		<-read
		cmd.Wait()
		close(f.done)
	}()
	return f
}

// next returns the next event the follower printed.
func (f *follower) next(t *testing.T) api.Event {
	t.Helper()
	select {
	case ev, ok := <-f.lines:
		if !ok {
			t.Fatalf("events -f stopped printing; stderr: %s", f.stderr)
		}
		return ev
	case <-time.After(wait):
		t.Fatalf("events -f printed nothing within %v", wait)
	}
	return api.Event{}
}

// exitCode waits for the follower to exit.
func (f *follower) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(wait):
		t.Fatalf("events -f (pid %d) did not exit within %v", f.cmd.Process.Pid, wait)
	}
	return f.cmd.ProcessState.ExitCode()
}

func TestEventsFollow(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.runLifecycle("before")
	before := in.waitEvents(hasLifecycle("before"))
	lastSeq := before[len(before)-1].Seq

	f := in.startFollower()
	// The backlog first: once the newest event of it is printed, the
	// follower polls, and whatever comes next arrives by following.
	for ev := f.next(t); ev.Seq != lastSeq; ev = f.next(t) {
		if ev.Seq > lastSeq {
			t.Fatalf("follower printed seq %d before the backlog's last %d", ev.Seq, lastSeq)
		}
	}
	in.runLifecycle("after")
	var got []api.Event
	for !hasLifecycle("after")(got) {
		ev := f.next(t)
		if ev.Seq <= lastSeq {
			t.Fatalf("follower printed seq %d again or out of order (last %d)", ev.Seq, lastSeq)
		}
		lastSeq = ev.Seq
		got = append(got, ev)
	}

	if err := f.cmd.Process.Signal(unix.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := f.exitCode(t); code != 0 {
		t.Errorf("events -f after SIGINT: exit %d, want 0; stderr: %s", code, f.stderr)
	}

	t.Run("daemon goes away", func(t *testing.T) {
		f := in.startFollower("--session", "none-yet")
		time.Sleep(3 * eventsPoll) // let it reach its poll loop
		in.mustRun("daemon", "stop")
		if code := f.exitCode(t); code == 0 || !strings.Contains(f.stderr.String(), "daemon went away") {
			t.Errorf("events -f when the daemon stopped: exit %d, stderr %q; want a failure saying the daemon went away",
				code, f.stderr)
		}
	})
}

func TestEventsWithoutDaemon(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	_, errOut, code := in.run("events")
	if code == 0 || !strings.Contains(errOut, api.ErrNotRunning.Error()) || !strings.Contains(errOut, "hint:") {
		t.Errorf("events without a daemon: exit %d, stderr %q; want a not-running error with a hint", code, errOut)
	}
}

// TestRetentionCompactsEndedSessions: with a one-second retention, an ended
// session and its exited process leave the listings, while a live session
// stays and the lifecycle log keeps what happened.
func TestRetentionCompactsEndedSessions(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_RETENTION=1s") // reaches the auto-started daemon
	live := in.startShim("--session", "live-1", "--", bin, "_fixture", "sleep")
	live.readyPID(t)
	in.runLifecycle("old-1")
	in.waitEvents(hasLifecycle("old-1"))

	deadline := time.Now().Add(wait)
	for {
		var sessions []api.SessionInfo
		out := in.mustRun("sessions", "--all", "--json")
		if err := json.Unmarshal([]byte(out), &sessions); err != nil {
			t.Fatalf("decode sessions --all --json: %v: %s", err, out)
		}
		ids := map[string]bool{}
		for _, s := range sessions {
			ids[s.ID] = true
		}
		if !ids["live-1"] {
			t.Fatalf("the live session was compacted away: %s", out)
		}
		if !ids["old-1"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ended session old-1 still listed %v after it ended with a 1s retention: %s", wait, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range in.mustProcesses(true) {
		if p.Session == "old-1" {
			t.Errorf("process %s of the compacted session still listed: %+v", p.ID, p)
		}
	}
	if ps := in.mustProcesses(false); len(ps) != 1 || ps[0].Session != "live-1" {
		t.Errorf("live processes after compaction: got %+v, want live-1's server", ps)
	}
	if !hasLifecycle("old-1")(in.eventsJSON("--session", "old-1")) {
		t.Errorf("the lifecycle log lost old-1's events with its records")
	}
}

func TestRetentionBadValue(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_RETENTION=7d")
	cmd := in.command("daemon", "--foreground")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(wait):
		cmd.Process.Kill() // it took the bad value and runs: the failure below
		<-exited
	}
	if code := cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(stderr.String(), `SUPERVISOR_RETENTION="7d"`) {
		t.Errorf("daemon with SUPERVISOR_RETENTION=7d: exit %d, stderr %q; want an error naming the variable", code, stderr.String())
	}
}

// breakerKinds returns the breaker.* kinds of evs in order.
func breakerKinds(evs []api.Event) []string {
	var out []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.Kind, "breaker.") && ev.Kind != "breaker.refused" {
			out = append(out, ev.Kind)
		}
	}
	return out
}

func TestEventsBreakerTransitions(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_BREAKER_COOLDOWN=1s")
	failing := []string{"run", "--name", "crashy", "--", "/bin/sh", "-c", "exit 3"}
	for range 3 {
		in.run(failing...)
	}
	has := func(want ...string) func([]api.Event) bool {
		return func(evs []api.Event) bool {
			return strings.Join(breakerKinds(evs), " ") == strings.Join(want, " ")
		}
	}
	in.waitEvents(has("breaker.open"))
	waitFor(t, 1100*time.Millisecond)
	if _, errOut, code := in.run(failing...); code != 3 {
		t.Fatalf("trial after the cooldown: exit %d, want 3: %s", code, errOut)
	}
	in.waitEvents(has("breaker.open", "breaker.half-open", "breaker.open"))
	in.mustRun("breaker", "reset", "crashy")
	evs := in.waitEvents(has("breaker.open", "breaker.half-open", "breaker.open", "breaker.closed"))
	for _, ev := range evs {
		if strings.HasPrefix(ev.Kind, "breaker.") && !strings.Contains(ev.Detail, "crashy") {
			t.Errorf("%s event does not name the server: %+v", ev.Kind, ev)
		}
	}
}

// TestEventsSharedServer: a shared server's start, readiness, crash,
// restart and stop for good are in the log under its shared-PORT session.
func TestEventsSharedServer(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	ps := strconv.Itoa(freePort(t))
	res, _, code := in.ensure(t, "--session", "sh", "--port", ps, "--linger", "200ms", "--interval", "200ms",
		"--", bin, "_fixture", "listen", ps)
	if code != 0 {
		t.Fatalf("ensure: exit %d", code)
	}
	killByPIDNow(t, res.PID)
	in.waitEvents(func(evs []api.Event) bool {
		var got []string
		for _, ev := range evs {
			if ev.Process == res.ID && ev.Session == "shared-"+ps {
				got = append(got, ev.Kind)
			}
		}
		// Two incarnations under one id; the order of the exit and the
		// restart decision is not the log's to promise.
		all := " " + strings.Join(got, " ") + " "
		return strings.Count(all, " process.start ") == 2 && strings.Count(all, " shared.ready ") == 2 &&
			strings.Contains(all, " process.exit ") && strings.Contains(all, " shared.restart ")
	}, "--session", "shared-"+ps)
	in.mustRun("session", "end", "sh")
	in.waitEvents(func(evs []api.Event) bool {
		kinds, _ := kindsOf(evs, "shared-"+ps)
		return kinds["shared.stop"] && kinds["process.stop"]
	}, "--session", "shared-"+ps)
}
