//go:build linux

package main

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"

	"path/filepath"
)

// Issue 27: a daemon whose socket file is deleted, or replaced by a
// socket nobody serves, listens again at the same path: clients reach
// the same daemon, with its servers, and no second daemon is needed.
func TestDaemonKeepsItsSocket(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"deleted", "replaced"} {
		t.Run(how, func(t *testing.T) {
			in := newInstance(t)
			s := in.startShim("--", bin, "_fixture", "sleep")
			server := s.readyPID(t)
			pid := in.daemonPID()
			if err := os.Remove(in.socket()); err != nil {
				t.Fatal(err)
			}
			if how == "replaced" {
				// A socket file nobody accepts on.
				ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: in.socket(), Net: "unix"})
				if err != nil {
					t.Fatal(err)
				}
				ln.SetUnlinkOnClose(false)
				ln.Close()
			}
			deadline := time.Now().Add(wait)
			for {
				if _, _, code := in.run("status"); code == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the daemon is still unreachable %v after its socket was %s", wait, how)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if got := in.daemonPID(); got != pid {
				t.Fatalf("daemon pid %d after the socket was %s, want the same daemon %d", got, how, pid)
			}
			findByPIDState(t, in, server, "running")
			if ev := in.mustRun("events"); !strings.Contains(ev, "daemon.socket") {
				t.Fatalf("no daemon.socket event:\n%s", ev)
			}
		})
	}
}

// TestSocketPathNeverReplacesAFile: SUPERVISOR_SOCKET pointing at a file
// that is not a socket is refused; the file survives.
func TestSocketPathNeverReplacesAFile(t *testing.T) {
	t.Parallel()
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

// A daemon whose state directory is removed with its socket in it (the
// instance removed: its registry gone too) does not make it again: it
// exits and leaves its servers running for the next daemon, and its keeper
// starts none in its place.
func TestRemovedInstanceStepsDown(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	s := in.startShim("--", bin, "_fixture", "sleep")
	server := s.readyPID(t)
	stok := mustToken(t, server)
	t.Cleanup(func() { killByPIDNow(t, server) }) // no daemon is left to stop it
	d := in.daemonPID()
	dtok := mustToken(t, d)
	keepers := in.keepers()
	if err := os.RemoveAll(in.state); err != nil {
		t.Fatal(err)
	}
	waitGonePID(t, d, dtok)
	for _, k := range keepers {
		if tok, err := proc.TokenOf(k); err == nil {
			waitGonePID(t, k, tok)
		}
	}
	if _, err := os.Stat(in.state); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the state directory %s is back (%v)", in.state, err)
	}
	if proc.Verify(server, stok) != nil {
		t.Errorf("server %d was stopped: a daemon stepping down leaves it to the next", server)
	}
}
