//go:build unix

package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Listener accepts the daemon's connections on its unix socket.
type Listener struct {
	ln   *net.UnixListener
	path string
	file os.FileInfo // the socket file it made, to tell it from a replacement
}

// Listen serves path, a socket only this user can use (0600 in a private
// directory). The caller holds the daemon's singleton lock, so a socket
// already at path is a dead daemon's and is replaced; anything else there
// is refused.
//
// The socket's directory must be safe (checkSafePath): one that another
// user can write lets them swap the socket for their own, and every client
// would then hand its environment to them.
func Listen(path string) (*Listener, error) {
	if err := checkSafePath(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("restrict %s to 0600: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return &Listener{ln: ln, path: path, file: fi}, nil
}

// Intact reports whether the socket file at the path is still the one
// this listener made: a user's rm, a cleaner of /tmp or a replacement
// leaves the listener serving nobody, and why says which.
func (l *Listener) Intact() (ok bool, why string) {
	fi, err := os.Lstat(l.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, "the socket file was deleted"
	case err != nil:
		return true, "" // unreadable for now: nothing to act on
	case !os.SameFile(fi, l.file):
		return false, "the socket file was replaced"
	}
	return true, ""
}

// Served reports whether some process accepts connections at path: a
// replacement socket may be another process's, which is left alone.
func Served(path string) bool {
	c, err := net.DialTimeout("unix", path, 500*time.Millisecond)
	if err != nil {
		// A full accept backlog refuses with EAGAIN: a live listener.
		return errors.Is(err, syscall.EAGAIN)
	}
	c.Close()
	return true
}

// Abandon stops listening without removing the socket file, which is no
// longer this listener's (see Intact).
func (l *Listener) Abandon() error {
	l.ln.SetUnlinkOnClose(false)
	return l.ln.Close()
}

// Accept waits for the next connection. Errors are the listener's (a
// closed listener gives net.ErrClosed).
func (l *Listener) Accept() (*Conn, error) {
	for {
		nc, err := l.ln.AcceptUnix()
		if err != nil {
			return nil, err
		}
		c, err := NewConn(nc)
		if err != nil {
			nc.Close()
			continue
		}
		return c, nil
	}
}

// Close stops listening and removes the socket.
func (l *Listener) Close() error { return l.ln.Close() }

// dial connects to the daemon's socket.
// A socket in a directory another user controls, or owned by another uid,
// is refused before connecting (the daemon refuses to listen there too,
// so it is not one of ours). The state directory is not checked here:
// the daemon checked it at start, and CheckPeer proves it is of this uid.
func dial(ctx context.Context, socket string) (*Conn, error) {
	if err := checkSafePath(filepath.Dir(socket)); err != nil && !isMissingDir(err) {
		return nil, fmt.Errorf("connect %s: %w", socket, err)
	}
	if err := checkSocketOwner(socket); err != nil {
		return nil, fmt.Errorf("connect %s: %w", socket, err)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("connect %s: %w", socket, ErrNotRunning)
		}
		return nil, fmt.Errorf("connect %s: %w", socket, err)
	}
	conn, err := NewConn(nc.(*net.UnixConn))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return conn, nil
}

// CheckPeer returns the peer's PID, or an error when its credentials
// cannot be read or it runs as another user.
func (c *Conn) CheckPeer() (pid int, err error) {
	pid, uid, err := c.PeerCred()
	if err != nil {
		return 0, err
	}
	if uid != os.Getuid() {
		return pid, fmt.Errorf("peer pid %d runs as uid %d, not %d: %w", pid, uid, os.Getuid(), ErrOtherUser)
	}
	return pid, nil
}

// removeStaleSocket removes a socket left by a dead daemon (we hold the
// singleton lock, so no live one serves it). Anything else at that path is
// not ours to delete.
func removeStaleSocket(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	if st.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket; refusing to replace it (set %s to another path)", path, EnvSocket)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}
