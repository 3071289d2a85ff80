//go:build unix

package api

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Conn is one framed connection. Send may be called concurrently with Recv;
// concurrent Sends are serialized.
type Conn struct {
	c  *net.UnixConn
	rc syscall.RawConn

	maxRecv, maxSend int // frame limits; MaxFrame unless SetLimits

	wmu sync.Mutex
}

// NewConn wraps a unix stream connection.
func NewConn(c *net.UnixConn) (*Conn, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("raw socket: %w", err)
	}
	return &Conn{c: c, rc: rc, maxRecv: MaxFrame, maxSend: MaxFrame}, nil
}

// SetDeadline sets the read and write deadline; the zero time clears it.
func (c *Conn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// CloseWrite half-closes the connection.
func (c *Conn) CloseWrite() error { return c.c.CloseWrite() }

// Send writes one message of type typ with body (nil for none) and passes
// fds with it. The caller keeps ownership of fds.
func (c *Conn) Send(typ string, body any, fds ...int) error {
	payload, err := encodeFrame(typ, body, c.maxSend)
	if err != nil {
		return err
	}
	frame := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(frame, uint32(len(payload)))
	copy(frame[4:], payload)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, _, err := c.c.WriteMsgUnix(frame, oob, nil)
	if err != nil {
		return fmt.Errorf("send %s: %w", typ, err)
	}
	for n < len(frame) {
		m, err := c.c.Write(frame[n:])
		if err != nil {
			return fmt.Errorf("send %s: %w", typ, err)
		}
		n += m
	}
	return nil
}

// Recv reads one message and the fds that came with it (close-on-exec; the
// caller owns them). On error no fds are returned: any received are closed.
func (c *Conn) Recv() (Msg, []int, error) { return c.recv(true) }

// recvQueued is Recv of a message already queued in full, as everything
// a peer wrote before it closed is: it never waits, and it reads whatever
// the deadline says. (Recv checks the deadline before its first read: a
// goroutine that stalls past its deadline on a loaded machine then reads
// nothing, though the message waits in the socket.) Nothing queued yet is
// an error wrapping EAGAIN; a peer gone with nothing queued is io.EOF.
func (c *Conn) recvQueued() (Msg, []int, error) { return c.recv(false) }

func (c *Conn) recv(wait bool) (Msg, []int, error) {
	var fds []int
	fail := func(err error) (Msg, []int, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return Msg{}, nil, err
	}
	var hdr [4]byte
	if err := c.readFull(hdr[:], &fds, wait); err != nil {
		return fail(err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if err := checkFrameLen(n, c.maxRecv); err != nil {
		return fail(err)
	}
	buf := make([]byte, n)
	if err := c.readFull(buf, &fds, wait); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fail(err)
	}
	m, err := decodeFrame(buf)
	if err != nil {
		return fail(err)
	}
	return m, fds, nil
}

// readFull fills b with recvmsg(MSG_CMSG_CLOEXEC), collecting any fds.
// Unless wait, it reads only what is queued (see recvQueued).
func (c *Conn) readFull(b []byte, fds *[]int, wait bool) error {
	// Room for far more than maxFds: a sender's excess is then received
	// (and closed by the caller) rather than truncated, which on macOS
	// leaves a control header whose length overruns the buffer.
	oob := make([]byte, unix.CmsgSpace(oobFds*4))
	got := 0
	for got < len(b) {
		var n, oobn, flags int
		var rerr, perr error
		var rights []int
		read := func(fd uintptr) bool {
			// Without MSG_CMSG_CLOEXEC (macOS) the fds are marked right
			// after recvmsg, under the fork lock, so no spawn in between
			// can inherit one.
			recvLock()
			n, oobn, flags, _, rerr = unix.Recvmsg(int(fd), b[got:], oob, recvFlags)
			if oobn > 0 {
				rights, perr = parseRights(oob[:oobn])
				cloexecAll(rights)
			}
			recvUnlock()
			return !errors.Is(rerr, unix.EAGAIN)
		}
		var err error
		if wait {
			err = c.rc.Read(read)
		} else {
			// Control runs read once, deadline or not; the socket is
			// non-blocking, so an empty queue is EAGAIN, not a wait.
			err = c.rc.Control(func(fd uintptr) { read(fd) })
		}
		if err == nil {
			err = rerr
		}
		*fds = append(*fds, rights...)
		if perr != nil {
			return perr
		}
		if flags&unix.MSG_CTRUNC != 0 {
			return ErrTooManyFds
		}
		if len(*fds) > maxFds {
			return ErrTooManyFds
		}
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		if n == 0 {
			if got > 0 {
				return io.ErrUnexpectedEOF
			}
			return io.EOF
		}
		got += n
	}
	return nil
}

// oobFds sizes the control buffer; see readFull.
const oobFds = 256

// parseRights collects the fds of every SCM_RIGHTS message in oob. A
// header whose length runs past the buffer (macOS copies a truncated
// header out unchanged) is read up to the buffer's end, so every fd that
// did arrive is returned, to be used or closed.
func parseRights(oob []byte) ([]int, error) {
	var fds []int
	hdr := unix.CmsgLen(0)
	for len(oob) >= hdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hdr {
			return fds, fmt.Errorf("%w: control message of %d bytes", ErrMalformed, l)
		}
		l = min(l, len(oob))
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_RIGHTS {
			for data := oob[hdr:l]; len(data) >= 4; data = data[4:] {
				fds = append(fds, int(int32(binary.NativeEndian.Uint32(data))))
			}
		}
		step := unix.CmsgSpace(l - hdr)
		if step >= len(oob) {
			break
		}
		oob = oob[step:]
	}
	return fds, nil
}
