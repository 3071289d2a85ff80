//go:build linux

package main

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
)

// TestStdioByteExact sends 1 MiB through an echo server and back, with the
// host's stdio as pipes (Go and Python hosts) and as a unix socketpair
// (Node hosts: libuv hands children socket:[inode] stdio).
func TestStdioByteExact(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"pipe", "socketpair"} {
		t.Run(kind, func(t *testing.T) {
			in := newInstance(t)
			payload := make([]byte, 1<<20)
			rand.Read(payload)

			cmd := in.command("run", "--name", "echo", "--", bin, "_fixture", "echo")
			cmd.Stderr = &prefixWriter{t: t, prefix: "shim: "}
			w, r, closeWrite := hostStdio(t, cmd, kind)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if f, ok := cmd.Stdin.(*os.File); ok {
				f.Close() // the child has its copy
			}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.Write(payload)
				closeWrite() // the server must see EOF when the host closes stdin
			}()
			got, err := readAllWithin(r, wait)
			if err != nil {
				t.Fatalf("reading the echo: %v (got %d bytes)", err, len(got))
			}
			// Waited for only after the EOF: Wait closes a StdoutPipe once
			// the child exits, and a server exec'd in its shim's place
			// exits as soon as it has written everything.
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			wg.Wait()
			if !bytes.Equal(got, payload) {
				t.Fatalf("got %d bytes back, want the same %d bytes", len(got), len(payload))
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("shim: %v, want exit 0 after the server saw EOF", err)
				}
			case <-time.After(wait):
				t.Fatal("shim did not exit after stdin closed")
			}
		})
	}
}

// TestHostSeesEOFWhenServerExits: the server exits on its own while the host
// still holds stdin open; the host's read of stdout must end, over pipes and
// over a socketpair.
func TestHostSeesEOFWhenServerExits(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"pipe", "socketpair"} {
		t.Run(kind, func(t *testing.T) {
			in := newInstance(t)
			cmd := in.command("run", "--", bin, "_fixture", "exit", "3")
			cmd.Stderr = &prefixWriter{t: t, prefix: "shim: "}
			_, r, _ := hostStdio(t, cmd, kind) // stdin held open throughout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if f, ok := cmd.Stdin.(*os.File); ok {
				f.Close() // only the child's copies remain
			}
			// Wait closes the stdout pipe it made: only once it is read.
			if _, err := readAllWithin(r, wait); err != nil {
				t.Fatalf("stdout did not reach EOF after the server exited: %v", err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(wait):
				t.Fatal("shim did not exit")
			}
			if got := cmd.ProcessState.ExitCode(); got != 3 {
				t.Fatalf("shim exit %d, want 3", got)
			}
		})
	}
}

func readAllWithin(r io.Reader, d time.Duration) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := io.ReadAll(r)
		ch <- res{b, err}
	}()
	select {
	case x := <-ch:
		return x.b, x.err
	case <-time.After(d):
		return nil, io.ErrNoProgress
	}
}

func TestExitStatuses(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	notExec := filepath.Join(t.TempDir(), "not-executable")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)

	tests := []struct {
		name string
		argv []string
		env  []string
		want int
	}{
		{"zero", []string{"--", bin, "_fixture", "exit", "0"}, nil, 0},
		{"seven", []string{"--", bin, "_fixture", "exit", "7"}, nil, 7},
		{"not executable", []string{"--", notExec}, nil, 126},
		{"not found", []string{"--", "no-such-command-here"}, nil, 127},
		{"not found by path", []string{"--", "./no-such-file"}, nil, 127},
		{"supervisor error", []string{"--session", "not a valid id", "--", bin, "_fixture", "exit", "0"}, nil, 125},
		{"bad SUPERVISOR_LOCAL_AFTER", []string{"--", bin, "_fixture", "exit", "0"}, []string{"SUPERVISOR_LOCAL_AFTER=soon"}, 125},
		// No daemon can start here: the shim runs the server itself
		// (local mode), and its status is still the server's.
		{"local mode", []string{"--", bin, "_fixture", "exit", "3"},
			[]string{"SUPERVISOR_STATE_DIR=/dev/null/x", "SUPERVISOR_SOCKET=/dev/null/x.sock"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := in.command(append([]string{"run"}, tt.argv...)...)
			cmd.Env = append(cmd.Env, tt.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			got := 0
			if ee, ok := err.(*exec.ExitError); ok {
				got = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("exit %d, want %d; stderr: %s", got, tt.want, stderr.String())
			}
			if tt.want >= 125 && !strings.HasPrefix(stderr.String(), "supervisor: ") {
				t.Fatalf("stderr %q, want a \"supervisor: \" error", stderr.String())
			}
			if v, ok := strings.CutPrefix(tt.name, "bad "); ok && !strings.Contains(stderr.String(), v) {
				t.Fatalf("stderr %q, want it to name %s", stderr.String(), v)
			}
		})
	}

	t.Run("SIGKILLed server", func(t *testing.T) {
		s := in.startShim("--", bin, "_fixture", "sleep")
		pid := s.readyPID(t)
		unix.Kill(pid, unix.SIGKILL)
		if ok, got := s.endedBy(t, unix.SIGKILL); !ok {
			t.Fatalf("%s, want exit 137 or killed by SIGKILL", got)
		}
	})
}

func TestSignalsToShim(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	t.Run("SIGTERM stops the server", func(t *testing.T) {
		s := in.startShim("--grace", "10s", "--", bin, "_fixture", "sleep")
		pid := s.readyPID(t)
		tok := mustToken(t, pid)
		s.cmd.Process.Signal(syscall.SIGTERM)
		if got := s.exitCode(t); got == 0 {
			t.Fatalf("shim exit %d, want non-zero", got)
		}
		if alive(pid, tok) {
			t.Fatalf("server %d still running after the shim got SIGTERM", pid)
		}
	})
	t.Run("SIGKILL stops the server", func(t *testing.T) {
		s := in.startShim("--", bin, "_fixture", "sleep")
		pid := s.readyPID(t)
		tok := mustToken(t, pid)
		s.cmd.Process.Kill()
		s.exitCode(t)
		waitGonePID(t, pid, tok)
		p := findByPID(t, in, pid)
		if !p.State.Final() {
			t.Fatalf("record of %d is %s, want a final state", pid, p.State)
		}
	})
}

// findByPID waits (bounded) for pid's record to reach a final state: the
// final commit follows the process's exit by moments.
func findByPID(t *testing.T, in *instance, pid int) api.Process {
	t.Helper()
	return waitRecord(t, in, pid, func(p api.Process) bool { return p.State.Final() })
}

// findByPIDState waits (bounded) for pid's record to be in state.
func findByPIDState(t *testing.T, in *instance, pid int, state api.ProcState) api.Process {
	t.Helper()
	return waitRecord(t, in, pid, func(p api.Process) bool { return p.State == state })
}

func waitRecord(t *testing.T, in *instance, pid int, ok func(api.Process) bool) api.Process {
	t.Helper()
	deadline := time.Now().Add(wait)
	var last api.Process
	for time.Now().Before(deadline) {
		for _, p := range in.mustProcesses(true) {
			if pid == 0 || p.PID == pid { // 0: any record, ok decides
				last = p
				if ok(p) {
					return p
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("record of pid %d never got there; last seen %+v", pid, last)
	return last
}

// TestConcurrentStartsUnderTheCap: two `run --name x` started at once in
// one session leave exactly one instance, never none.
func TestConcurrentStartsUnderTheCap(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	for round := 0; round < 3; round++ {
		sess := "race-" + string(rune('a'+round))
		var shims [2]*shimProc
		var wg sync.WaitGroup
		for i := range shims {
			shims[i] = in.startShim("--session", sess, "--name", "x", "--", bin, "_fixture", "sleep")
		}
		// The older one may be stopped before it prints its ready line
		// (its shim then ends with EOF): at least one must print it.
		ready := make([]bool, 2)
		for i := range shims {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				line, err := readLine(shims[i].stdout, wait)
				ready[i] = err == nil && strings.HasPrefix(line, "ready ")
			}(i)
		}
		wg.Wait()
		if !ready[0] && !ready[1] {
			t.Fatalf("round %d: neither instance printed its ready line", round)
		}
		// One of them is stopped; exactly one remains.
		deadline := time.Now().Add(wait)
		for {
			live := 0
			for _, p := range in.mustProcesses(false) {
				if p.Session == sess {
					live++
				}
			}
			if live == 1 {
				break
			}
			if live == 0 {
				t.Fatalf("round %d: both instances were stopped", round)
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d instances still live", round, live)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
