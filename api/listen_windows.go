package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// pipeBuffer is the pipe's in and out buffer quota: a run request (the
// shim's environment) fits in one write.
const pipeBuffer = 64 << 10

// Listener accepts the daemon's connections on its named pipe.
type Listener struct{ ln net.Listener }

// Listen serves the named pipe of path (see pipeName), which only this
// user can open: its DACL grants the user's SID and nobody else, and
// go-winio rejects remote clients. The pipe is in byte mode: frames are a
// stream, as on unix.
//
// Unlike a unix socket a pipe leaves nothing behind: it vanishes with its
// last handle, so a dead daemon's needs no removal. A pipe that exists is
// served by a live process, which the caller's singleton lock says is not
// a daemon of this instance; creating it again fails, and the error says
// so.
func Listen(path string) (*Listener, error) {
	name, err := pipeName(path)
	if err != nil {
		return nil, err
	}
	sid, err := currentUserSID()
	if err != nil {
		return nil, err
	}
	ln, err := winio.ListenPipe(name, &winio.PipeConfig{
		// P: no inherited entries; GA for this user only.
		SecurityDescriptor: "D:P(A;;GA;;;" + sid.String() + ")",
		InputBufferSize:    pipeBuffer,
		OutputBufferSize:   pipeBuffer,
	})
	if err != nil {
		if errors.Is(err, windows.ERROR_ACCESS_DENIED) || errors.Is(err, windows.ERROR_ALREADY_EXISTS) {
			return nil, fmt.Errorf("listen on %s (for %s): the pipe is already served by another process, of this user or another (set %s to another path): %w", name, path, EnvSocket, err)
		}
		return nil, fmt.Errorf("listen on %s (for %s): %w", name, path, err)
	}
	return &Listener{ln: ln}, nil
}

// Accept waits for the next connection. Errors are the listener's (a
// closed listener gives net.ErrClosed).
func (l *Listener) Accept() (*Conn, error) {
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			return nil, err
		}
		c, err := newConn(nc, true)
		if err != nil {
			nc.Close()
			continue
		}
		return c, nil
	}
}

// Close stops listening; the pipe goes away with its last instance.
func (l *Listener) Close() error { return l.ln.Close() }

// Intact is always true: a named pipe is no file anyone can delete.
func (l *Listener) Intact() (ok bool, why string) { return true, "" }

// Served reports false: Intact never asks for a replacement here.
func Served(string) bool { return false }

// Abandon is Close.
func (l *Listener) Abandon() error { return l.ln.Close() }

// dial connects to the daemon's pipe for socket. go-winio retries a busy
// pipe (every instance taken, or the daemon between two Accepts) until ctx
// ends; a pipe that does not exist means no daemon serves it.
func dial(ctx context.Context, socket string) (*Conn, error) {
	name, err := pipeName(socket)
	if err != nil {
		return nil, err
	}
	nc, err := winio.DialPipeContext(ctx, name)
	if err != nil {
		// ERROR_FILE_NOT_FOUND and ERROR_PATH_NOT_FOUND match ErrNotExist.
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("connect %s (for %s): %w", name, socket, ErrNotRunning)
		}
		// Our daemon's DACL admits this user: a pipe that refuses it is
		// most likely another user's process holding the name.
		if errors.Is(err, windows.ERROR_ACCESS_DENIED) {
			return nil, fmt.Errorf("connect %s (for %s): the pipe refuses this user (is another user's process serving that name? set %s to another path): %w", name, socket, EnvSocket, err)
		}
		return nil, fmt.Errorf("connect %s (for %s): %w", name, socket, err)
	}
	conn, err := newConn(nc, false)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return conn, nil
}

// peerPID returns the PID of the process at the other end of the pipe, as
// the pipe recorded it: the client's on the daemon's side, the server's on
// the client's.
func (c *Conn) peerPID() (int, error) {
	var pid uint32
	if c.accepted {
		if err := windows.GetNamedPipeClientProcessId(c.h, &pid); err != nil {
			return 0, fmt.Errorf("pipe client's process id: %w", err)
		}
	} else if err := windows.GetNamedPipeServerProcessId(c.h, &pid); err != nil {
		return 0, fmt.Errorf("pipe server's process id: %w", err)
	}
	return int(pid), nil
}

// CheckPeer returns the peer's PID, or an error when its identity cannot
// be read or it runs as another user (another SID). The DACL keeps other
// users off the daemon's pipe; on the client's side this refuses a server
// that squats the pipe's name, which anyone can create first.
func (c *Conn) CheckPeer() (pid int, err error) {
	pid, err = c.peerPID()
	if err != nil {
		return 0, err
	}
	peer, err := processUserSID(pid)
	if err != nil {
		return 0, err
	}
	self, err := currentUserSID()
	if err != nil {
		return 0, err
	}
	if !windows.EqualSid(peer, self) {
		return pid, fmt.Errorf("peer pid %d runs as %s, not %s: %w", pid, peer, self, ErrOtherUser)
	}
	return pid, nil
}

// currentUserSID is the user SID of this process's token.
func currentUserSID() (*windows.SID, error) {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("read this process's user: %w", err)
	}
	return u.User.Sid, nil
}

// processUserSID is the user SID of process pid's token. Query-limited
// access and TOKEN_QUERY are granted to the same user even across
// integrity levels, so an unelevated shim can check an elevated daemon.
func processUserSID(pid int) (*windows.SID, error) {
	p, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return nil, fmt.Errorf("open peer pid %d: %w", pid, err)
	}
	defer windows.CloseHandle(p)
	var tok windows.Token
	if err := windows.OpenProcessToken(p, windows.TOKEN_QUERY, &tok); err != nil {
		return nil, fmt.Errorf("open the token of peer pid %d: %w", pid, err)
	}
	defer tok.Close()
	u, err := tok.GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("read the user of peer pid %d: %w", pid, err)
	}
	// The SID lives in u's Go-allocated buffer, not in the token: it stays
	// valid after the token is closed.
	return u.User.Sid, nil
}
