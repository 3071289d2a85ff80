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
)

// Listener accepts the daemon's connections on its unix socket.
type Listener struct{ ln *net.UnixListener }

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
	return &Listener{ln: ln}, nil
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
