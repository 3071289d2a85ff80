//go:build linux

package spawn

// The reaper calls wait4(-1): nothing in this test binary may use
// exec.Cmd.Wait or os.Process.Wait while a Reaper runs, or it would steal
// statuses. Every child here is started through Start and reaped by the
// reaper of its test.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

const eventWait = 10 * time.Second

func writeFile(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), mode); err != nil {
		t.Fatal(err)
	}
	// WriteFile's mode is subject to the umask; set it exactly.
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	other := filepath.Join(dir, "other")
	writeFile(t, filepath.Join(bin, "tool"), 0o755)
	writeFile(t, filepath.Join(bin, "noexec"), 0o644)
	writeFile(t, filepath.Join(bin, "shadowed"), 0o644)
	writeFile(t, filepath.Join(other, "shadowed"), 0o755)
	writeFile(t, filepath.Join(dir, "here"), 0o755)
	writeFile(t, filepath.Join(dir, "rel", "script"), 0o755)
	if err := os.MkdirAll(filepath.Join(bin, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")

	tests := []struct {
		name     string
		cmd      string
		path     string
		dir      string
		want     string
		wantCode int // 0: success
	}{
		{"absolute", filepath.Join(bin, "tool"), "", "/", filepath.Join(bin, "tool"), 0},
		{"absolute ignores PATH and dir", filepath.Join(bin, "tool"), missing, missing, filepath.Join(bin, "tool"), 0},
		{"relative with slash against dir", "rel/script", bin, dir, filepath.Join(dir, "rel", "script"), 0},
		{"dot slash against dir", "./here", bin, dir, filepath.Join(dir, "here"), 0},
		{"relative with slash not searched in PATH", "bin/tool", "", "/", "", CodeNotFound},
		{"PATH search", "tool", missing + ":" + bin, "/", filepath.Join(bin, "tool"), 0},
		{"PATH first executable wins", "shadowed", bin + ":" + other, "/", filepath.Join(other, "shadowed"), 0},
		{"empty PATH entry means dir", "here", missing + "::" + bin, dir, filepath.Join(dir, "here"), 0},
		{"leading empty PATH entry", "here", ":" + bin, dir, filepath.Join(dir, "here"), 0},
		{"trailing empty PATH entry", "here", bin + ":", dir, filepath.Join(dir, "here"), 0},
		{"relative PATH entry against dir", "tool", "bin", dir, filepath.Join(bin, "tool"), 0},
		{"missing in PATH", "nope", bin + ":" + other, dir, "", CodeNotFound},
		{"missing absolute", missing, bin, dir, "", CodeNotFound},
		{"empty name", "", bin, dir, "", CodeNotFound},
		{"non-executable by path", filepath.Join(bin, "noexec"), "", "/", "", CodeNotExecutable},
		{"non-executable in PATH", "noexec", bin, "/", "", CodeNotExecutable},
		{"directory by path", filepath.Join(bin, "adir"), "", "/", "", CodeNotExecutable},
		{"directory in PATH", "adir", bin, "/", "", CodeNotExecutable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.cmd, tt.path, tt.dir)
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("Resolve(%q, %q, %q): got error %v, want %q", tt.cmd, tt.path, tt.dir, err, tt.want)
				}
				if got != tt.want {
					t.Errorf("Resolve(%q, %q, %q): got %q, want %q", tt.cmd, tt.path, tt.dir, got, tt.want)
				}
				return
			}
			var se *StartError
			if !errors.As(err, &se) {
				t.Fatalf("Resolve(%q, %q, %q): got (%q, %v), want a *StartError", tt.cmd, tt.path, tt.dir, got, err)
			}
			if se.Code != tt.wantCode {
				t.Errorf("Resolve(%q) code: got %d, want %d (%v)", tt.cmd, se.Code, tt.wantCode, err)
			}
			if se.Name != tt.cmd {
				t.Errorf("StartError.Name: got %q, want %q", se.Name, tt.cmd)
			}
			if got != "" {
				t.Errorf("Resolve(%q) path on error: got %q, want empty", tt.cmd, got)
			}
		})
	}
}

// newReaper runs a Reaper for the test; cleanup stops it and waits for Run.
func newReaper(t *testing.T) *Reaper {
	t.Helper()
	r := NewReaper(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Reaper.Run: got %v, want nil", err)
			}
		case <-time.After(eventWait):
			t.Errorf("Reaper.Run did not return within %v of cancel", eventWait)
		}
	})
	return r
}

// stdio returns the child's stdio: stdin is the read end of a pipe whose
// write end (gate) the test holds, stdout and stderr are the write end of a
// second pipe whose read end (out) the test holds. A child that runs
// `read x` first cannot exit before the test closes gate: that keeps the
// tests clear of the Fork/reapAll race described at TestStartManyFastExits.
func stdio(t *testing.T) (files [3]*os.File, gate, out *os.File) {
	t.Helper()
	ir, iw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// stderr is a second descriptor for the same pipe.
	fd, err := syscall.Dup(int(pw.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	syscall.CloseOnExec(fd)
	pw2 := os.NewFile(uintptr(fd), "stderr")
	t.Cleanup(func() { ir.Close(); iw.Close(); pr.Close(); pw.Close(); pw2.Close() })
	return [3]*os.File{ir, pw, pw2}, iw, pr
}

func waitStatus(t *testing.T, ch <-chan Status) Status {
	t.Helper()
	select {
	case st := <-ch:
		return st
	case <-time.After(eventWait):
		t.Fatalf("no exit status within %v", eventWait)
		return Status{}
	}
}

// start starts req and registers a cleanup that kills its group and waits
// for its status unless the test consumed it (then done must be closed).
func start(t *testing.T, r *Reaper, req Request) (Started, <-chan Status) {
	t.Helper()
	st, err := Start(r, req)
	if err != nil {
		t.Fatalf("Start(%q): %v", req.Argv, err)
	}
	// Forward the status so the test and the cleanup can both see it.
	exit := make(chan Status, 1)
	reaped := make(chan struct{})
	go func() {
		s := <-st.Exit
		exit <- s
		close(reaped)
	}()
	t.Cleanup(func() {
		select {
		case <-reaped:
			return
		default:
		}
		// Unreaped, so the pid and group are still ours.
		syscall.Kill(-st.PID, syscall.SIGKILL)
		select {
		case <-reaped:
		case <-time.After(eventWait):
			t.Errorf("pid %d not reaped within %v of SIGKILL", st.PID, eventWait)
		}
	})
	return st, exit
}

func TestStartExitCode(t *testing.T) {
	r := newReaper(t)
	files, gate, _ := stdio(t)
	st, exit := start(t, r, Request{
		Argv: []string{"/bin/sh", "-c", "read x; exit 7"},
		Env:  []string{"PATH=/usr/bin:/bin"},
		Dir:  t.TempDir(), Stdio: files, SessionID: "s", ProcID: "p",
	})
	if st.PID <= 0 || st.PGID != st.PID {
		t.Errorf("Started: got pid %d pgid %d, want pgid == pid > 0", st.PID, st.PGID)
	}
	if st.Path != "/bin/sh" {
		t.Errorf("Path: got %q, want /bin/sh", st.Path)
	}
	if st.Token.IsZero() {
		t.Errorf("Token: got zero, want set")
	}
	gate.Close()
	got := waitStatus(t, exit)
	want := Status{PID: st.PID, Code: 7}
	if got != want {
		t.Errorf("status: got %+v, want %+v", got, want)
	}
	if got.ExitCode() != 7 {
		t.Errorf("ExitCode: got %d, want 7", got.ExitCode())
	}
}

func TestStartOutputAndDir(t *testing.T) {
	r := newReaper(t)
	files, gate, out := stdio(t)
	dir := t.TempDir()
	_, exit := start(t, r, Request{
		Argv: []string{"sh", "-c", "read x; pwd; echo err >&2"},
		Env:  []string{"PATH=/usr/bin:/bin"},
		Dir:  dir, Stdio: files, SessionID: "s", ProcID: "p",
	})
	gate.Close()
	if st := waitStatus(t, exit); st.Code != 0 || st.Signal != 0 {
		t.Fatalf("status: got %+v, want a clean exit", st)
	}
	// Start closed our copies of the write ends, so the read ends at EOF.
	b, err := io.ReadAll(out)
	if err != nil {
		t.Fatalf("read output: %v", err)
	}
	realDir, _ := filepath.EvalSymlinks(dir)
	if got, want := string(b), realDir+"\nerr\n"; got != want {
		t.Errorf("output: got %q, want %q", got, want)
	}
}

func TestStartKilled(t *testing.T) {
	r := newReaper(t)
	files, _, _ := stdio(t)
	st, exit := start(t, r, Request{
		Argv: []string{"sleep", "30"}, Env: []string{"PATH=/usr/bin:/bin"},
		Stdio: files, SessionID: "sess-1", ProcID: "proc-1",
	})

	info, err := proc.Stat(st.PID)
	if err != nil {
		t.Fatalf("Stat(child): %v", err)
	}
	if info.PGID != st.PID {
		t.Errorf("PGID: got %d, want %d (own group)", info.PGID, st.PID)
	}
	if !info.Token.Matches(st.Token) {
		t.Errorf("Token: got %v, want %v", st.Token, info.Token)
	}
	if self, _ := proc.Stat(os.Getpid()); info.PGID == self.PGID {
		t.Errorf("child shares the test's process group %d", self.PGID)
	}

	// The child is unreaped until its status arrives, so its pid is ours.
	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, exit)
	if got.Signal != syscall.SIGKILL || got.PID != st.PID {
		t.Errorf("status: got %+v, want pid %d signal %v", got, st.PID, syscall.SIGKILL)
	}
	if got.ExitCode() != 137 {
		t.Errorf("ExitCode: got %d, want 137", got.ExitCode())
	}
}

func TestStartMarkers(t *testing.T) {
	r := newReaper(t)
	files, _, out := stdio(t)
	// The child says it runs: right after exec, /proc/PID/environ can
	// still be empty (the kernel sets it up after closing the exec pipe).
	st, exit := start(t, r, Request{
		Argv: []string{"/bin/sh", "-c", "echo ready; read x"},
		Env: []string{"PATH=/usr/bin:/bin", "KEEP=1",
			EnvSessionID + "=parent-session", EnvProcID + "=parent-proc"},
		Stdio: files, SessionID: "sess-1", ProcID: "proc-1",
	})
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("waiting for the child: %v", err)
	}
	env, err := proc.Environ(st.PID)
	if err != nil {
		t.Fatalf("Environ(child): %v", err)
	}
	for _, want := range []string{EnvSessionID + "=sess-1", EnvProcID + "=proc-1", "KEEP=1"} {
		if !slices.Contains(env, want) {
			t.Errorf("child environment %q: want it to contain %q", env, want)
		}
	}
	for _, kv := range env {
		if kv == EnvSessionID+"=parent-session" || kv == EnvProcID+"=parent-proc" {
			t.Errorf("child environment kept the caller's marker %q", kv)
		}
	}
	syscall.Kill(st.PID, syscall.SIGKILL)
	waitStatus(t, exit)
}

func assertClosed(t *testing.T, files ...*os.File) {
	t.Helper()
	for i, f := range files {
		if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("stdio %d after Start: Stat got %v, want %v", i, err, os.ErrClosed)
		}
	}
}

func TestStartClosesStdio(t *testing.T) {
	r := newReaper(t)
	files, gate, out := stdio(t)
	st, exit := start(t, r, Request{
		Argv: []string{"sh", "-c", "read x"}, Env: []string{"PATH=/usr/bin:/bin"},
		Stdio: files, SessionID: "s", ProcID: "p",
	})
	assertClosed(t, files[:]...)
	gate.Close()
	got := waitStatus(t, exit)
	if got.PID != st.PID || got.Signal != 0 {
		t.Errorf("status: got %+v, want pid %d exited", got, st.PID)
	}
	// The child's copies died with it and ours are closed: EOF for the host.
	if b, err := io.ReadAll(out); err != nil || len(b) != 0 {
		t.Errorf("host side of stdout: got %q, %v; want EOF", b, err)
	}
}

func TestStartErrors(t *testing.T) {
	r := newReaper(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "noexec"), 0o644)
	// Executable bits but no shebang or ELF header: execve fails ENOEXEC.
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte{0, 1, 2, 3}, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(garbage, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		argv     []string
		env      []string
		wantCode int
	}{
		{"empty argv", nil, nil, 125},
		{"missing", []string{"no-such-command-xyz"}, []string{"PATH=" + dir}, CodeNotFound},
		{"not executable", []string{filepath.Join(dir, "noexec")}, nil, CodeNotExecutable},
		{"directory", []string{dir}, nil, CodeNotExecutable},
		{"exec format error", []string{garbage}, nil, CodeNotExecutable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, _, _ := stdio(t)
			st, err := Start(r, Request{Argv: tt.argv, Env: tt.env, Dir: dir, Stdio: files})
			var se *StartError
			if !errors.As(err, &se) {
				t.Fatalf("Start(%q): got (%+v, %v), want a *StartError", tt.argv, st, err)
			}
			if se.Code != tt.wantCode {
				t.Errorf("Start(%q) code: got %d, want %d (%v)", tt.argv, se.Code, tt.wantCode, err)
			}
			assertClosed(t, files[:]...)
		})
	}

	t.Run("missing stdio", func(t *testing.T) {
		files, _, _ := stdio(t)
		files[2] = nil
		_, err := Start(r, Request{Argv: []string{"/bin/true"}, Stdio: files})
		var se *StartError
		if !errors.As(err, &se) || se.Code != 125 {
			t.Errorf("Start without stderr: got %v, want a *StartError with code 125", err)
		}
		assertClosed(t, files[0], files[1])
	})
}

// TestStartDefaultPath: without PATH in the request's environment, the
// execvp default is searched.
func TestStartDefaultPath(t *testing.T) {
	r := newReaper(t)
	files, gate, _ := stdio(t)
	st, exit := start(t, r, Request{Argv: []string{"sh", "-c", "read x"}, Env: []string{"A=1"}, Stdio: files})
	if !strings.HasSuffix(st.Path, "/sh") {
		t.Errorf("Path: got %q, want a sh from the default PATH", st.Path)
	}
	gate.Close()
	if got := waitStatus(t, exit); got.Signal != 0 {
		t.Errorf("status: got %+v, want an exit", got)
	}
}

// TestStartManyFastExits starts children that exit at once: every one must
// be started (with a token) and deliver its status: the reaper must not
// reap a child between ForkExec returning and its registration.
func TestStartManyFastExits(t *testing.T) {
	r := newReaper(t)
	const n = 50
	exits := make([]<-chan Status, 0, n)
	pids := make([]int, 0, n)
	for range n {
		files, _, _ := stdio(t)
		st, exit := start(t, r, Request{Argv: []string{"/bin/true"}, Env: []string{"PATH=/bin"}, Stdio: files})
		exits = append(exits, exit)
		pids = append(pids, st.PID)
	}
	for i, ch := range exits {
		if got := waitStatus(t, ch); got.PID != pids[i] || got.Code != 0 {
			t.Errorf("child %d: got %+v, want pid %d code 0", i, got, pids[i])
		}
	}
}
