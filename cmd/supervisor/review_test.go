//go:build linux

package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecondSignalForcesTheStop: a server ignoring SIGTERM under the
// longest grace; the second SIGTERM to the shim must not wait it out.
func TestSecondSignalForcesTheStop(t *testing.T) {
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

// TestSocketPathNeverReplacesAFile: SUPERVISOR_SOCKET pointing at a file
// that is not a socket is refused; the file survives.
func TestSocketPathNeverReplacesAFile(t *testing.T) {
	in := newInstance(t)
	notes := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(notes, []byte("keep me"), 0o644)
	cmd := in.command("daemon", "--foreground")
	cmd.Env = append(cmd.Env, "SUPERVISOR_SOCKET="+notes)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("daemon started over a regular file: %s", out)
	}
	if !strings.Contains(string(out), "not a socket") {
		t.Errorf("daemon said %q, want it to say the path is not a socket", out)
	}
	if b, _ := os.ReadFile(notes); string(b) != "keep me" {
		t.Fatalf("the file at SUPERVISOR_SOCKET was changed to %q", b)
	}
}

// TestCorruptRegistryIsMovedAside: an unreadable registry.db does not keep
// the daemon down (design §7): it is kept aside and a fresh one started.
func TestCorruptRegistryIsMovedAside(t *testing.T) {
	in := newInstance(t)
	garbage := make([]byte, 8192)
	for i := range garbage {
		garbage[i] = byte(i * 7)
	}
	os.WriteFile(filepath.Join(in.state, "registry.db"), garbage, 0o600)
	in.mustRun("run", "--", bin, "_fixture", "exit", "0")
	aside, _ := filepath.Glob(filepath.Join(in.state, "registry.db.corrupt-*"))
	if len(aside) != 1 {
		t.Fatalf("got %v, want the corrupt file kept aside once", aside)
	}
	if b, _ := os.ReadFile(aside[0]); string(b) != string(garbage) {
		t.Fatal("the corrupt file was altered when moved aside")
	}
	if ps := in.mustProcesses(true); len(ps) != 1 {
		t.Fatalf("fresh registry has %d records, want 1", len(ps))
	}
}

// TestDetachedDaemonDropsLeakedFds: `supervisor daemon` run by a parent
// that leaks a pipe (no close-on-exec) must not keep it open.
func TestDetachedDaemonDropsLeakedFds(t *testing.T) {
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
