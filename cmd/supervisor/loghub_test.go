//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
)

// loud is a stdio server (`_fixture mcp --stderr`, which says each
// request on stderr) under `supervisor run`, with the host's stderr
// read by the test.
type loud struct {
	t     *testing.T
	in    *instance
	name  string
	stdin io.WriteCloser
	out   *bufio.Reader
	errs  *bufio.Reader
	done  chan struct{}
	said  []string // what it said on stderr so far
	// untee'd: its hub died, and the pipe went to a new hub without the
	// host's stderr (the daemon keeps no copy of it).
	unteed bool
}

func startLoud(t *testing.T, in *instance, name string) *loud {
	t.Helper()
	cmd := in.command("run", "--name", name, "--", bin, "_fixture", "mcp", "--stderr")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { errR.Close() })
	cmd.Stderr = errW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	errW.Close()
	l := &loud{t: t, in: in, name: name, stdin: stdin, out: bufio.NewReader(stdout), errs: bufio.NewReader(errR), done: make(chan struct{})}
	go func() { cmd.Wait(); close(l.done) }()
	t.Cleanup(func() {
		select {
		case <-l.done:
		default:
			cmd.Process.Kill()
			<-l.done
		}
	})
	return l
}

// ask sends a request, reads its answer, and waits for the server's
// stderr line about it on the host's stderr.
func (l *loud) ask(id int, method string) {
	l.t.Helper()
	fmt.Fprintf(l.stdin, `{"jsonrpc":"2.0","id":%d,"method":%q}`+"\n", id, method)
	if line, err := readLine(l.out, wait); err != nil || !strings.Contains(line, fmt.Sprintf(`"id":%d`, id)) {
		l.t.Fatalf("%s: answer to %d: %q (%v)", l.name, id, line, err)
	}
	want := fmt.Sprintf("mcp: %s %d", method, id)
	for !l.unteed {
		line, err := readLine(l.errs, wait)
		if err != nil {
			l.t.Fatalf("%s: the host's stderr: %v before %q", l.name, err, want)
		}
		if line == want {
			break
		}
	}
	l.said = append(l.said, want)
}

// stderrEOF reads the host's stderr to its EOF: nobody holds it any more.
func (l *loud) stderrEOF() {
	l.t.Helper()
	for {
		if _, err := readLine(l.errs, wait); err == io.EOF {
			return
		} else if err != nil {
			l.t.Fatalf("%s: the host's stderr: %v, want EOF", l.name, err)
		}
	}
}

// logged waits until the server's log holds everything it said.
func (l *loud) logged() {
	l.t.Helper()
	want := strings.Join(l.said, "\n") + "\n"
	waitCond(l.t, func() error {
		m, _ := filepath.Glob(filepath.Join(l.in.state, "logs", "run", l.name+"@*.log"))
		if len(m) != 1 {
			return fmt.Errorf("logs %v, want one", m)
		}
		b, err := os.ReadFile(m[0])
		if string(b) != want {
			return fmt.Errorf("log %q (%v), want %q", b, err, want)
		}
		return nil
	})
}

// end closes its stdin and waits for `run` to exit.
func (l *loud) end() {
	l.t.Helper()
	l.stdin.Close()
	waitCond(l.t, func() error {
		select {
		case <-l.done:
			return nil
		default:
			return fmt.Errorf("%s still running", l.name)
		}
	})
}

func (in *instance) hubStatus() []api.LogHubStatus {
	in.t.Helper()
	var st api.Status
	if err := json.Unmarshal([]byte(in.mustRun("status", "--json")), &st); err != nil {
		in.t.Fatal(err)
	}
	return st.LogHubs
}

// TestLogHubServesEveryServer: one hub process copies every server's
// stderr, to its host and its log, instead of a writer process each.
func TestLogHubServesEveryServer(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	var servers []*loud
	for i := range 3 {
		l := startLoud(t, in, fmt.Sprintf("loud%d", i))
		l.ask(1, "initialize")
		servers = append(servers, l)
	}
	for i, l := range servers {
		l.ask(2, "tools/list")
		l.ask(3+i, "resources/list")
		l.logged()
	}
	hubs := in.logHubs()
	if len(hubs) != 1 {
		t.Fatalf("log hub processes %v, want one for the three servers", hubs)
	}
	if st := in.hubStatus(); len(st) != 1 || st[0].PID != hubs[0] || st[0].Pipes != 3 || !st[0].Primary {
		t.Fatalf("status log_hubs %+v, want pid %d with 3 pipes", st, hubs[0])
	}
	out := in.mustRun("status")
	if want := fmt.Sprintf("log hub:   pid %d, 3 pipes", hubs[0]); !strings.Contains(out, want) {
		t.Errorf("status says\n%s\nwant a line %q", out, want)
	}
	// Each pipe goes with its server (the host's stderr reaches EOF).
	for _, l := range servers {
		l.end()
		if _, err := io.ReadAll(l.errs); err != nil {
			t.Fatal(err)
		}
	}
	waitCond(t, func() error {
		if st := in.hubStatus(); len(st) != 1 || st[0].Pipes != 0 {
			return fmt.Errorf("log_hubs %+v, want the hub with no pipe", st)
		}
		return nil
	})
}

// TestLogHubDeathLosesNoServer: a SIGKILLed hub takes no server with it
// (the daemon still holds each pipe's read end, so no SIGPIPE) and no
// line written after it died: the daemon hands the pipes to a new hub.
// The hosts' stderr went with the dead hub: they see its EOF.
func TestLogHubDeathLosesNoServer(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	a, b := startLoud(t, in, "a"), startLoud(t, in, "b")
	a.ask(1, "initialize")
	b.ask(1, "initialize")
	hubs := in.logHubs()
	if len(hubs) != 1 {
		t.Fatalf("log hubs %v, want one", hubs)
	}
	killByToken(hubs[0], mustToken(t, hubs[0]))
	for _, l := range []*loud{a, b} {
		l.unteed = true
		l.stderrEOF()
		l.ask(2, "tools/list")
	}
	a.logged()
	b.logged()
	waitCond(t, func() error {
		if st := in.hubStatus(); len(st) != 1 || st[0].PID == hubs[0] || st[0].Pipes != 2 {
			return fmt.Errorf("log_hubs %+v, want a new hub than %d with both pipes", st, hubs[0])
		}
		return nil
	})
	a.end()
	b.end()
}

// TestLogHubRejoinsNextDaemon: a hub outlives its daemon's crash, goes on
// copying, and hands the next daemon its pipes, so that this hub's death
// later still loses nothing.
func TestLogHubRejoinsNextDaemon(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	l := startLoud(t, in, "l")
	l.ask(1, "initialize")
	hubs := in.logHubs()
	if len(hubs) != 1 {
		t.Fatalf("log hubs %v, want one", hubs)
	}
	old := hubs[0]
	pid := in.daemonPID()
	killByToken(pid, mustToken(t, pid))
	l.ask(2, "tools/list") // no daemon: the hub copies alone
	in.mustRun("daemon", "restart")
	waitCond(t, func() error {
		if st := in.hubStatus(); len(st) != 1 || st[0].PID != old || st[0].Pipes != 1 {
			return fmt.Errorf("log_hubs %+v, want hub %d re-joined with its pipe", st, old)
		}
		return nil
	})
	killByToken(old, mustToken(t, old))
	l.unteed = true
	l.stderrEOF()
	l.ask(3, "tools/list")
	l.logged()
	l.end()
}

// TestLogHubOfEarlierDaemonEnds: a re-joined hub that is not where new
// pipes go ends with its last pipe.
func TestLogHubOfEarlierDaemonEnds(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	// A daemon without a keeper: the next one is the next server's shim's
	// to start (a keeper would start one at once, racing the hub's re-join
	// this test orders).
	_, exited := in.startDaemonWith(t, bin)
	l := startLoud(t, in, "first")
	l.ask(1, "initialize")
	hubs := in.logHubs()
	if len(hubs) != 1 {
		t.Fatalf("log hubs %v, want one", hubs)
	}
	old := hubs[0]
	tok := mustToken(t, old)
	// Stopped, it cannot re-join before the next daemon has a hub of its
	// own for the next server.
	if err := unix.Kill(old, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Kill(old, unix.SIGCONT) })
	pid := in.daemonPID()
	killByToken(pid, mustToken(t, pid))
	// The daemon's death orphans the hub's process group, and the kernel
	// sends a stopped member of an orphaned group SIGHUP and SIGCONT as
	// it exits: stopped again once the daemon is reaped, the hub stays
	// so until the test lets it go (no further exit orphans its group).
	<-exited
	if err := unix.Kill(old, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	next := startLoud(t, in, "next")
	next.ask(1, "initialize")
	unix.Kill(old, unix.SIGCONT)
	waitCond(t, func() error {
		st := in.hubStatus()
		if len(st) != 2 || !st[0].Primary || st[0].PID == old || st[1].PID != old || st[1].Pipes != 1 {
			return fmt.Errorf("log_hubs %+v, want a new primary and %d re-joined with one pipe", st, old)
		}
		return nil
	})
	l.ask(2, "tools/list")
	l.logged()
	l.end()
	waitGonePID(t, old, tok)
	if hubs := in.logHubs(); slices.Contains(hubs, old) || len(hubs) != 1 {
		t.Errorf("log hubs %v after the last pipe of %d ended, want the new one alone", hubs, old)
	}
	next.ask(2, "tools/list")
	next.logged()
	next.end()
}

// TestLogHubSurvivesRestarts: through daemon restarts (which leave the
// servers running) one hub keeps copying: a daemon that exits lets its
// hub go rather than starting another, so no two hubs read one pipe.
func TestLogHubSurvivesRestarts(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	l := startLoud(t, in, "l")
	l.ask(1, "initialize")
	first := in.logHubs()
	if len(first) != 1 {
		t.Fatalf("log hubs %v, want one", first)
	}
	for i := range 3 {
		in.mustRun("daemon", "restart")
		waitCond(t, func() error {
			if st := in.hubStatus(); len(st) != 1 || st[0].PID != first[0] || st[0].Pipes != 1 {
				return fmt.Errorf("log_hubs %+v, want hub %d re-joined with its pipe", st, first[0])
			}
			return nil
		})
		if hubs := in.logHubs(); len(hubs) != 1 {
			t.Fatalf("after restart %d: log hub processes %v, want %d alone", i+1, hubs, first[0])
		}
		l.ask(2+i, "tools/list")
	}
	l.logged()
	l.end()
}
