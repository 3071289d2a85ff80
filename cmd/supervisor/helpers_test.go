//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/keeper"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/spawn"
)

// bin is the real supervisor binary, built once by TestMain, and leanBin
// the lean run entry beside it (cmd/supervisor-run).
var bin, leanBin string

// viaLean (SUPERVISOR_TEST_LEAN=1) makes every `supervisor run` a test
// starts through in.command go through the lean entry instead: the fast
// path runs the same crash, fault and wrong-kill tests as the shim.
var viaLean = os.Getenv("SUPERVISOR_TEST_LEAN") == "1"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "supervisor-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// 0755 so a daemon run as another uid (the foreign-uid test) can exec it.
	os.Chmod(dir, 0o755)
	bin = filepath.Join(dir, "supervisor")
	build := exec.Command("go", "build", "-o", bin, ".")
	// Without cgo, as releases are built (scripts/release): a pure-Go
	// binary differs, e.g. it exits where every goroutine blocks.
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build supervisor:", err)
		os.Exit(1)
	}
	leanBin = filepath.Join(dir, "supervisor-run")
	build = exec.Command("go", "build", "-o", leanBin, "../supervisor-run")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build supervisor-run:", err)
		os.Exit(1)
	}
	code := m.Run()
	// Whatever still runs this build outlived the test that started it
	// (once, a daemon and the keeper watching it, restarted while a
	// cleanup removed their state directory): it goes by pid, keepers
	// first, and is named, so the machine is left as the tests found it.
	if left := killBuildLeftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "supervisor tests: %d process(es) of this build outlived their tests and were killed: %s\n",
			len(left), strings.Join(left, "; "))
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// killBuildLeftovers SIGKILLs every process that runs the binaries
// TestMain built, keepers before the rest (a keeper restarts its daemon),
// and describes each.
func killBuildLeftovers() []string {
	var left []string
	for pass := 0; pass < 2; pass++ { // a daemon a keeper restarted meanwhile
		infos, _ := proc.Scan()
		var keepers, others []int
		for _, info := range infos {
			exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", info.PID))
			if err != nil || (exe != bin && exe != leanBin) || info.State == 'Z' {
				continue
			}
			if argv, _ := proc.Cmdline(info.PID); len(argv) > 1 && argv[1] == keeper.Command {
				keepers = append(keepers, info.PID)
			} else {
				others = append(others, info.PID)
			}
		}
		for _, pid := range append(keepers, others...) {
			argv, _ := proc.Cmdline(pid)
			if tok, err := proc.TokenOf(pid); err == nil {
				killByToken(pid, tok)
				left = append(left, fmt.Sprintf("pid %d %q", pid, argv))
			}
		}
	}
	return left
}

// wait bounds every wait on an event: generous, because the machines are
// shared and noisy. Timings are measured in bench/, never asserted here.
const wait = 30 * time.Second

// instance is one private daemon instance: its own state dir and socket.
type instance struct {
	t     *testing.T
	state string
	env   []string
	lean  string // the lean entry its runs use under viaLean; "" is leanBin
	// via, when set, starts its commands through this one (a shell that
	// sets a variable for them), which gets the binary and its arguments
	// after its own.
	via []string
}

func newInstance(t *testing.T) *instance {
	t.Helper()
	// A short directory: the socket path must fit sun_path.
	dir, err := os.MkdirTemp("", "sv")
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{t: t, state: dir}
	in.env = append(os.Environ(),
		api.EnvStateDir+"="+dir,
		api.EnvSocket+"="+filepath.Join(dir, "s.sock"),
		"SUPERVISOR_SESSION=", // never inherit one from the environment
		// Never the user's config file; a test writes one here to use one.
		"SUPERVISOR_CONFIG="+filepath.Join(dir, "config.toml"),
		// A daemon started by a test's first shim can take longer than
		// the default 2 s on a loaded CI machine; that shim would then
		// run its server in local mode, and the daemon would not know it.
		// Tests of local mode reach it at once (no daemon can start) or
		// set it back.
		settings.EnvLocalAfter+"=10s",
	)
	t.Cleanup(func() {
		in.cleanup()
		os.RemoveAll(dir)
	})
	return in
}

func (in *instance) socket() string { return filepath.Join(in.state, "s.sock") }

// cleanup stops the daemon and then makes sure, by PID and token, that
// nothing any test started under this instance is left.
func (in *instance) cleanup() {
	if in.t.Failed() {
		// A daemon a run started logs to the state directory, which
		// goes with this cleanup: its words are the failure's witness.
		for _, name := range []string{"supervisor.log", keeper.LogFile} {
			if b, err := os.ReadFile(filepath.Join(in.state, name)); err == nil {
				in.t.Logf("%s:\n%s", name, tail(b, 64<<10))
			}
		}
	}
	procs, _ := in.processes(true)
	// The daemon first, stopped on purpose: its keeper then ends without
	// starting another. Killing the keeper first made the daemon start a
	// replacement that watches it, which could outlive this cleanup: it
	// took a daemon that ended once the state directory was being removed
	// for a crash, and started one again there.
	if pid := in.daemonPID(); pid > 0 {
		cmd := in.command("daemon", "stop")
		_ = cmd.Run() // what it could not stop is killed below
		killByPID(pid)
	}
	for _, p := range procs {
		if p.PID > 0 && proc.Verify(p.PID, p.Token) == nil {
			in.t.Errorf("process %s (pid %d) outlived its daemon", p.ID, p.PID)
			unix.Kill(-p.PGID, unix.SIGKILL)
			unix.Kill(p.PID, unix.SIGKILL)
		}
	}
	// A keeper left (one pausing between restarts, or whose daemon the
	// stop could not end) would start a daemon again.
	for _, pid := range in.keepers() {
		if tok, err := proc.TokenOf(pid); err == nil {
			killByToken(pid, tok)
		}
	}
	for _, pid := range foregroundDaemons(in.state) {
		killByPID(pid)
	}
	// A log hub ends with its last pipe once no daemon is left.
	for _, pid := range in.logHubs() {
		killByPID(pid)
	}
}

// logHubs lists the running log hubs of this instance (by the socket in
// their command line).
func (in *instance) logHubs() []int {
	infos, _ := proc.Scan()
	var out []int
	for _, info := range infos {
		argv, _ := proc.Cmdline(info.PID)
		if len(argv) == 4 && argv[0] == bin && argv[1] == "_log-writer" && argv[3] == in.socket() {
			out = append(out, info.PID)
		}
	}
	return out
}

// keepers lists the running daemon keepers of this instance.
func (in *instance) keepers() []int { return keeper.Find(in.state) }

// daemonPID returns the pid of this instance's daemon, 0 if none runs.
func (in *instance) daemonPID() int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := api.Dial(ctx, in.socket())
	if err != nil {
		return 0
	}
	defer c.Close()
	return c.Daemon.PID
}

// killByPID gives pid 10 s to exit on its own (a leftover the test
// expected gone), then SIGKILLs it by its token.
func killByPID(pid int) {
	tok, err := proc.TokenOf(pid)
	if err != nil || proc.WaitExit(pid, tok, 10*time.Second) {
		return
	}
	killByToken(pid, tok)
}

// killByToken SIGKILLs pid through a handle verified against tok and
// waits for it; one already gone (or recycled) is left alone.
func killByToken(pid int, tok proc.Token) {
	h, err := proc.OpenHandle(pid, tok)
	if err != nil {
		return
	}
	defer h.Close()
	h.Signal(unix.SIGKILL)
	h.Wait(wait)
}

func (in *instance) command(args ...string) *exec.Cmd {
	exe := bin
	if viaLean && len(args) > 0 && args[0] == "run" {
		exe, args = leanBin, args[1:]
		if in.lean != "" {
			exe = in.lean
		}
	}
	cmd := exec.Command(exe, args...)
	if len(in.via) > 0 {
		cmd = exec.Command(in.via[0], append(append(in.via[1:], exe), args...)...)
	}
	cmd.Env = in.env
	return cmd
}

// run runs the CLI to completion.
func (in *instance) run(args ...string) (stdout, stderr string, code int) {
	in.t.Helper()
	cmd := in.command(args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			in.t.Fatalf("run supervisor %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return o.String(), e.String(), code
}

func (in *instance) mustRun(args ...string) string {
	in.t.Helper()
	out, errOut, code := in.run(args...)
	if code != 0 {
		in.t.Fatalf("supervisor %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func (in *instance) processes(all bool) ([]api.Process, error) {
	args := []string{"ps", "--json"}
	if all {
		args = append(args, "--all")
	}
	cmd := in.command(args...)
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var ps []api.Process
	if err := json.Unmarshal(out, &ps); err != nil {
		return nil, fmt.Errorf("decode ps --json: %w: %s", err, out)
	}
	return ps, nil
}

func (in *instance) mustProcesses(all bool) []api.Process {
	in.t.Helper()
	ps, err := in.processes(all)
	if err != nil {
		in.t.Fatalf("ps: %v", err)
	}
	return ps
}

// shim is a `supervisor run` started by the test acting as its host.
type shimProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	done   chan struct{}
	err    error
}

// startShim starts `supervisor run ARGS` with pipes for stdin and stdout.
func (in *instance) startShim(args ...string) *shimProc {
	in.t.Helper()
	cmd := in.command(append([]string{"run"}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		in.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		in.t.Fatal(err)
	}
	cmd.Stderr = &prefixWriter{t: in.t, prefix: "shim: "}
	// A shim started through in.via is the wrapper's child: the wrapper
	// gets a process group of its own, and the cleanup ends the group, so
	// no shim outlives its test holding stdout.
	if len(in.via) > 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		in.t.Fatal(err)
	}
	s := &shimProc{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(stdout), done: make(chan struct{})}
	go func() { s.err = cmd.Wait(); close(s.done) }()
	in.t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			if len(in.via) > 0 {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // our own group: the wrapper and its shim
			}
			cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// readyPID reads the fixture's "ready PID" line.
func (s *shimProc) readyPID(t *testing.T) int {
	t.Helper()
	line, err := readLine(s.stdout, wait)
	if err != nil {
		t.Fatalf("waiting for the server's ready line: %v", err)
	}
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "ready" {
		t.Fatalf("got line %q, want \"ready PID\"", line)
	}
	pid, _ := strconv.Atoi(f[1])
	cleanupByPID(t, pid)
	return pid
}

// exitCode waits for the shim and returns its status.
func (s *shimProc) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(wait):
		t.Fatalf("shim %d did not exit within %v", s.cmd.Process.Pid, wait)
	}
	return s.cmd.ProcessState.ExitCode()
}

// endedBy waits for the shim and reports whether its status says its
// server died of sig: 128+sig from a shim that stayed, or the signal
// itself from a server exec'd in its shim's place (the host's own child).
func (s *shimProc) endedBy(t *testing.T, sig syscall.Signal) (bool, string) {
	t.Helper()
	code := s.exitCode(t)
	ws, _ := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if code == 128+int(sig) || ws.Signaled() && ws.Signal() == sig {
		return true, ""
	}
	return false, s.cmd.ProcessState.String()
}

func readLine(r *bufio.Reader, d time.Duration) (string, error) {
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := r.ReadString('\n')
		ch <- res{strings.TrimSpace(s), err}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-time.After(d):
		return "", fmt.Errorf("no line within %v", d)
	}
}

// waitGonePID waits until pid (with the token it has now) has exited.
func waitGonePID(t *testing.T, pid int, tok proc.Token) {
	t.Helper()
	if !proc.WaitExit(pid, tok, wait) {
		t.Fatalf("process %d still alive after %v", pid, wait)
	}
}

// alive reports whether pid still runs with tok (zombies count as gone).
func alive(pid int, tok proc.Token) bool { return proc.Verify(pid, tok) == nil }

func mustToken(t *testing.T, pid int) proc.Token {
	t.Helper()
	tok, err := proc.TokenOf(pid)
	if err != nil {
		t.Fatalf("token of %d: %v", pid, err)
	}
	return tok
}

type prefixWriter struct {
	t      *testing.T
	prefix string
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s%s", w.prefix, strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// daemonsOf lists the running daemons whose environment points at state.
func daemonsOf(state string) []int {
	infos, _ := proc.Scan()
	var out []int
	for _, info := range infos {
		argv, _ := proc.Cmdline(info.PID)
		if len(argv) < 2 || argv[0] != bin || argv[1] != "daemon" {
			continue
		}
		env, _ := proc.Environ(info.PID)
		for _, kv := range env {
			if kv == api.EnvStateDir+"="+state {
				out = append(out, info.PID)
			}
		}
	}
	return out
}

// waitBreakerOpen waits for the instance's one circuit breaker to be
// open. A server exec'd in its shim's place is its host's child: the host
// may see its exit before the daemon has counted it.
func (in *instance) waitBreakerOpen(t *testing.T) {
	t.Helper()
	waitCond(t, func() error {
		var bs []spawn.Breaker
		json.Unmarshal([]byte(in.mustRun("breaker", "list", "--json")), &bs)
		if len(bs) != 1 || bs[0].State != spawn.BreakerOpen {
			return fmt.Errorf("breakers %+v, want one open", bs)
		}
		return nil
	})
}

// tail is at most the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
