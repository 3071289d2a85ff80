//go:build linux

package shutdown

// The cascade never reaps: every process these tests start is reaped by a
// cmd.Wait goroutine of the test (there is no central reaper in this test
// binary, so exec.Cmd.Wait is safe here).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

const eventWait = 10 * time.Second

const helperEnv = "GO_WANT_HELPER"

// TestHelperProcess is not a test: it is the body of the helper processes
// the tests start (os.Args[0] with GO_WANT_HELPER set). Modes:
//
//	ignore-term  ignore SIGTERM, print "ready", block
//	report-term  catch SIGTERM, print "ready", then "term" per SIGTERM, block
//	tree         start a "leaf" child in the same process group, print
//	             "ready <leaf pid>", block; with HELPER_IGNORE_TERM=1 both
//	             ignore SIGTERM
//	leaf         like ignore-term when HELPER_IGNORE_TERM=1, else default
//	             SIGTERM handling; print "ready", block
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	ignore := os.Getenv("HELPER_IGNORE_TERM") == "1"
	switch mode {
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
	case "report-term":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		fmt.Println("ready")
		for range ch {
			fmt.Println("term")
		}
	case "leaf":
		if ignore {
			signal.Ignore(syscall.SIGTERM)
		}
		fmt.Println("ready")
	case "tree":
		if ignore {
			signal.Ignore(syscall.SIGTERM)
		}
		leaf := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		leaf.Env = append(os.Environ(), helperEnv+"=leaf")
		out, err := leaf.StdoutPipe()
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		if err := leaf.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ready" {
			fmt.Println("error", line, err)
			os.Exit(2)
		}
		fmt.Println("ready", leaf.Process.Pid)
		go leaf.Wait()
	default:
		fmt.Println("error unknown mode", mode)
		os.Exit(2)
	}
	for {
		time.Sleep(time.Hour)
	}
}

// child is a process started by a test, reaped by a goroutine.
type child struct {
	cmd    *exec.Cmd
	pid    int
	tok    proc.Token
	reaped chan struct{}
	lines  chan string // stdout lines, for helpers
}

func (c *child) target(id string) Target {
	return Target{ID: id, PID: c.pid, PGID: c.pid, Token: c.tok}
}

// start starts cmd in its own process group, reaps it in a goroutine and
// kills it (by pid, while unreaped) at cleanup.
func start(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := &child{cmd: cmd, reaped: make(chan struct{}), lines: make(chan string, 16)}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		t.Fatalf("start %q: %v", cmd.Args, err)
	}
	pw.Close()
	c.pid = cmd.Process.Pid
	go func() {
		cmd.Wait()
		close(c.reaped)
	}()
	go func() {
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // os.Process signals through its pidfd: never a recycled pid
		select {
		case <-c.reaped:
		case <-time.After(eventWait):
			t.Errorf("pid %d not reaped within %v of SIGKILL", c.pid, eventWait)
		}
	})
	if c.tok, err = proc.TokenOf(c.pid); err != nil {
		t.Fatalf("TokenOf(%d): %v", c.pid, err)
	}
	return c
}

func startHelper(t *testing.T, mode string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode), env...)
	cmd.Stderr = os.Stderr
	return start(t, cmd)
}

// line waits for the next stdout line of c.
func (c *child) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatalf("pid %d closed its stdout", c.pid)
		}
		if strings.HasPrefix(l, "error") {
			t.Fatalf("helper %d: %s", c.pid, l)
		}
		return l
	case <-time.After(eventWait):
		t.Fatalf("no line from pid %d within %v", c.pid, eventWait)
		return ""
	}
}

// killByToken kills pid if it still carries tok (for processes the test
// did not start directly, such as a helper's child).
func killByToken(pid int, tok proc.Token) {
	h, err := proc.OpenHandle(pid, tok)
	if err != nil {
		return
	}
	defer h.Close()
	h.Signal(unix.SIGKILL)
}

// assertGone checks that the process pid with tok no longer runs (a zombie
// waiting for its parent counts as gone).
func assertGone(t *testing.T, what string, pid int, tok proc.Token) {
	t.Helper()
	if err := proc.Verify(pid, tok); !errors.Is(err, proc.ErrGone) && !errors.Is(err, proc.ErrTokenMismatch) {
		t.Errorf("%s (pid %d) after Stop: got Verify %v, want it gone", what, pid, err)
	}
}

func stop(t *testing.T, c *Cascade, ctx context.Context, targets []Target, opt Options) []Outcome {
	t.Helper()
	done := make(chan []Outcome, 1)
	go func() { done <- c.Stop(ctx, targets, opt) }()
	select {
	case out := <-done:
		if len(out) != len(targets) {
			t.Fatalf("outcomes: got %d, want %d", len(out), len(targets))
		}
		for i, o := range out {
			if o.ID != targets[i].ID || o.PID != targets[i].PID {
				t.Errorf("outcome %d: got %s/%d, want %s/%d", i, o.ID, o.PID, targets[i].ID, targets[i].PID)
			}
		}
		return out
	case <-time.After(30 * time.Second):
		t.Fatalf("Stop did not return within 30s")
		return nil
	}
}

func TestStopExitsOnSIGTERM(t *testing.T) {
	a := start(t, exec.Command("sleep", "60"))
	b := start(t, exec.Command("sleep", "60"))
	out := stop(t, &Cascade{}, context.Background(), []Target{a.target("a"), b.target("b")}, Options{Grace: time.Minute})
	for i, c := range []*child{a, b} {
		if out[i].Result != ExitedOnSIGTERM {
			t.Errorf("%s: got %q, want %q", out[i].ID, out[i].Result, ExitedOnSIGTERM)
		}
		if !slices.Equal(out[i].PIDs, []int{c.pid}) {
			t.Errorf("%s PIDs: got %v, want [%d]", out[i].ID, out[i].PIDs, c.pid)
		}
		if len(out[i].Left) != 0 {
			t.Errorf("%s Left: got %v, want none", out[i].ID, out[i].Left)
		}
		assertGone(t, out[i].ID, c.pid, c.tok)
		select {
		case <-c.reaped:
		case <-time.After(eventWait):
			t.Fatalf("%s not reaped within %v", out[i].ID, eventWait)
		}
		if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGTERM {
			t.Errorf("%s wait status: got %v, want killed by SIGTERM", out[i].ID, c.cmd.ProcessState)
		}
	}
	if s := out[0].String(); !strings.Contains(s, string(ExitedOnSIGTERM)) || !strings.Contains(s, strconv.Itoa(a.pid)) {
		t.Errorf("Outcome.String(): got %q, want it to name the pid and result", s)
	}
}

func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	h := startHelper(t, "ignore-term")
	if l := h.line(t); l != "ready" {
		t.Fatalf("helper: got %q, want ready", l)
	}
	out := stop(t, &Cascade{}, context.Background(), []Target{h.target("h")}, Options{Grace: 200 * time.Millisecond})
	if out[0].Result != Killed {
		t.Errorf("result: got %q, want %q", out[0].Result, Killed)
	}
	if !slices.Equal(out[0].PIDs, []int{h.pid}) {
		t.Errorf("PIDs: got %v, want [%d]", out[0].PIDs, h.pid)
	}
	assertGone(t, "helper", h.pid, h.tok)
	select {
	case <-h.reaped:
	case <-time.After(eventWait):
		t.Fatalf("helper not reaped within %v", eventWait)
	}
	if ws, ok := h.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("wait status: got %v, want killed by SIGKILL", h.cmd.ProcessState)
	}
}

func TestStopGroup(t *testing.T) {
	tests := []struct {
		name       string
		ignoreTerm bool
		want       Result
	}{
		{"exits on SIGTERM", false, ExitedOnSIGTERM},
		{"ignores SIGTERM", true, Killed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := "HELPER_IGNORE_TERM=0"
			if tt.ignoreTerm {
				env = "HELPER_IGNORE_TERM=1"
			}
			h := startHelper(t, "tree", env)
			f := strings.Fields(h.line(t))
			if len(f) != 2 || f[0] != "ready" {
				t.Fatalf("helper: got %q, want ready <pid>", f)
			}
			leaf, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			leafInfo, err := proc.Stat(leaf)
			if err != nil {
				t.Fatalf("Stat(leaf): %v", err)
			}
			t.Cleanup(func() { killByToken(leaf, leafInfo.Token) })
			if leafInfo.PGID != h.pid {
				t.Fatalf("leaf group: got %d, want %d", leafInfo.PGID, h.pid)
			}

			out := stop(t, &Cascade{}, context.Background(), []Target{h.target("tree")}, Options{Grace: 500 * time.Millisecond})
			if out[0].Result != tt.want {
				t.Errorf("result: got %q, want %q", out[0].Result, tt.want)
			}
			want := []int{h.pid, leaf}
			slices.Sort(want)
			if !slices.Equal(out[0].PIDs, want) {
				t.Errorf("PIDs: got %v, want %v", out[0].PIDs, want)
			}
			assertGone(t, "helper", h.pid, h.tok)
			assertGone(t, "leaf", leaf, leafInfo.Token)
		})
	}
}

func TestStopAlreadyGone(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	tok, err := proc.TokenOf(pid)
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	out := stop(t, &Cascade{}, context.Background(), []Target{{ID: "gone", PID: pid, PGID: pid, Token: tok}}, Options{Grace: time.Minute})
	if out[0].Result != AlreadyGone {
		t.Errorf("result: got %q, want %q", out[0].Result, AlreadyGone)
	}
	if len(out[0].PIDs) != 0 || len(out[0].Left) != 0 {
		t.Errorf("PIDs/Left: got %v/%v, want none", out[0].PIDs, out[0].Left)
	}
}

func TestStopWrongTokenNotSignalled(t *testing.T) {
	c := start(t, exec.Command("sleep", "60"))
	bad := Target{ID: "bad", PID: c.pid, PGID: c.pid, Token: proc.Token{BootID: "x", StartTicks: 1}}
	out := stop(t, &Cascade{}, context.Background(), []Target{bad}, Options{Grace: 200 * time.Millisecond, EOFGrace: 50 * time.Millisecond})
	if err := proc.Verify(c.pid, c.tok); err != nil {
		t.Fatalf("process with a mismatching token after Stop: got %v, want it alive and unsignalled", err)
	}
	select {
	case <-c.reaped:
		t.Fatalf("process with a mismatching token exited: %v", c.cmd.ProcessState)
	default:
	}
	if out[0].Result != AlreadyGone {
		t.Errorf("result: got %q, want %q (the recorded process is not there)", out[0].Result, AlreadyGone)
	}
	if len(out[0].PIDs) != 0 {
		t.Errorf("PIDs: got %v, want none", out[0].PIDs)
	}
}

func TestStopExcludedNotSignalled(t *testing.T) {
	h := startHelper(t, "report-term")
	if l := h.line(t); l != "ready" {
		t.Fatalf("helper: got %q, want ready", l)
	}
	casc := &Cascade{Excluded: []int{h.pid}}
	out := stop(t, casc, context.Background(), []Target{h.target("x")}, Options{Grace: 200 * time.Millisecond})
	if err := proc.Verify(h.pid, h.tok); err != nil {
		t.Fatalf("excluded process after Stop: got %v, want it alive", err)
	}
	select {
	case l := <-h.lines:
		t.Errorf("excluded process got a signal: printed %q", l)
	default:
	}
	if slices.Contains(out[0].PIDs, h.pid) {
		t.Errorf("PIDs: got %v, want the excluded pid %d left out", out[0].PIDs, h.pid)
	}
}

func TestStopEOFGrace(t *testing.T) {
	// sleep 1 exits on its own well within the EOF grace; no signal is sent.
	c := start(t, exec.Command("sleep", "1"))
	out := stop(t, &Cascade{}, context.Background(), []Target{c.target("eof")}, Options{EOFGrace: 30 * time.Second, Grace: time.Minute})
	if out[0].Result != ExitedOnEOF {
		t.Errorf("result: got %q, want %q", out[0].Result, ExitedOnEOF)
	}
	if !slices.Equal(out[0].PIDs, []int{c.pid}) {
		t.Errorf("PIDs: got %v, want [%d]", out[0].PIDs, c.pid)
	}
	select {
	case <-c.reaped:
	case <-time.After(eventWait):
		t.Fatalf("not reaped within %v", eventWait)
	}
	if !c.cmd.ProcessState.Success() {
		t.Errorf("wait status: got %v, want a clean exit (no signal)", c.cmd.ProcessState)
	}
}

func TestStopContextCancel(t *testing.T) {
	h := startHelper(t, "report-term")
	if l := h.line(t); l != "ready" {
		t.Fatalf("helper: got %q, want ready", l)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan []Outcome, 1)
	go func() {
		done <- (&Cascade{}).Stop(ctx, []Target{h.target("slow")}, Options{Grace: time.Hour, KillWait: time.Hour})
	}()
	// The helper reports the SIGTERM: the cascade is now inside its grace.
	if l := h.line(t); l != "term" {
		t.Fatalf("helper: got %q, want term", l)
	}
	cancel()
	select {
	case out := <-done:
		if len(out) != 1 || out[0].ID != "slow" {
			t.Fatalf("outcomes: got %+v, want one for slow", out)
		}
		// Interrupted, with what is still running; no SIGKILL was sent.
		if out[0].Result != Interrupted || len(out[0].Left) != 1 || out[0].Left[0] != h.cmd.Process.Pid {
			t.Errorf("outcome: got %+v, want %q leaving pid %d", out[0], Interrupted, h.cmd.Process.Pid)
		}
		select {
		case <-h.reaped:
			t.Errorf("the helper was killed although the cascade was cancelled")
		default:
		}
	case <-time.After(eventWait):
		t.Fatalf("Stop did not return within %v of cancel (grace 1h)", eventWait)
	}
}

func TestForceCutsTheGrace(t *testing.T) {
	h := startHelper(t, "report-term") // exits only on SIGKILL
	if l := h.line(t); l != "ready" {
		t.Fatalf("helper: got %q, want ready", l)
	}
	force := make(chan struct{})
	done := make(chan []Outcome, 1)
	go func() {
		done <- (&Cascade{}).Stop(context.Background(), []Target{h.target("slow")}, Options{Grace: time.Hour, Force: force})
	}()
	if l := h.line(t); l != "term" {
		t.Fatalf("helper: got %q, want term", l)
	}
	close(force)
	select {
	case out := <-done:
		if out[0].Result != Killed {
			t.Errorf("outcome: got %+v, want %q", out[0], Killed)
		}
	case <-time.After(eventWait):
		t.Fatalf("Stop did not return within %v of Force (grace 1h)", eventWait)
	}
}

func TestStopNoTargets(t *testing.T) {
	out := (&Cascade{}).Stop(context.Background(), nil, Options{})
	if len(out) != 0 {
		t.Errorf("outcomes: got %v, want none", out)
	}
}

// Issue 28: once a target's own process has exited (on stdin EOF, say),
// the EOF grace has nothing left to wait for: a descendant that escaped
// its group and never reads stdin is sent SIGTERM at once, not after the
// whole grace.
func TestEOFGraceEndsWithTheServer(t *testing.T) {
	c, gc, gtok := startEscaping(t)
	const eofGrace = 60 * time.Second
	done := make(chan []Outcome, 1)
	go func() {
		done <- (&Cascade{}).Stop(context.Background(), []Target{c.target("eof")}, Options{EOFGrace: eofGrace, Grace: eofGrace})
	}()
	select {
	case out := <-done:
		if out[0].Result != ExitedOnSIGTERM {
			t.Errorf("result %q, want %q (the escapee ends on SIGTERM)", out[0].Result, ExitedOnSIGTERM)
		}
		if proc.Verify(gc, gtok) == nil {
			t.Errorf("escaped descendant %d still runs", gc)
		}
	case <-time.After(eofGrace / 2):
		t.Fatalf("the stop still waits on the EOF grace %v after the server itself exited", eofGrace/2)
	}
}

// Issue 28: a session's stop has several targets; one server exits on
// EOF and leaves an escapee, another does not read stdin at all. The
// escapee gets SIGTERM as soon as its own server is gone, not when the
// other's EOF grace ends.
func TestEOFGraceIsPerTarget(t *testing.T) {
	a, gc, gtok := startEscaping(t)
	b := start(t, exec.Command("sleep", "300")) // never exits on its own
	const eofGrace = 60 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []Outcome, 1)
	go func() {
		done <- (&Cascade{}).Stop(ctx, []Target{a.target("a"), b.target("b")}, Options{EOFGrace: eofGrace, Grace: time.Second})
	}()
	if !proc.WaitExit(gc, gtok, eofGrace/2) {
		cancel()
		<-done
		t.Fatalf("the escapee of the server that exited still runs %v into the other's EOF grace", eofGrace/2)
	}
	cancel() // ends b's grace: the rest of the stop is not this test's
	out := <-done
	if out[0].Result != ExitedOnSIGTERM {
		t.Errorf("target a: %q, want %q (its escapee ended on SIGTERM)", out[0].Result, ExitedOnSIGTERM)
	}
}

// startEscaping starts a server that leaves an escapee (setsid sleep 300,
// which never reads stdin) and exits 0.3 s later, as one does on EOF; the
// escapee is SIGKILLed at cleanup if the test left it.
func startEscaping(t *testing.T) (*child, int, proc.Token) {
	t.Helper()
	c := start(t, exec.Command("sh", "-c", `setsid sleep 300 & echo "ready $!"; sleep 0.3`))
	line := c.line(t)
	gc, err := strconv.Atoi(strings.TrimPrefix(line, "ready "))
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	gtok, err := proc.TokenOf(gc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h, err := proc.OpenHandle(gc, gtok); err == nil {
			h.Signal(syscall.SIGKILL)
			h.Close()
		}
	})
	return c, gc, gtok
}
