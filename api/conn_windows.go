package api

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/windows"
)

// A frame on Windows is the unix frame with the handles written into it,
// since a named pipe has no SCM_RIGHTS:
//
//	4 bytes  big-endian length L of the JSON message (bounded as on unix)
//	1 byte   n, the number of handles
//	n×8      big-endian handle values, valid in the receiving process
//	L bytes  the JSON message
//
// The handles come before the JSON so that the receiver knows every handle
// it was given before anything that can fail (an oversized or malformed
// message, a short read): each of those paths closes them, and none leaks.
const handleHeader = 5

// Conn is one framed connection over a named pipe. Send may be called
// concurrently with Recv; concurrent Sends are serialized.
type Conn struct {
	c net.Conn
	// h is the pipe handle, read once from go-winio's Fd(): its Close
	// zeroes the field Fd reads, unsynchronized with concurrent callers.
	h windows.Handle
	// accepted is true on the daemon's side of the pipe: the peer is then
	// the pipe's client, otherwise its server.
	accepted bool

	maxRecv, maxSend int // frame limits; MaxFrame unless SetLimits

	wmu sync.Mutex
}

// newConn wraps a go-winio pipe connection. Its conn types embed win32File,
// whose Fd() uintptr returns the raw pipe handle; go-winio has no
// syscall.Conn, so Fd is the one way to the handle that
// GetNamedPipe{Client,Server}ProcessId need.
func newConn(nc net.Conn, accepted bool) (*Conn, error) {
	f, ok := nc.(interface{ Fd() uintptr })
	if !ok {
		return nil, fmt.Errorf("pipe connection %T does not expose its handle", nc)
	}
	return &Conn{c: nc, h: windows.Handle(f.Fd()), accepted: accepted, maxRecv: MaxFrame, maxSend: MaxFrame}, nil
}

// SetDeadline sets the read and write deadline; the zero time clears it.
func (c *Conn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// CloseWrite half-closes the connection where the pipe supports it. A
// byte-mode pipe (ours, see Listen) has no half-close: go-winio fakes one
// with a zero-byte message, which only a message-mode pipe delivers. No
// caller outside the unix tests needs it, so it reports ErrUnsupported
// rather than pretending.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("half-close a byte-mode named pipe: %w", errors.ErrUnsupported)
}

// Send writes one message of type typ with body (nil for none) and passes
// the handles in fds with it: each is duplicated into the peer process and
// the duplicate's value travels in the frame. The caller keeps ownership of
// fds; the receiver owns the duplicates.
func (c *Conn) Send(typ string, body any, fds ...int) error {
	payload, err := encodeFrame(typ, body, c.maxSend)
	if err != nil {
		return err
	}
	if len(fds) > maxFds {
		return fmt.Errorf("send %s with %d handles: %w", typ, len(fds), ErrTooManyFds)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()

	var peer windows.Handle
	var dups []windows.Handle
	if len(fds) > 0 {
		if peer, dups, err = c.duplicateIntoPeer(fds); err != nil {
			return fmt.Errorf("send %s: %w", typ, err)
		}
		defer windows.CloseHandle(peer)
	}
	frame := make([]byte, handleHeader+8*len(dups)+len(payload))
	binary.BigEndian.PutUint32(frame, uint32(len(payload)))
	frame[4] = byte(len(dups))
	for i, d := range dups {
		binary.BigEndian.PutUint64(frame[handleHeader+8*i:], uint64(d))
	}
	copy(frame[handleHeader+8*len(dups):], payload)

	n := 0
	for n < len(frame) {
		m, err := c.c.Write(frame[n:])
		n += m
		if err != nil {
			reclaim(peer, dups, n)
			return fmt.Errorf("send %s: %w", typ, err)
		}
	}
	return nil
}

// duplicateIntoPeer duplicates fds into the peer process (same access, not
// inheritable: the receiver's os/exec makes the child's inheritable copies,
// as MSG_CMSG_CLOEXEC leaves it on unix). It returns the peer process,
// opened with PROCESS_DUP_HANDLE, for reclaim; on failure it has closed
// everything it made.
//
// The sender pushes, rather than the receiver pulling from the sender,
// because the daemon then needs no right over the shims. The catch: a shim
// must be able to open the daemon with PROCESS_DUP_HANDLE, which fails when
// the daemon runs at a higher integrity level (elevated) than the shim.
func (c *Conn) duplicateIntoPeer(fds []int) (windows.Handle, []windows.Handle, error) {
	pid, err := c.peerPID()
	if err != nil {
		return 0, nil, err
	}
	peer, err := windows.OpenProcess(windows.PROCESS_DUP_HANDLE, false, uint32(pid))
	if err != nil {
		return 0, nil, fmt.Errorf("open peer pid %d to hand it handles: %w", pid, err)
	}
	self := windows.CurrentProcess()
	dups := make([]windows.Handle, 0, len(fds))
	for _, fd := range fds {
		var d windows.Handle
		// 0 is no handle, and negative values are pseudo-handles: -1
		// would hand the peer this process itself.
		if fd <= 0 {
			reclaim(peer, dups, 0)
			windows.CloseHandle(peer)
			return 0, nil, fmt.Errorf("hand %d to peer pid %d: not a handle: %w", fd, pid, windows.ERROR_INVALID_HANDLE)
		}
		if err := windows.DuplicateHandle(self, windows.Handle(fd), peer, &d, 0, false, windows.DUPLICATE_SAME_ACCESS); err != nil {
			reclaim(peer, dups, 0)
			windows.CloseHandle(peer)
			return 0, nil, fmt.Errorf("duplicate handle %#x into peer pid %d: %w", fd, pid, err)
		}
		dups = append(dups, d)
	}
	return peer, dups, nil
}

// reclaim closes, inside the peer, the duplicates whose values the peer
// cannot have read: those not wholly within the first written bytes of the
// frame. One it may have read is its to close (Recv does on every error);
// closing it here too could close an unrelated handle that reused the
// value in the peer. A peer that dies frees its handles with it.
func reclaim(peer windows.Handle, dups []windows.Handle, written int) {
	for i, d := range dups {
		if written >= handleHeader+8*(i+1) {
			continue
		}
		// DUPLICATE_CLOSE_SOURCE with no target closes d in peer.
		windows.DuplicateHandle(peer, d, 0, nil, 0, false, windows.DUPLICATE_CLOSE_SOURCE)
	}
}

// recvQueued is Recv bounded by answerWait: a named pipe has no read that
// is sure to be tried whatever the deadline.
func (c *Conn) recvQueued() (Msg, []int, error) {
	c.SetDeadline(time.Now().Add(answerWait))
	return c.Recv()
}

// Recv reads one message and the handles that came with it (not
// inheritable; the caller owns them and closes unused ones with CloseFds).
// On error no handles are returned: any received are closed.
//
// The handle values are taken on trust: a pipe only this user can open
// (Listen's DACL) and CheckPeer on both sides mean the sender is this
// user, who could open this process and close its handles anyway.
func (c *Conn) Recv() (Msg, []int, error) {
	var fds []int
	fail := func(err error) (Msg, []int, error) {
		CloseFds(fds)
		return Msg{}, nil, err
	}
	var hdr [handleHeader]byte
	if _, err := c.readFull(hdr[:]); err != nil {
		return fail(err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if count := int(hdr[4]); count > 0 {
		hb := make([]byte, 8*count)
		got, err := c.readFull(hb)
		// Every handle whose 8 bytes arrived is ours, even in a cut-off
		// frame; the sender reclaims the rest (see reclaim).
		for i := 0; 8*(i+1) <= got; i++ {
			fds = append(fds, int(binary.BigEndian.Uint64(hb[8*i:])))
		}
		if err != nil {
			return fail(unexpected(err))
		}
		if count > maxFds {
			return fail(ErrTooManyFds)
		}
	}
	if err := checkFrameLen(n, c.maxRecv); err != nil {
		return fail(err)
	}
	buf := make([]byte, n)
	if _, err := c.readFull(buf); err != nil {
		return fail(unexpected(err))
	}
	m, err := decodeFrame(buf)
	if err != nil {
		return fail(err)
	}
	return m, fds, nil
}

// unexpected turns an EOF inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readFull fills b and returns how much of it it filled. A peer gone
// before the first byte is io.EOF, within b io.ErrUnexpectedEOF, as on
// unix. go-winio reports ERROR_BROKEN_PIPE as EOF already; a server
// instance whose client disconnected can also see ERROR_PIPE_NOT_CONNECTED
// or ERROR_NO_DATA, which mean the same.
func (c *Conn) readFull(b []byte) (int, error) {
	got := 0
	for got < len(b) {
		n, err := c.c.Read(b[got:])
		got += n
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, windows.ERROR_PIPE_NOT_CONNECTED) || errors.Is(err, windows.ERROR_NO_DATA) {
				if got > 0 {
					return got, io.ErrUnexpectedEOF
				}
				return got, io.EOF
			}
			return got, fmt.Errorf("receive: %w", err)
		}
	}
	return got, nil
}
