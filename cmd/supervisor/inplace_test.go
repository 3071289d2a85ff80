//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Servers exec'd in their shim's place (internal/daemon/inplace_linux.go): no
// shim process stays; the host's child is the server itself.

// anyRecord takes the first record of the pid (waitRecord).
func anyRecord(api.Process) bool { return true }

func skipWithoutInPlace(t *testing.T) {
	t.Helper()
	if !proc.ExitInfoSupported() {
		t.Skip("this kernel keeps no exit status on pidfds (PIDFD_INFO_EXIT, Linux 6.15): servers are spawned by the daemon here")
	}
	if os.Getenv("SUPERVISOR_IN_PLACE") == "off" {
		t.Skip("SUPERVISOR_IN_PLACE=off in the environment: servers are spawned by the daemon")
	}
}

func TestInPlaceServerIsTheHostsChild(t *testing.T) {
	t.Parallel()
	skipWithoutInPlace(t)
	in := newInstance(t)
	s := in.startShim("--name", "sl", "--", bin, "_fixture", "sleep")
	pid := s.readyPID(t)
	if pid != s.cmd.Process.Pid {
		t.Fatalf("server pid %d, want the shim's own pid %d (exec'd in its place)", pid, s.cmd.Process.Pid)
	}
	p := waitRecord(t, in, pid, anyRecord)
	if !p.InPlace || p.ShimPID != 0 || p.PGID != pid || p.State != api.StateRunning {
		t.Errorf("record: in_place %v, shim_pid %d, pgid %d, state %s; want true, 0, %d, running", p.InPlace, p.ShimPID, p.PGID, p.State, pid)
	}
	if g, err := unix.Getpgid(pid); err != nil || g != pid {
		t.Errorf("server's process group %d (%v), want its own, %d", g, err, pid)
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(env, []byte("\x00SUPERVISOR_PROC_ID="+p.ID+"\x00")) && !bytes.HasPrefix(env, []byte("SUPERVISOR_PROC_ID="+p.ID+"\x00")) {
		t.Errorf("server's environment lacks SUPERVISOR_PROC_ID=%s", p.ID)
	}
	if p.Cgroup != "" {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		var own string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if rest, ok := strings.CutPrefix(line, "0::"); ok {
				own = rest
			}
		}
		if own == "" || !strings.HasSuffix(p.Cgroup, own) {
			t.Errorf("server in cgroup %q, want the record's %q", own, p.Cgroup)
		}
	}
	// The host's own signal reaches the server, as in a direct spawn, and
	// the daemon learns the status though the host reaped it.
	s.cmd.Process.Signal(unix.SIGTERM)
	if code := s.exitCode(t); code != -1 && code != 143 {
		t.Errorf("host saw exit %d, want death by SIGTERM", code)
	}
	p = findByPID(t, in, pid)
	if p.State != api.StateExited || p.Signal != "SIGTERM" {
		t.Errorf("record after the host's SIGTERM: state %s, signal %q, error %q; want exited by SIGTERM", p.State, p.Signal, p.Error)
	}
}

func TestInPlaceExitStatusReachesDaemonAndHost(t *testing.T) {
	t.Parallel()
	skipWithoutInPlace(t)
	in := newInstance(t)
	for _, code := range []int{0, 7} {
		cmd := in.command("run", "--", bin, "_fixture", "exit", fmt.Sprint(code))
		cmd.Stdin = strings.NewReader("") // no terminal: the shim offers to exec
		err := cmd.Run()
		if got := cmd.ProcessState.ExitCode(); got != code {
			t.Fatalf("exit %d (%v), want %d", got, err, code)
		}
		p := findByPID(t, in, cmd.Process.Pid)
		if !p.InPlace || p.ExitCode == nil || *p.ExitCode != code {
			t.Errorf("record: in_place %v, exit code %v, error %q; want in place, %d", p.InPlace, p.ExitCode, p.Error, code)
		}
	}
}

// A daemon that crashes while a server runs in its shim's place loses
// nothing: the host keeps its child, and the next daemon re-adopts it and
// still learns its real status (not "unknown").
func TestInPlaceStatusKnownAfterDaemonCrash(t *testing.T) {
	t.Parallel()
	skipWithoutInPlace(t)
	in := newInstance(t)
	s := in.startShim("--", "sh", "-c", `echo "ready $$"; read line; exit 9`)
	pid := s.readyPID(t)
	if pid != s.cmd.Process.Pid {
		t.Fatalf("server pid %d, want the shim's %d", pid, s.cmd.Process.Pid)
	}
	waitRecord(t, in, pid, anyRecord)
	dpid := in.daemonPID()
	killByPIDNow(t, dpid)
	in.mustRun("daemon")
	if st := in.status(t); st.Recovery == nil || st.Recovery.Adopted != 1 {
		t.Fatalf("recovery %+v, want 1 adopted", st.Recovery)
	}
	fmt.Fprintln(s.stdin, "go")
	if code := s.exitCode(t); code != 9 {
		t.Errorf("host saw exit %d, want 9", code)
	}
	p := findByPID(t, in, pid)
	if p.ExitCode == nil || *p.ExitCode != 9 {
		t.Errorf("re-adopted record: exit code %v, error %q; want 9", p.ExitCode, p.Error)
	}
}

// An exec that fails is a failed start, told to the host with the shell's
// statuses and recorded as failed, as when the daemon spawns.
func TestInPlaceExecFailure(t *testing.T) {
	t.Parallel()
	skipWithoutInPlace(t)
	in := newInstance(t)
	notExec := filepath.Join(in.state, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badInterp := filepath.Join(in.state, "bad-interpreter")
	if err := os.WriteFile(badInterp, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cmd, msg string
		code           int
	}{
		{"missing", "/nonexistent/server", "command not found", 127},
		{"not executable", notExec, "permission denied", 126},
		{"bad interpreter", badInterp, "bad interpreter", 126},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := in.command("run", "--name", strings.ReplaceAll(tc.name, " ", "-"), "--", tc.cmd)
			cmd.Stdin = strings.NewReader("")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.Run()
			if got := cmd.ProcessState.ExitCode(); got != tc.code || !strings.Contains(stderr.String(), tc.msg) {
				t.Errorf("exit %d, stderr %q; want %d and %q", got, stderr.String(), tc.code, tc.msg)
			}
			p := findByPID(t, in, cmd.Process.Pid)
			if p.State != api.StateFailed || !strings.Contains(p.Error, tc.msg) {
				t.Errorf("record: state %s, error %q; want failed with %q", p.State, p.Error, tc.msg)
			}
		})
	}
	var failed int
	for _, e := range in.eventsJSON("--json") {
		if e.Kind == "process.failed" {
			failed++
		}
	}
	if failed != 3 {
		t.Errorf("%d process.failed events, want 3", failed)
	}
}

// Its stderr still goes through the log writer: to the host and the log.
func TestInPlaceStderrIsLogged(t *testing.T) {
	t.Parallel()
	skipWithoutInPlace(t)
	in := newInstance(t)
	cmd := in.command("run", "--name", "talker", "--", "sh", "-c", "echo to-stderr >&2")
	cmd.Stdin = strings.NewReader("")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v: %s", err, stderr.String())
	}
	if p := findByPID(t, in, cmd.Process.Pid); !p.InPlace {
		t.Fatalf("not exec'd in place: %+v", p)
	}
	deadline := time.Now().Add(wait)
	for !strings.Contains(in.mustRun("logs", "talker"), "to-stderr") {
		if time.Now().After(deadline) {
			t.Fatalf("logs talker lacks the line: %q", in.mustRun("logs", "talker"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The log writer copies to the host's stderr; it ends once the
	// server's output closes, which Run waited for.
	if !strings.Contains(stderr.String(), "to-stderr") {
		t.Errorf("host's stderr %q lacks the line", stderr.String())
	}
}

// A shim that cannot enter its server's cgroup (the kernel's rule on who
// may move a process between cgroups) gets its server spawned by the
// daemon instead, in the cgroup: never a server outside it.
func TestInPlaceCgroupFallback(t *testing.T) {
	t.Parallel()
	skipWithoutInPlace(t)
	// The move fails (cgroup.enter), or its second half after the shim is
	// in (cgroup.entered: its cgroup v1 limits): the shim goes back.
	for _, fault := range []string{"cgroup.enter", "cgroup.entered"} {
		t.Run(fault, func(t *testing.T) { inPlaceCgroupFallback(t, fault) })
	}
}

func inPlaceCgroupFallback(t *testing.T, fault string) {
	in := newInstance(t)
	in.startDaemonWith(t, faultBin(t), "SUPERVISOR_FAULT="+fault)
	if st := in.status(t); !st.Features["cgroup"] {
		t.Skip("no cgroups in use here (they need root and a writable cgroup2 hierarchy): nothing to enter")
	}
	s := in.startShim("--", bin, "_fixture", "sleep")
	pid := s.readyPID(t)
	if pid == s.cmd.Process.Pid {
		t.Fatalf("server exec'd in the shim's place (pid %d) though it could not enter the cgroup", pid)
	}
	p := waitRecord(t, in, pid, anyRecord)
	if p.InPlace || p.ShimPID != s.cmd.Process.Pid || p.Cgroup == "" {
		t.Errorf("record: in_place %v, shim_pid %d, cgroup %q; want spawned by the daemon into a cgroup, its shim %d", p.InPlace, p.ShimPID, p.Cgroup, s.cmd.Process.Pid)
	}
	// The shim that stays is not in the server's cgroup (a stop of it
	// would reach the shim).
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", s.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if own, ok := strings.CutPrefix(line, "0::"); ok && strings.HasSuffix(p.Cgroup, own) {
			t.Errorf("the shim %d is in the server's cgroup %s", s.cmd.Process.Pid, own)
		}
	}
	// Through the lean entry (SUPERVISOR_TEST_LEAN=1), which asks for exec
	// in place or nothing, the declined start is one failed record that
	// says why, its cgroup removed; through `supervisor run`, none.
	var failed []api.Process
	for _, r := range in.mustProcesses(true) {
		if r.State == api.StateFailed {
			failed = append(failed, r)
		}
	}
	want := 0
	if viaLean {
		want = 1
	}
	if len(failed) != want {
		t.Fatalf("%d failed records, want %d: %+v", len(failed), want, failed)
	}
	for _, f := range failed {
		if !strings.Contains(f.Error, "handed to `supervisor run`") {
			t.Errorf("the declined record says %q, want why it was handed over", f.Error)
		}
		if _, err := os.Stat(f.Cgroup); f.Cgroup == "" || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the declined record's cgroup %q is left (%v)", f.Cgroup, err)
		}
	}
}

// Where it is turned off (or not offered) the shim stays and the daemon
// spawns the server, as before. A daemon that does not take the offer
// (off, or older) is not made one: the shim asks only a daemon whose hello
// says it takes it, or an older daemon would refuse the fourth fd.
func TestInPlaceOff(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"shim", "daemon"} {
		t.Run(where, func(t *testing.T) {
			in := newInstance(t)
			if where == "shim" {
				in.env = append(in.env, "SUPERVISOR_IN_PLACE=off")
			} else {
				in.startDaemonWith(t, bin, "SUPERVISOR_IN_PLACE=off")
			}
			s := in.startShim("--", bin, "_fixture", "sleep")
			pid := s.readyPID(t)
			if pid == s.cmd.Process.Pid {
				t.Fatalf("server runs as the shim (pid %d) with SUPERVISOR_IN_PLACE=off for the %s", pid, where)
			}
			p := waitRecord(t, in, pid, anyRecord)
			if p.InPlace || p.ShimPID != s.cmd.Process.Pid {
				t.Errorf("record: in_place %v, shim_pid %d; want false, %d", p.InPlace, p.ShimPID, s.cmd.Process.Pid)
			}
			if st := in.status(t); where == "daemon" && st.Features["in_place"] {
				t.Errorf("status features %v: in_place on with SUPERVISOR_IN_PLACE=off", st.Features)
			}
		})
	}
}

// The server gets a process group of its own: never one the shim already
// leads in its host's session (a shell's job, a host's process_group),
// which others may share and the cascade would then take along.
func TestInPlaceOwnGroup(t *testing.T) {
	t.Parallel()
	skipWithoutInPlace(t)
	for _, tc := range []struct {
		name    string
		attr    *syscall.SysProcAttr
		inPlace bool
	}{
		{"host's group", nil, true},
		{"session leader", &syscall.SysProcAttr{Setsid: true}, true},
		{"group leader in the host's session", &syscall.SysProcAttr{Setpgid: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newInstance(t)
			cmd := in.command("run", "--", bin, "_fixture", "sleep")
			cmd.SysProcAttr = tc.attr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			pid := readReadyLine(t, out)
			cleanupByPID(t, pid)
			if got := pid == cmd.Process.Pid; got != tc.inPlace {
				t.Fatalf("exec'd in place: %v, want %v", got, tc.inPlace)
			}
			if g, err := unix.Getpgid(pid); err != nil || g != pid {
				t.Errorf("server's group %d (%v), want its own", g, err)
			}
			if tc.inPlace {
				if sid, err := unix.Getsid(pid); err != nil || sid != pid {
					t.Errorf("server's session %d (%v), want its own (no controlling terminal)", sid, err)
				}
			}
		})
	}
}

// A host that signals its server straight after starting it (it opened
// and closed it) makes no crash loop: the breaker stays closed.
func TestInPlaceHostSignalIsNoFailedStart(t *testing.T) {
	t.Parallel()
	skipWithoutInPlace(t)
	in := newInstance(t)
	for i := range 4 {
		s := in.startShim("--name", "brief", "--", bin, "_fixture", "sleep")
		pid := s.readyPID(t)
		if pid != s.cmd.Process.Pid {
			t.Fatalf("run %d not exec'd in place", i)
		}
		s.cmd.Process.Signal(unix.SIGTERM)
		if ok, got := s.endedBy(t, unix.SIGTERM); !ok {
			t.Fatalf("run %d: %s, want terminated by SIGTERM", i, got)
		}
	}
	s := in.startShim("--name", "brief", "--", bin, "_fixture", "sleep")
	if pid := s.readyPID(t); pid != s.cmd.Process.Pid {
		t.Fatalf("fifth run not exec'd in place")
	}
	if out := in.mustRun("breaker", "list"); strings.Contains(out, "open") {
		t.Errorf("breaker list after 4 host-stopped starts:\n%s", out)
	}
}
