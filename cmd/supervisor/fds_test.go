//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/spawn"

	"os/exec"
)

func TestSpawnedProcessCarriesMarkers(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	s := in.startShim("--session", "markers", "--", bin, "_fixture", "env")
	var env []string
	for {
		line, err := readLine(s.stdout, wait)
		if err != nil {
			t.Fatalf("reading env: %v", err)
		}
		if line == "--" {
			break
		}
		env = append(env, line)
	}
	s.stdin.Close()
	s.exitCode(t)
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	if got[spawn.EnvSessionID] != "markers" {
		t.Errorf("%s=%q, want markers", spawn.EnvSessionID, got[spawn.EnvSessionID])
	}
	var found bool
	for _, p := range in.mustProcesses(true) {
		if p.ID == got[spawn.EnvProcID] && p.Session == "markers" {
			found = true
		}
	}
	if !found {
		t.Errorf("%s=%q names no process of session markers", spawn.EnvProcID, got[spawn.EnvProcID])
	}
	// The shim's environment reaches the server (nothing else changed for
	// the host): PATH and the test's own variables are there.
	if got["PATH"] != os.Getenv("PATH") {
		t.Errorf("PATH=%q, want the shim's", got["PATH"])
	}
}

// fdTargets reads the fds fixture's listing: "fd N TARGET" lines up to "--".
func fdTargets(t *testing.T, s *shimProc) map[int]string {
	t.Helper()
	out := map[int]string{}
	for {
		line, err := readLine(s.stdout, wait)
		if err != nil {
			t.Fatalf("reading fds: %v", err)
		}
		if line == "--" {
			return out
		}
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "fd" {
			n, _ := strconv.Atoi(f[1])
			out[n] = f[2]
		}
	}
}

func TestServersShareNoPipe(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	a := in.startShim("--", bin, "_fixture", "fds")
	b := in.startShim("--", bin, "_fixture", "fds")
	a.readyPID(t)
	b.readyPID(t)
	fa, fb := fdTargets(t, a), fdTargets(t, b)
	for _, fds := range []map[int]string{fa, fb} {
		for fd, target := range fds {
			// fds 0-2 are the host's; any other pipe or socket would be
			// inherited (the Go runtime's own cgroup files are not).
			if fd > 2 && (strings.HasPrefix(target, "pipe:") || strings.HasPrefix(target, "socket:")) {
				t.Errorf("server holds fd %d -> %s beyond its stdio", fd, target)
			}
		}
	}
	// Neither holds the other's channels (nor the daemon's socket).
	for fd, target := range fa {
		for fd2, target2 := range fb {
			// anon_inode:[eventpoll] and the like name a kind, not an
			// object: every Go process that polls has its own.
			if target == target2 && strings.Contains(target, ":[") && !strings.HasPrefix(target, "anon_inode:") {
				t.Errorf("server a fd %d and server b fd %d are both %s", fd, fd2, target)
			}
		}
	}
	a.stdin.Close()
	b.stdin.Close()
	a.exitCode(t)
	b.exitCode(t)
}

// TestLeakedHostFdIsNotHeld: a host leaks a pipe without close-on-exec into
// the shim (as real hosts' shells do). The auto-started daemon and the
// server must not hold it: the host's reader sees EOF once the shim, the
// only legitimate holder, has exited.
func TestLeakedHostFdIsNotHeld(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := in.command("run", "--", bin, "_fixture", "echo", "--ready")
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the shim, no close-on-exec
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	w.Close()
	buf := make([]byte, 64)
	n, _ := stdout.Read(buf)
	var server int
	fmt.Sscanf(string(buf[:n]), "ready %d", &server)
	if server == 0 {
		t.Fatalf("no ready line: %q", buf[:n])
	}
	daemon := in.daemonPID()
	var st os.FileInfo
	if st, err = r.Stat(); err != nil {
		t.Fatal(err)
	}
	pipeName := pipeInodeName(st)
	for _, pid := range []int{server, daemon} {
		if holds(pid, pipeName) {
			t.Errorf("pid %d holds the host's leaked pipe %s", pid, pipeName)
		}
	}
	stdin.Close()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("shim did not exit")
	}
	got := make(chan error, 1)
	go func() {
		_, err := r.Read(buf)
		got <- err
	}()
	select {
	case err := <-got:
		if err != io.EOF {
			t.Fatalf("read on the leaked pipe: %v, want EOF", err)
		}
	case <-time.After(wait):
		t.Fatalf("no EOF on the leaked pipe %v after the shim exited: someone still holds it", wait)
	}
}

func holds(pid int, target string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if l, _ := os.Readlink(dir + "/" + e.Name()); l == target {
			return true
		}
	}
	return false
}

func pipeInodeName(st os.FileInfo) string {
	return fmt.Sprintf("pipe:[%d]", st.Sys().(*syscall.Stat_t).Ino)
}

// TestDaemonEnvironmentIsMinimal: the auto-started daemon keeps only what it
// needs from the first shim's environment: no secrets, no markers.
func TestDaemonEnvironmentIsMinimal(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	cmd := in.command("run", "--", bin, "_fixture", "exit", "0")
	cmd.Env = append(cmd.Env, "API_TOKEN=secret-value", spawn.EnvSessionID+"=outer", spawn.EnvProcID+"=p-outer")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run: %v: %s", err, out)
	}
	pid := in.daemonPID()
	env, err := proc.Environ(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range env {
		for _, bad := range []string{"API_TOKEN=", spawn.EnvSessionID + "=", spawn.EnvProcID + "="} {
			if strings.HasPrefix(kv, bad) {
				t.Errorf("daemon environment has %q", kv)
			}
		}
	}
}

// TestBinaryArgvAndEnv: argv and environment need not be UTF-8; they reach
// the server byte for byte, as with a direct spawn.
func TestBinaryArgvAndEnv(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	arg := "a\xff\xfe\x01b"
	cmd := in.command("run", "--", "/bin/sh", "-c", `printf '%s|%s' "$1" "$BIN_VAR"`, "sh", arg)
	cmd.Env = append(cmd.Env, "BIN_VAR=x\xffy")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if want := arg + "|x\xffy"; string(out) != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}

// TestDetachedDaemonDropsLeakedFds: `supervisor daemon` run by a parent
// that leaks a pipe (no close-on-exec) must not keep it open.
func TestDetachedDaemonDropsLeakedFds(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := in.command("daemon")
	cmd.ExtraFiles = []*os.File{w}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("daemon: %v: %s", err, out)
	}
	w.Close()
	expectEOF(t, r, "the daemon (or its launcher) still holds the leaked pipe")
}

// expectEOF waits (bounded) for EOF on r.
func expectEOF(t *testing.T, r io.Reader, otherwise string) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 1))
		got <- err
	}()
	select {
	case err := <-got:
		if err != io.EOF {
			t.Fatalf("read: %v, want EOF", err)
		}
	case <-time.After(wait):
		t.Fatal(otherwise)
	}
}

// TestForegroundDaemonClosesLeakedFds: the same for `daemon --foreground`
// started directly with a leaked fd.
func TestForegroundDaemonClosesLeakedFds(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(bin, "daemon", "--foreground")
	cmd.Env = in.env
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() { cmd.Process.Signal(syscall.SIGTERM); <-done }()
	w.Close()
	expectEOF(t, r, "the foreground daemon still holds the leaked pipe")
}
