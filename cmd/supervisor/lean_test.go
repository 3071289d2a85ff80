//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The lean run entry (cmd/supervisor-run, internal/leanrun): the fast
// path execs the server in its own place; every other run goes to
// `supervisor run` by exec, with the same arguments.

// runLean runs supervisor-run ARGS as a host would (stdin not a terminal)
// with its trace on, and returns its stderr, status and PID.
func runLean(t *testing.T, lean string, env []string, args ...string) (stderr string, code, pid int) {
	t.Helper()
	for tries := 1; ; tries++ {
		cmd := exec.Command(lean, args...)
		cmd.Env = append(slices.Clone(env), "SUPERVISOR_RUN_TRACE=1")
		cmd.Stdin = strings.NewReader("")
		var e bytes.Buffer
		cmd.Stderr = &e
		err := cmd.Run()
		if errors.Is(err, syscall.ETXTBSY) && tries < 100 {
			// A binary a test just wrote: a process another test forked
			// meanwhile holds its write fd until it execs (Go issue 22315).
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatalf("supervisor-run %v: %v", args, err)
			}
		}
		return e.String(), cmd.ProcessState.ExitCode(), cmd.Process.Pid
	}
}

func TestLeanRunExecsInPlace(t *testing.T) {
	t.Parallel()
	skipWithoutInPlace(t)
	in := newInstance(t)
	in.mustRun("daemon")
	stderr, code, pid := runLean(t, leanBin, in.env, "--name", "lean", "--grace", "2s", "--", bin, "_fixture", "exit", "7")
	if code != 7 {
		t.Fatalf("exit %d, want the server's 7; stderr:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "handing over") {
		t.Errorf("the run was handed over with the daemon up:\n%s", stderr)
	}
	p := findByPID(t, in, pid)
	if !p.InPlace || p.Name != "lean" || p.GraceMS != 2000 || p.ExitCode == nil || *p.ExitCode != 7 {
		t.Errorf("record: in_place %v, name %q, grace %d ms, exit %v; want in place, lean, 2000, 7", p.InPlace, p.Name, p.GraceMS, p.ExitCode)
	}
}

// Every run the fast path does not take reaches `supervisor run` with its
// arguments, and ends as it would there.
func TestLeanRunHandsOver(t *testing.T) {
	t.Parallel()
	skipWithoutInPlace(t)
	for _, tc := range []struct {
		name     string
		daemon   bool
		env      []string
		flags    []string
		why      string // in the trace
		inPlace  bool   // the record's
		sameName string // the record's name
	}{
		{name: "no daemon yet", why: "not running", inPlace: true, sameName: "a"},
		{name: "a flag for supervisor run", daemon: true, flags: []string{"--flatten=false"}, why: "--flatten=false is for supervisor run", inPlace: true, sameName: "a"},
		{name: "in place off", daemon: true, env: []string{"SUPERVISOR_IN_PLACE=off"}, why: "SUPERVISOR_IN_PLACE=off", sameName: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newInstance(t)
			if tc.daemon {
				in.mustRun("daemon")
			}
			args := append(append(slices.Clone(tc.flags), "--name", "a", "--"), bin, "_fixture", "exit", "3")
			stderr, code, pid := runLean(t, leanBin, append(slices.Clone(in.env), tc.env...), args...)
			if code != 3 {
				t.Fatalf("exit %d, want the server's 3; stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, "handing over") || !strings.Contains(stderr, tc.why) {
				t.Errorf("trace does not say it handed over for %q:\n%s", tc.why, stderr)
			}
			ps := in.mustProcesses(true)
			if len(ps) != 1 {
				t.Fatalf("%d records, want the one run's: %+v", len(ps), ps)
			}
			// In place, the server is the process the host started; else
			// the daemon's child, with that process as its shim.
			if p := ps[0]; p.InPlace != tc.inPlace || p.Name != tc.sameName || (p.InPlace && p.PID != pid) || (!p.InPlace && p.ShimPID != pid) {
				t.Errorf("record: in_place %v, name %q, pid %d, shim %d; want %v, %q, the host's child %d", p.InPlace, p.Name, p.PID, p.ShimPID, tc.inPlace, tc.sameName, pid)
			}
		})
	}
}

// A mistake is reported by `supervisor run` itself: the same words and
// status as when the host runs it.
func TestLeanRunErrorsAreSupervisorRuns(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	for _, args := range [][]string{
		{"--bogus", "--", "/bin/true"},
		{"--grace", "soon", "--", "/bin/true"},
		{"--name", "x"},
		{"--cwd", "/nonexistent-dir", "--", "/bin/true"},
	} {
		stderr, code, _ := runLean(t, leanBin, in.env, args...)
		_, want, wantCode := in.run(append([]string{"run"}, args...)...)
		var got []string
		for _, l := range strings.SplitAfter(stderr, "\n") {
			if !strings.HasPrefix(l, "supervisor-run: handing over") {
				got = append(got, l)
			}
		}
		if code != wantCode || strings.Join(got, "") != want {
			t.Errorf("supervisor-run %q: exit %d, stderr %q; supervisor run: exit %d, stderr %q", args, code, strings.Join(got, ""), wantCode, want)
		}
	}
}

// Without `supervisor` beside it the lean entry says so (and fails as a
// supervisor error), rather than run the server unsupervised.
func TestLeanRunWithoutFullBinary(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	dir := t.TempDir()
	b, err := os.ReadFile(leanBin)
	if err != nil {
		t.Fatal(err)
	}
	lone := filepath.Join(dir, "supervisor-run")
	if err := os.WriteFile(lone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	stderr, code, _ := runLean(t, lone, in.env, "--", "/bin/true")
	if code != 125 || !strings.Contains(stderr, filepath.Join(dir, "supervisor")) || !strings.Contains(stderr, "reinstall") {
		t.Errorf("exit %d, stderr %q; want 125 and a message naming %s", code, stderr, filepath.Join(dir, "supervisor"))
	}
}

// A pipe the host leaked without close-on-exec does not reach the server
// the lean entry becomes.
func TestLeanRunDropsLeakedFds(t *testing.T) {
	t.Parallel()
	skipWithoutInPlace(t)
	in := newInstance(t)
	in.mustRun("daemon")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(leanBin, "--", bin, "_fixture", "echo", "--ready")
	cmd.Env = in.env
	cmd.ExtraFiles = []*os.File{w} // fd 3, no close-on-exec
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	w.Close()
	buf := make([]byte, 64)
	n, _ := stdout.Read(buf)
	var server int
	fmt.Sscanf(string(buf[:n]), "ready %d", &server)
	if server != cmd.Process.Pid {
		t.Fatalf("ready line %q: want the server in the lean entry's place, pid %d", buf[:n], cmd.Process.Pid)
	}
	st, err := r.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if name := pipeInodeName(st); holds(server, name) {
		t.Errorf("the server holds the host's leaked pipe %s", name)
	}
}
