//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
)

const otherUID = 65534 // nobody

// TestUnsafeSocketDir (issue 13 item 8b): a socket or state directory that
// another user can replace things in (owned by another uid, or writable by
// group or others without the sticky bit, itself or a directory above it)
// is refused by the daemon before it listens, and by a client before it
// dials, with the path, the owner and mode found, and the fix.
func TestUnsafeSocketDir(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	me := os.Getuid()
	// mk makes base/name with exactly mode, owned by uid (-1: ours).
	mk := func(t *testing.T, name string, mode os.FileMode, uid int) string {
		t.Helper()
		d := filepath.Join(in.state, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		if uid >= 0 {
			if err := os.Chown(d, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	type tc struct {
		name        string
		needRoot    bool
		state, sock func(t *testing.T) string // "" keeps the instance's
		want        func(sock, state string) string
	}
	tests := []tc{
		{name: "socket dir of another uid", needRoot: true,
			sock: func(t *testing.T) string { return mk(t, "nob", 0o700, otherUID) + "/s" },
			want: func(sock, _ string) string {
				return fmt.Sprintf("refusing an unsafe directory: %s is owned by uid %d, not by you (uid %d) or root: that user could replace the daemon's socket; use a directory you own",
					filepath.Dir(sock), otherUID, me)
			}},
		{name: "socket dir 0777",
			sock: func(t *testing.T) string { return mk(t, "open", 0o777, -1) + "/s" },
			want: func(sock, _ string) string {
				return fmt.Sprintf("refusing an unsafe directory: %s is writable by group or others (owner uid %d, mode 0777) and not sticky: they could replace the daemon's socket; chmod 700 %s, or use a directory you own",
					filepath.Dir(sock), me, filepath.Dir(sock))
			}},
		{name: "socket dir 0770",
			sock: func(t *testing.T) string { return mk(t, "group", 0o770, -1) + "/s" },
			want: func(sock, _ string) string {
				return fmt.Sprintf("%s is writable by group or others (owner uid %d, mode 0770) and not sticky", filepath.Dir(sock), me)
			}},
		{name: "socket dir under a 0777 dir",
			sock: func(t *testing.T) string { mk(t, "open2", 0o777, -1); return mk(t, "open2/sub", 0o700, -1) + "/s" },
			want: func(sock, _ string) string {
				up := filepath.Dir(filepath.Dir(sock))
				return fmt.Sprintf("%s is writable by group or others (owner uid %d, mode 0777) and not sticky: they could replace the daemon's socket; chmod go-w %s", up, me, up)
			}},
		{name: "state dir of another uid", needRoot: true,
			state: func(t *testing.T) string { return mk(t, "nobst", 0o700, otherUID) },
			want: func(_, state string) string {
				return fmt.Sprintf("refusing an unsafe directory: %s is owned by uid %d, not by you (uid %d): that user could replace the daemon's socket or state; use a directory you own",
					state, otherUID, me)
			}},
		{name: "state dir under a 0777 dir",
			state: func(t *testing.T) string { mk(t, "open3", 0o777, -1); return filepath.Join(in.state, "open3", "st") },
			want: func(_, state string) string {
				return fmt.Sprintf("refusing an unsafe directory: %s is writable by group or others (owner uid %d, mode 0777) and not sticky", filepath.Dir(state), me)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needRoot && me != 0 {
				t.Skip("needs root to chown a directory to another uid (65534)")
			}
			state, sock := in.state, in.socket()
			if tt.state != nil {
				state = tt.state(t)
				sock = filepath.Join(in.state, "ok.sock") // in a safe directory
			}
			if tt.sock != nil {
				sock = tt.sock(t)
			}
			env := append(append([]string{}, in.env...), api.EnvStateDir+"="+state, api.EnvSocket+"="+sock)
			want := tt.want(sock, state)

			// The daemon refuses to start. The context only guards against
			// a daemon that (before the fix) serves on forever.
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			d := exec.CommandContext(ctx, bin, "daemon", "--foreground")
			d.Env = env
			out, err := d.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("daemon with socket %s, state %s served instead of refusing:\n%s", sock, state, out)
			}
			if err == nil || !strings.Contains(string(out), "supervisor: ") || !strings.Contains(string(out), want) {
				t.Errorf("daemon: %v, output:\n%s\nwant a refusal with %q", err, out, want)
			}
			if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("daemon left a socket at %s (%v)", sock, err)
			}
			if tt.sock == nil {
				return
			}
			// A client refuses to dial it (before the fix: "not running").
			for _, args := range [][]string{{"ps"}, {"status"}} {
				c := exec.Command(bin, args...)
				c.Env = env
				out, err := c.CombinedOutput()
				wantDial := "supervisor: connect " + sock + ": refusing an unsafe directory: "
				if err == nil || !strings.Contains(string(out), wantDial) || !strings.Contains(string(out), want[strings.Index(want, filepath.Dir(filepath.Dir(sock))):]) {
					t.Errorf("%s: %v, output:\n%s\nwant %q and %q", args[0], err, out, wantDial, want)
				}
			}
		})
	}
}

// TestForeignSocketOwner: a socket file of another uid, even in a private
// directory, is not dialed: the client refuses before connecting.
func TestForeignSocketOwner(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to chown a socket to another uid (65534)")
	}
	in := newInstance(t)
	sock := in.socket()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chown(sock, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := in.run("ps")
	want := fmt.Sprintf("supervisor: connect %s: refusing an unsafe directory: socket %s is owned by uid %d, not by you (uid 0): it is another user's; set %s to a path in a directory you own",
		sock, sock, otherUID, api.EnvSocket)
	if code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("ps: exit %d, stderr %q; want %q", code, stderr, want)
	}
	// Nothing connected: a connect completes into the backlog before the
	// client exits, so a non-blocking accept sees any.
	rc, err := ln.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var aerr error
	rc.Control(func(fd uintptr) {
		var nfd int
		if nfd, _, aerr = unix.Accept(int(fd)); aerr == nil {
			unix.Close(nfd)
		}
	})
	if !errors.Is(aerr, unix.EAGAIN) {
		t.Errorf("the client connected to the foreign socket (accept: %v)", aerr)
	}
}

// TestSocketInStickyTmp: a socket directly in /tmp (root's, sticky, 1777)
// is allowed: nobody can move another user's file out of a sticky
// directory, and the client still checks the daemon's uid once connected.
func TestSocketInStickyTmp(t *testing.T) {
	t.Parallel()
	if st, err := os.Stat("/tmp"); err != nil || st.Mode()&os.ModeSticky == 0 {
		t.Skipf("/tmp is not sticky here (%v): the case does not apply", err)
	}
	in := newInstance(t)
	sock := filepath.Join("/tmp", fmt.Sprintf("svs-%d-%d.sock", os.Getpid(), time.Now().UnixNano()))
	in.env = append(in.env, api.EnvSocket+"="+sock)
	in.mustRun("daemon")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := api.Dial(ctx, sock)
	if err != nil {
		t.Fatalf("dial the daemon on %s: %v", sock, err)
	}
	pid := c.Daemon.PID
	c.Close()
	defer killByPID(pid)
	in.mustRun("ps")
	in.mustRun("daemon", "stop")
}
