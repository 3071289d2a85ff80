//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/api"

	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/shutdown"

	"syscall"
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
			if p.State != api.StateExited {
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
	t.Parallel()
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
	t.Parallel()
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
		p := waitRecord(t, in, 0, func(p api.Process) bool {
			return p.ID == res.ID && p.Restarts == n && p.Health == "healthy" && p.PID != pid
		})
		pid = p.PID
		cleanupByPID(t, pid)
	}
	killByPIDNow(t, pid)
	waitRecord(t, in, 0, func(p api.Process) bool { return p.ID == res.ID && p.Health == "restarting" })
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

// TestGraceAboveTheCapIsRefused: every way in refuses a grace above
// shutdown.MaxGrace (issue 13, item 4): the CLI's flags, the config file
// and the daemon's API.
func TestGraceAboveTheCapIsRefused(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	const huge = "1000000h"
	for _, args := range [][]string{
		{"run", "--grace", huge, "--", "true"},
		{"ensure", "--grace", huge, "--port", "9", "--", "true"},
		{"stop", "--grace", huge, "x"},
		{"session", "end", "--grace", huge, "x"},
		{"daemon", "stop", "--grace", huge},
		{"init", "--grace", huge, "--", "true"},
	} {
		_, errOut, code := in.run(args...)
		if code == 0 || !strings.Contains(errOut, "above the maximum of "+shutdown.MaxGrace.String()) {
			t.Errorf("supervisor %s: exit %d, stderr %q; want it refused for the cap", strings.Join(args, " "), code, errOut)
		}
	}
	if pid := in.daemonPID(); pid != 0 {
		t.Fatalf("a refused command started a daemon (pid %d)", pid)
	}

	cfg := in.writeConfig("grace = \"" + huge + "\"\n")
	_, errOut, code := in.run("config", "show")
	if code == 0 || !strings.Contains(errOut, cfg+":1: grace: \""+huge+"\" is above the maximum grace of 5m0s") {
		t.Errorf("config show with grace = %s: exit %d, stderr %q; want the file:line refusal", huge, code, errOut)
	}
	in.writeConfig("")

	in.mustRun("daemon")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ms := int64(1000000 * time.Hour / time.Millisecond)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	fd := int(null.Fd())
	for _, tc := range []struct {
		typ string
		req any
		fds []int
	}{
		{api.TypeStop, &api.StopRequest{Target: "x", GraceMS: ms}, nil},
		{api.TypeSessionEnd, &api.SessionEndRequest{ID: "x", GraceMS: ms}, nil},
		{api.TypeDaemonStop, &api.DaemonStop{GraceMS: ms}, nil},
		{api.TypeEnsure, &api.EnsureRequest{RunRequest: api.RunRequest{Argv: api.Bytes{"true"}, Session: "g", GraceMS: ms}, Port: 9}, nil},
		{api.TypeRun, &api.RunRequest{Argv: api.Bytes{"true"}, Session: "g", GraceMS: ms}, []int{fd, fd, fd}},
		// Past the range of time.Duration in nanoseconds: no overflow to a
		// negative (default) grace.
		{api.TypeStop, &api.StopRequest{Target: "x", GraceMS: 1 << 62}, nil},
	} {
		c, err := api.Dial(ctx, in.socket())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send(tc.typ, tc.req, tc.fds...); err != nil {
			t.Fatal(err)
		}
		m, fds, err := c.Recv()
		api.CloseFds(fds)
		c.Close()
		var e *api.Error
		if err == nil {
			err = api.DecodeReply(m, nil)
		}
		if !errors.As(err, &e) || !strings.Contains(e.Message, "above the maximum of "+shutdown.MaxGrace.String()) {
			t.Errorf("%s with grace_ms %d: got %v (frame %q); want the cap's refusal", tc.typ, ms, err, m.Type)
		}
	}
	if in.daemonPID() == 0 {
		t.Fatal("the daemon is gone after the refused requests")
	}
}

// bgCLI is a CLI command running in the background, its stderr read line
// by line.
type bgCLI struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	lines  chan string // stderr, closed at its EOF
	done   chan struct{}
}

func (in *instance) startCLI(t *testing.T, args ...string) *bgCLI {
	t.Helper()
	b := &bgCLI{cmd: in.command(args...), lines: make(chan string, 100), done: make(chan struct{})}
	b.cmd.Stdout = &b.stdout
	stderr, err := b.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Logf("%s: %s", args[0], sc.Text())
			b.lines <- sc.Text()
		}
		close(b.lines)
		b.cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(func() {
		b.cmd.Process.Kill()
		<-b.done
	})
	return b
}

// waitLine waits for a stderr line containing want.
func (b *bgCLI) waitLine(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case l, ok := <-b.lines:
			if !ok {
				t.Fatalf("%v ended without printing %q", b.cmd.Args[1:], want)
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			t.Fatalf("%v printed no %q within %v", b.cmd.Args[1:], want, wait)
		}
	}
}

// exit waits for the command (well within the long graces under test)
// and returns its status.
func (b *bgCLI) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(wait):
		t.Fatalf("%v still running after %v", b.cmd.Args[1:], wait)
	}
	return b.cmd.ProcessState.ExitCode()
}

// longStop starts a server that ignores SIGTERM in session and a
// `session end` of it with a 60 s grace, and waits until that shows its
// progress: SIGTERM sent, the long grace under way.
func (in *instance) longStop(t *testing.T, session string) (int, proc.Token, *bgCLI) {
	t.Helper()
	sh := in.startShim("--session", session, "--", bin, "_fixture", "ignore-term")
	pid := sh.readyPID(t)
	tok := mustToken(t, pid)
	end := in.startCLI(t, "session", "end", session, "--grace", "60s")
	end.waitLine(t, "SIGTERM sent to 1 process, waiting up to 1m0s…")
	return pid, tok, end
}

// A second `session end --grace 0s` shortens a session end waiting out a
// long grace; both finish long before it is over.
func TestSecondSessionEndShortensTheGrace(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	pid, tok, first := in.longStop(t, "long")
	// Bounded by the test's wait (30 s), half the long grace.
	second := in.startCLI(t, "session", "end", "long", "--grace", "0s")
	if code := second.exit(t); code != 0 {
		t.Fatalf("second session end: exit %d: %s", code, second.stdout.String())
	}
	waitGonePID(t, pid, tok)
	if code := first.exit(t); code != 0 {
		t.Fatalf("first session end: exit %d", code)
	}
	assertSummaryLine(t, first.stdout.String(), pid, bin, shutdown.Killed)
	p := findByPID(t, in, pid)
	if p.State != api.StateExited {
		t.Errorf("record %s, want exited", p.State)
	}
}

// `daemon stop` shortens a session end waiting out a long grace, and says
// what it waits for.
func TestDaemonStopShortensARunningStop(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	pid, tok, first := in.longStop(t, "long")
	stop := in.startCLI(t, "daemon", "stop", "--grace", "1s")
	stop.waitLine(t, "1 process already being stopped, waiting up to 1s…")
	if code := stop.exit(t); code != 0 {
		t.Fatalf("daemon stop: exit %d: %s", code, stop.stdout.String())
	}
	waitGonePID(t, pid, tok)
	if code := first.exit(t); code != 0 {
		t.Fatalf("session end: exit %d", code)
	}
	assertSummaryLine(t, first.stdout.String(), pid, bin, shutdown.Killed)
}

// A client that goes away mid-stop leaves no stop halfway: the cascade
// finishes, the record is final and the session ended.
func TestStopOutlivesItsClient(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	sh := in.startShim("--session", "gone", "--", bin, "_fixture", "ignore-term")
	pid := sh.readyPID(t)
	tok := mustToken(t, pid)
	end := in.startCLI(t, "session", "end", "gone", "--grace", "3s")
	end.waitLine(t, "SIGTERM sent to 1 process, waiting up to 3s…")
	end.cmd.Process.Kill()
	<-end.done
	waitGonePID(t, pid, tok)
	if p := findByPID(t, in, pid); p.State != api.StateExited {
		t.Errorf("record %s, want exited", p.State)
	}
	waitCond(t, func() error {
		var sessions []api.SessionInfo
		json.Unmarshal([]byte(in.mustRun("sessions", "--all", "--json")), &sessions)
		for _, s := range sessions {
			if s.ID == "gone" && s.State != api.SessionEnded {
				return fmt.Errorf("session gone is %s", s.State)
			}
		}
		return nil
	})
}

// A run in a session that is being ended does not wedge behind its long
// stop: it fails, bounded, saying why.
func TestRunInEndingSessionFailsBounded(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	pid, tok, first := in.longStop(t, "long")
	_, errOut, code := in.run("run", "--session", "long", "--", bin, "_fixture", "echo")
	if code != 125 || !strings.Contains(errOut, "session long is being ended") {
		t.Errorf("run in the ending session: exit %d, stderr %q; want 125 and why", code, errOut)
	}
	if code := in.startCLI(t, "session", "end", "long", "--grace", "0s").exit(t); code != 0 {
		t.Errorf("second session end: exit %d", code)
	}
	waitGonePID(t, pid, tok)
	first.exit(t)
}

// assertSummaryLine checks a stop summary's line for pid: its command
// (which starts with command) and how it ended, with when
// ("  4711  node server.js  killed after 5.0s").
func assertSummaryLine(t *testing.T, out string, pid int, command string, result shutdown.Result) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^  ` + strconv.Itoa(pid) + ` +` + regexp.QuoteMeta(command) + `.* +` +
		regexp.QuoteMeta(string(result)) + ` after [0-9]+\.[0-9]s$`)
	if !re.MatchString(out) {
		t.Errorf("the stop summary has no line %q for pid %d:\n%s", re, pid, out)
	}
}

// A client that does not ask for progress (an older one) gets its reply
// as the first frame, however long the stop takes.
func TestLongStopWithoutProgressAnswersFirst(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	sh := in.startShim("--session", "old", "--", bin, "_fixture", "ignore-term")
	pid := sh.readyPID(t)
	tok := mustToken(t, pid)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := api.Dial(ctx, in.socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The wire form of an older client's request: no progress field.
	if err := c.Send(api.TypeSessionEnd, json.RawMessage(`{"id":"old","grace_ms":2000}`)); err != nil {
		t.Fatal(err)
	}
	m, fds, err := c.Recv()
	api.CloseFds(fds)
	if err != nil {
		t.Fatal(err)
	}
	var outs api.Outcomes
	if m.Type != api.TypeOutcomes || api.DecodeReply(m, &outs) != nil || len(outs.Outcomes) != 1 ||
		outs.Outcomes[0].Result != shutdown.Killed {
		t.Fatalf("first frame %s %s; want the outcomes, the server killed", m.Type, m.Body)
	}
	waitGonePID(t, pid, tok)
}

// `supervisor stop` of a server that outlasts a second shows progress on
// stderr and then the summary line of each process.
func TestStopShowsProgressAndSummary(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	sh := in.startShim("--session", "p", "--name", "stubborn", "--", bin, "_fixture", "ignore-term")
	pid := sh.readyPID(t)
	tok := mustToken(t, pid)
	stop := in.startCLI(t, "stop", "stubborn", "--grace", "2s")
	stop.waitLine(t, "SIGTERM sent to 1 process, waiting up to 2s…")
	if code := stop.exit(t); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	waitGonePID(t, pid, tok)
	out := stop.stdout.String()
	if !strings.HasPrefix(out, "p-") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "stubborn: killed") {
		t.Errorf("stop printed %q; want a first line naming the server and its outcome", out)
	}
	assertSummaryLine(t, out, pid, bin, shutdown.Killed)
}

// TestSecondSignalForcesTheStop: a server ignoring SIGTERM under the
// longest grace; the second SIGTERM to the shim must not wait it out.
func TestSecondSignalForcesTheStop(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	// A shim that stays and turns signals into stop requests; a server in
	// its shim's place gets the host's signals itself.
	in.env = append(in.env, "SUPERVISOR_IN_PLACE=off")
	s := in.startShim("--grace", "5m", "--", bin, "_fixture", "ignore-term")
	pid := s.readyPID(t)
	tok := mustToken(t, pid)
	s.cmd.Process.Signal(syscall.SIGTERM)
	findByPIDState(t, in, pid, "stopping")
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code := s.exitCode(t); code != 137 {
		t.Fatalf("shim exit %d, want 137 (SIGKILLed by the forced stop)", code)
	}
	waitGonePID(t, pid, tok)
}

// TestStopResumesAfterDaemonCrash: a daemon killed in the middle of a stop
// leaves the record "stopping"; the next daemon finishes the stop with the
// process's own grace.
func TestStopResumesAfterDaemonCrash(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	h := in.startHost(t, 1, "--grace", "200ms", "--", bin, "_fixture", "ignore-term")
	pid, tok := h.servers[0], h.tokens[0]
	p := findByPIDState(t, in, pid, "running")
	stop := in.command("stop", p.ID, "--grace", "5m")
	if err := stop.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stop.Process.Kill(); stop.Wait() }()
	findByPIDState(t, in, pid, "stopping")
	killByPIDNow(t, in.daemonPID())
	if !alive(pid, tok) {
		t.Fatal("server died with the daemon")
	}
	in.mustRun("daemon")
	waitGonePID(t, pid, tok)
	if got := findByPID(t, in, pid); got.State != "exited" {
		t.Fatalf("record %s, want exited", got.State)
	}
}
