//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/shutdown"
)

// cgroupModes are the two ways the cascade runs: with a cgroup per server
// (where a writable cgroup2 exists) and with process groups, markers and
// pipe holders alone. The same tests must pass in both.
func cgroupModes(t *testing.T) []string {
	modes := []string{"off"}
	if os.Getuid() == 0 {
		modes = append(modes, "auto")
	} else {
		t.Log("cgroup mode skipped: needs root (a writable cgroup2 hierarchy)")
	}
	return modes
}

func newModeInstance(t *testing.T, mode string) *instance {
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_CGROUPS="+mode)
	return in
}

// hostStdio gives a command the host's stdio the way Go/Python hosts do
// (pipes) or Node hosts do (one socketpair for stdin and stdout). It returns
// the host's writer (closing it is the host closing stdin) and reader.
func hostStdio(t *testing.T, cmd *exec.Cmd, kind string) (w io.WriteCloser, r io.Reader, closeW func() error) {
	t.Helper()
	if kind == "pipe" {
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		return stdin, stdout, stdin.Close
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine := os.NewFile(uintptr(fds[0]), "host")
	theirs := os.NewFile(uintptr(fds[1]), "child")
	cmd.Stdin, cmd.Stdout = theirs, theirs
	c, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		t.Fatal(err)
	}
	uc := c.(*net.UnixConn)
	t.Cleanup(func() { uc.Close(); theirs.Close() })
	return uc, uc, uc.CloseWrite
}

func readReady2(t *testing.T, r io.Reader) (int, int) {
	t.Helper()
	var buf [128]byte
	n, err := r.Read(buf[:])
	if err != nil {
		t.Fatalf("ready line: %v", err)
	}
	var a, b int
	if _, err := fmt.Sscanf(string(buf[:n]), "ready %d %d", &a, &b); err != nil {
		t.Fatalf("got %q, want \"ready PID PID\"", buf[:n])
	}
	return a, b
}

// TestEscapedGrandchildHostGetsEOF: a server forks a setsid grandchild that
// holds its stdout, then exits on EOF. Through the supervisor the host reads
// EOF and the grandchild is gone; directly spawned, the grandchild keeps
// the host from ever seeing EOF. A grandchild that also cleared its
// environment is proven the server's only by the cgroup or, on the path
// where the daemon spawns the server, by the daemon adopting it as the
// subreaper; in place without a cgroup nothing proves it, and it is left
// running and reported, never killed on the strength of a held pipe.
func TestEscapedGrandchildHostGetsEOF(t *testing.T) {
	t.Parallel()
	for _, mode := range cgroupModes(t) {
		for _, kind := range []string{"pipe", "socketpair"} {
			for _, env := range []string{"markers", "clear-env", "clear-env-shim-path"} {
				t.Run(mode+"/"+kind+"/"+env, func(t *testing.T) {
					in := newModeInstance(t, mode)
					args := []string{"run", "--", bin, "_fixture", "escape"}
					if env != "markers" {
						args = append(args, "--clear-env") // no markers to prove it
					}
					if env == "clear-env-shim-path" {
						in.env = append(in.env, "SUPERVISOR_IN_PLACE=off")
					}
					// In place (the default where the kernel has it, unless the
					// environment turns it off) the daemon is no ancestor to adopt it.
					unprovable := env == "clear-env" && mode == "off" && proc.ExitInfoSupported() && os.Getenv("SUPERVISOR_IN_PLACE") != "off"
					cmd := in.command(args...)
					w, r, closeW := hostStdio(t, cmd, kind)
					_ = w
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					if f, ok := cmd.Stdin.(*os.File); ok {
						f.Close()
					}
					server, gc := readReady2(t, r)
					gtok := mustToken(t, gc)
					t.Cleanup(func() { killByToken(gc, gtok) })
					closeW() // the host closes stdin; the server exits on EOF
					if unprovable {
						p := waitRecord(t, in, server, func(p api.Process) bool { return p.State.Final() && p.Stop != nil })
						if !slices.Contains(p.Stop.Unproven, gc) || hasProc(p.Stop.Procs, gc) || !alive(gc, gtok) {
							t.Fatalf("an unprovable holder %d: stop %+v (alive %v), want it reported unproven and left alone", gc, p.Stop, alive(gc, gtok))
						}
						killByToken(gc, gtok) // the host's own remedy; EOF follows
					}
					if _, err := readAllWithin(r, wait); err != nil {
						t.Fatalf("host got no EOF: %v (grandchild %d alive: %v)", err, gc, alive(gc, gtok))
					}
					// Waited for only now: Wait closes a StdoutPipe once the
					// child exits, and a server exec'd in its shim's place
					// exits before its leftovers are gone.
					done := make(chan error, 1)
					go func() { done <- cmd.Wait() }()
					waitGonePID(t, gc, gtok)
					select {
					case err := <-done:
						if err != nil {
							t.Fatalf("shim: %v, want exit 0 (the server exited 0)", err)
						}
					case <-time.After(wait):
						t.Fatal("shim did not exit")
					}
					if unprovable {
						return
					}
					// The outcome is recorded after the exit: a server exec'd
					// in its shim's place has its host see the exit first.
					p := waitRecord(t, in, server, func(p api.Process) bool { return p.State.Final() && p.Stop != nil })
					if p.Stop == nil || !hasProc(p.Stop.Procs, gc) {
						t.Fatalf("leftover grandchild %d not in the recorded stop %+v", gc, p.Stop)
					}
				})
			}
		}
	}

	t.Run("direct spawn never gives EOF", func(t *testing.T) {
		cmd := exec.Command(bin, "_fixture", "escape")
		_, r, closeW := hostStdio(t, cmd, "pipe")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// No daemon stops this one: by PID if the test ends early (Kill of
		// a reaped process is a no-op error).
		t.Cleanup(func() { cmd.Process.Kill() })
		server, gc := readReady2(t, r)
		gtok := mustToken(t, gc)
		t.Cleanup(func() { syscall.Kill(gc, syscall.SIGKILL) })
		closeW()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("server %d: %v", server, err)
		}
		// The server is gone; its grandchild holds stdout, so the host
		// cannot see EOF for as long as the grandchild lives.
		if !alive(gc, gtok) {
			t.Fatal("grandchild died with the server: the fixture proves nothing")
		}
		f := r.(*os.File)
		unix.SetNonblock(int(f.Fd()), true)
		var b [1]byte
		if n, err := unix.Read(int(f.Fd()), b[:]); n == 0 && err == nil {
			t.Fatal("direct spawn reached EOF with the grandchild alive")
		}
	})
}

func hasProc(ps []api.StoppedProc, pid int) bool {
	for _, p := range ps {
		if p.PID == pid {
			return true
		}
	}
	return false
}

// TestCascadeStopsEveryKindOfTree: a classic double-forked daemon (setsid,
// no parent link, stdio on /dev/null), a SIGTERM-ignorer and a process that
// forks in a loop while it is killed: all gone, each outcome recorded.
func TestCascadeStopsEveryKindOfTree(t *testing.T) {
	t.Parallel()
	for _, mode := range cgroupModes(t) {
		t.Run(mode, func(t *testing.T) {
			in := newModeInstance(t, mode)
			sess := "trees-" + mode
			d := in.startShim("--session", sess, "--name", "daemonize", "--", bin, "_fixture", "daemonize")
			server, daemon := readReady2(t, d.stdout)
			dtok := mustToken(t, daemon)
			ig := in.startShim("--session", sess, "--name", "stubborn", "--", bin, "_fixture", "ignore-term")
			igPID := ig.readyPID(t)
			fl := in.startShim("--session", sess, "--name", "forkloop", "--", bin, "_fixture", "forkloop")
			flPID := fl.readyPID(t)
			flID := findByPIDState(t, in, flPID, "running").ID

			out := in.mustRun("session", "end", sess, "--grace", "300ms", "--json")
			var outs []shutdown.Outcome
			if err := json.Unmarshal([]byte(out), &outs); err != nil {
				t.Fatalf("session end --json: %v: %s", err, out)
			}
			want := map[int]shutdown.Result{server: shutdown.ExitedOnSIGTERM, igPID: shutdown.Killed, flPID: shutdown.Killed}
			for _, o := range outs {
				if w, ok := want[o.PID]; !ok || o.Result != w {
					t.Errorf("outcome %s: got %q, want %q", o, o.Result, want[o.PID])
				}
				if len(o.Left) > 0 {
					t.Errorf("outcome %s left %v alive", o, o.Left)
				}
			}
			for _, o := range outs {
				// Found through its marker, or its cgroup where there is one.
				if o.PID == server && !hasOutcomeProc(o, daemon, shutdown.RoleMarker) && !hasOutcomeProc(o, daemon, shutdown.RoleCgroup) {
					t.Errorf("the escaped daemon %d is not in %s", daemon, o)
				}
				if o.PID == flPID && len(o.PIDs) < 2 {
					t.Errorf("forkloop's children are not in %s", o)
				}
			}
			if alive(daemon, dtok) {
				t.Fatalf("escaped daemon %d still alive", daemon)
			}
			if left := markerHolders(t, flID); len(left) > 0 {
				t.Fatalf("processes of the fork loop survived: %v", left)
			}
		})
	}
}

func hasOutcomeProc(o shutdown.Outcome, pid int, role shutdown.Role) bool {
	for _, p := range o.Procs {
		if p.PID == pid && p.Role == role {
			return true
		}
	}
	return false
}

// markerHolders lists live processes whose environment names procID.
func markerHolders(t *testing.T, procID string) []int {
	t.Helper()
	infos, _ := proc.Scan()
	var out []int
	for _, info := range infos {
		if info.State == 'Z' {
			continue
		}
		env, _ := proc.Environ(info.PID)
		if v, _ := proc.EnvValue(env, "SUPERVISOR_PROC_ID"); v == procID {
			out = append(out, info.PID)
		}
	}
	return out
}

// TestUnprovenPipeHolderIsNeverSignalled: a process that got the server's
// stdout by other means (not a descendant, no marker, not in its cgroup)
// keeps the host from EOF, but holding a pipe proves nothing: it is
// reported in the stop and never signalled (design §6, issue 27).
func TestUnprovenPipeHolderIsNeverSignalled(t *testing.T) {
	t.Parallel()
	for _, mode := range cgroupModes(t) {
		for _, kind := range []string{"pipe", "socketpair"} {
			t.Run(mode+"/"+kind, func(t *testing.T) {
				in := newModeInstance(t, mode)
				cmd := in.command("run", "--", bin, "_fixture", "echo", "--ready")
				_, r, closeW := hostStdio(t, cmd, kind)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				if f, ok := cmd.Stdin.(*os.File); ok {
					f.Close() // the child's end of the socketpair: only the child holds it
				}
				server := readReadyLine(t, r)

				holder := startHolder(t, server, kind)
				htok := mustToken(t, holder.Process.Pid)
				closeW() // the server exits on EOF; the holder still has stdout
				p := waitRecord(t, in, server, func(p api.Process) bool { return p.State.Final() && p.Stop != nil })
				if !slices.Contains(p.Stop.Unproven, holder.Process.Pid) || hasProc(p.Stop.Procs, holder.Process.Pid) {
					t.Fatalf("holder %d: recorded stop %+v, want it reported unproven and not stopped", holder.Process.Pid, p.Stop)
				}
				if !alive(holder.Process.Pid, htok) {
					t.Fatalf("holder %d was signalled", holder.Process.Pid)
				}
				holder.Process.Kill() // the host's own remedy
				if _, err := readAllWithin(r, wait); err != nil {
					t.Fatalf("host got no EOF once the holder exited: %v", err)
				}
				done := make(chan error, 1) // after the EOF: see TestEscapedGrandchildHostGetsEOF
				go func() { done <- cmd.Wait() }()
				select {
				case <-done:
				case <-time.After(wait):
					t.Fatal("shim did not exit")
				}
			})
		}
	}
}

func readReadyLine(t *testing.T, r io.Reader) int {
	t.Helper()
	var buf [64]byte
	n, err := r.Read(buf[:])
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscanf(string(buf[:n]), "ready %d", &pid); err != nil {
		t.Fatalf("got %q, want \"ready PID\"", buf[:n])
	}
	return pid
}

// startHolder starts a sleeping process, child of the test (not of the
// server, no markers), holding the server's stdout: a pipe reopened through
// /proc, or a socket duplicated with pidfd_getfd.
func startHolder(t *testing.T, server int, kind string) *exec.Cmd {
	t.Helper()
	var f *os.File
	if kind == "pipe" {
		var err error
		f, err = os.OpenFile(fmt.Sprintf("/proc/%d/fd/1", server), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
	} else {
		pfd, err := unix.PidfdOpen(server, 0)
		if err != nil {
			t.Fatal(err)
		}
		fd, err := unix.PidfdGetfd(pfd, 1, 0)
		unix.Close(pfd)
		if err != nil {
			t.Skipf("pidfd_getfd: %v (needs ptrace rights over the server)", err)
		}
		f = os.NewFile(uintptr(fd), "stolen")
	}
	defer f.Close()
	h := exec.Command("sleep", "1000")
	h.ExtraFiles = []*os.File{f}
	h.Env = []string{"PATH=/usr/bin:/bin"} // no markers
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { h.Wait(); close(reaped) }()
	t.Cleanup(func() { h.Process.Kill(); <-reaped })
	return h
}

// TestForeignUIDMarkerIsNeverSignalled: a process of another uid carrying a
// session's markers survives the session's end.
func TestForeignUIDMarkerIsNeverSignalled(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to start a process as another uid")
	}
	in := newInstance(t)
	s := in.startShim("--session", "foreign", "--", bin, "_fixture", "sleep")
	pid := s.readyPID(t)
	p := findByPIDState(t, in, pid, "running")
	f := exec.Command("sleep", "1000")
	f.Env = []string{"SUPERVISOR_SESSION_ID=foreign", "SUPERVISOR_PROC_ID=" + p.ID}
	f.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { f.Wait(); close(reaped) }()
	defer func() { f.Process.Kill(); <-reaped }()
	ftok := mustToken(t, f.Process.Pid)
	in.mustRun("session", "end", "foreign", "--grace", "200ms")
	if !alive(f.Process.Pid, ftok) {
		t.Fatal("a process of another uid was signalled")
	}
}

// TestKeepSparesOnlyWhatHoldsNoPipe: SUPERVISOR_KEEP=1 spares a detached
// descendant from the sweep; one that holds the host's stdout is stopped
// anyway (the host would hang).
func TestKeepSparesOnlyWhatHoldsNoPipe(t *testing.T) {
	t.Parallel()
	for _, mode := range cgroupModes(t) {
		t.Run(mode, func(t *testing.T) {
			in := newModeInstance(t, mode)
			k := in.startShim("--session", "keep", "--", bin, "_fixture", "daemonize", "--keep")
			_, kept := readReady2(t, k.stdout)
			ktok := mustToken(t, kept)
			t.Cleanup(func() { syscall.Kill(kept, syscall.SIGKILL) })
			e := in.startShim("--session", "keep", "--", bin, "_fixture", "escape", "--keep")
			_, holder := readReady2(t, e.stdout)
			htok := mustToken(t, holder)
			out := in.mustRun("session", "end", "keep", "--grace", "200ms")
			if !alive(kept, ktok) {
				t.Fatalf("the kept daemon %d was stopped; outcome: %s", kept, out)
			}
			if !strings.Contains(out, strconv.Itoa(kept)) {
				t.Errorf("outcome does not name the spared %d: %s", kept, out)
			}
			waitGonePID(t, holder, htok)
		})
	}
}

// TestFreshCgroupPerServer: a server started into a session after another
// of its servers was killed with cgroup.kill is not killed at birth.
func TestFreshCgroupPerServer(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root for a writable cgroup2 hierarchy")
	}
	in := newModeInstance(t, "auto")
	a := in.startShim("--session", "cg", "--name", "a", "--", bin, "_fixture", "ignore-term")
	a.readyPID(t)
	in.mustRun("stop", "a", "--grace", "100ms")
	b := in.startShim("--session", "cg", "--name", "b", "--", bin, "_fixture", "sleep")
	pid := b.readyPID(t)
	p := findByPIDState(t, in, pid, "running")
	if p.Cgroup == "" {
		t.Skip("daemon runs without cgroups here")
	}
	if !alive(pid, mustToken(t, pid)) {
		t.Fatal("server b died at birth")
	}
	b.stdin.Close()
	in.mustRun("stop", "b")
}

// TestInstanceCap: a second `run --name x` in one session stops the first
// (newest wins); in another session it does not.
func TestInstanceCap(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	first := in.startShim("--session", "cap-1", "--name", "x", "--", bin, "_fixture", "sleep")
	p1 := first.readyPID(t)
	t1 := mustToken(t, p1)
	other := in.startShim("--session", "cap-2", "--name", "x", "--", bin, "_fixture", "sleep")
	p3 := other.readyPID(t)
	second := in.startShim("--session", "cap-1", "--name", "x", "--", bin, "_fixture", "sleep")
	p2 := second.readyPID(t)
	waitGonePID(t, p1, t1)
	if code := first.exitCode(t); code == 0 {
		t.Errorf("the replaced shim exited 0")
	}
	for _, pid := range []int{p2, p3} {
		if !alive(pid, mustToken(t, pid)) {
			t.Errorf("server %d was stopped", pid)
		}
	}
	// --max-instances 0 lifts the cap.
	third := in.startShim("--session", "cap-1", "--name", "x", "--max-instances", "0", "--", bin, "_fixture", "sleep")
	third.readyPID(t)
	if !alive(p2, mustToken(t, p2)) {
		t.Error("--max-instances 0 still stopped the older instance")
	}
}
