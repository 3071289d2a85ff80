package denials

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// flushAfter is how long an event waits for its end record: the kernel
// sends one within the system call, where it audits system calls at all.
const flushAfter = 250 * time.Millisecond

// Reader receives the kernel's audit records as a listener of its
// read-only multicast group: it takes nothing from auditd (which gets its
// own copy) and changes nothing.
type Reader struct {
	fd int
}

// Open joins the audit's multicast group. It needs CAP_AUDIT_READ.
func Open() (*Reader, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("the kernel's audit cannot be read: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (unix.AUDIT_NLGRP_READLOG - 1)}); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EPERM) {
			return nil, errors.New("the kernel's audit records are for root (CAP_AUDIT_READ) alone")
		}
		return nil, fmt.Errorf("the kernel's audit cannot be read: %w", err)
	}
	// The wait for ctx: a receive returns at least this often.
	tv := unix.NsecToTimeval((flushAfter / 2).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("the kernel's audit cannot be read: %w", err)
	}
	return &Reader{fd: fd}, nil
}

// Run hands each denial to f until ctx ends, then closes r. Records are
// lost where the kernel's queue to its readers overflows; Run goes on.
func (r *Reader) Run(ctx context.Context, f func(Denial)) error {
	defer unix.Close(r.fd)
	var j Joiner
	buf := make([]byte, 1<<16)
	for ctx.Err() == nil {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		now := time.Now()
		for _, d := range j.Flush(now, flushAfter) {
			f(d)
		}
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS):
			continue // records dropped by the kernel: the rest still come
		case err != nil:
			return fmt.Errorf("reading the kernel's audit: %w", err)
		}
		for _, m := range messages(buf[:n]) {
			for _, d := range j.Add(m.typ, m.text, now) {
				f(d)
			}
		}
	}
	return nil
}

type message struct {
	typ  int
	text string
}

// messages splits a netlink datagram into its messages.
func messages(b []byte) []message {
	var out []message
	for len(b) >= unix.NLMSG_HDRLEN {
		size := int(binary.NativeEndian.Uint32(b[0:4]))
		if size < unix.NLMSG_HDRLEN || size > len(b) {
			break
		}
		text := b[unix.NLMSG_HDRLEN:size]
		for len(text) > 0 && (text[len(text)-1] == 0 || text[len(text)-1] == '\n') {
			text = text[:len(text)-1]
		}
		out = append(out, message{typ: int(binary.NativeEndian.Uint16(b[4:6])), text: string(text)})
		b = b[min(nlmsgAlign(size), len(b)):]
	}
	return out
}

func nlmsgAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// On says whether the kernel's audit is on, and so writes Landlock's
// denials at all. Asking needs CAP_AUDIT_CONTROL.
func On() (bool, error) {
	st, err := status()
	if err != nil {
		return false, err
	}
	return st.Enabled != 0, nil
}

// SetOn turns the kernel's audit on or off for the whole machine (it
// needs CAP_AUDIT_CONTROL), and says what it was. For tests: the daemon
// never changes it.
func SetOn(on bool) (was bool, err error) {
	st, err := status()
	if err != nil {
		return false, err
	}
	was = st.Enabled != 0
	var v uint32
	if on {
		v = 1
	}
	req := auditStatus{Mask: 1, Enabled: v} // AUDIT_STATUS_ENABLED
	if _, err := request(unix.AUDIT_SET, req.bytes()); err != nil {
		return was, fmt.Errorf("turn the kernel's audit %s: %w", map[bool]string{true: "on", false: "off"}[on], err)
	}
	return was, nil
}

// auditStatus is struct audit_status, as far as the fields used here.
type auditStatus struct {
	Mask, Enabled, Failure, Pid, RateLimit, BacklogLimit, Lost, Backlog uint32
}

func (s auditStatus) bytes() []byte {
	b := make([]byte, 8*4)
	for i, v := range []uint32{s.Mask, s.Enabled, s.Failure, s.Pid, s.RateLimit, s.BacklogLimit, s.Lost, s.Backlog} {
		binary.NativeEndian.PutUint32(b[4*i:], v)
	}
	return b
}

func status() (auditStatus, error) {
	b, err := request(unix.AUDIT_GET, nil)
	if err != nil {
		return auditStatus{}, err
	}
	if len(b) < 8 {
		return auditStatus{}, errors.New("the kernel's audit status: a short answer")
	}
	return auditStatus{Mask: binary.NativeEndian.Uint32(b[0:]), Enabled: binary.NativeEndian.Uint32(b[4:])}, nil
}

// request sends one audit request and returns its answer's payload (for
// AUDIT_SET: none, after the kernel's acknowledgement).
func request(typ uint16, payload []byte) ([]byte, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("the kernel's audit: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(time.Second.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, fmt.Errorf("the kernel's audit: %w", err)
	}
	msg := make([]byte, unix.NLMSG_HDRLEN+len(payload))
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], 1) // sequence
	copy(msg[unix.NLMSG_HDRLEN:], payload)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("the kernel's audit: %w", err)
	}
	buf := make([]byte, 8192)
	var answer []byte
	acked := false
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("the kernel's audit: %w", err)
		}
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			size := int(binary.NativeEndian.Uint32(b[0:4]))
			if size < unix.NLMSG_HDRLEN || size > len(b) {
				break
			}
			t := binary.NativeEndian.Uint16(b[4:6])
			body := b[unix.NLMSG_HDRLEN:size]
			switch {
			case t == unix.NLMSG_ERROR && len(body) >= 4:
				if code := int32(binary.NativeEndian.Uint32(body)); code != 0 {
					if unix.Errno(-code) == unix.EPERM {
						return nil, errors.New("the kernel's audit status is for root (CAP_AUDIT_CONTROL) alone")
					}
					return nil, fmt.Errorf("the kernel's audit: %w", unix.Errno(-code))
				}
				acked = true
			case t == typ:
				answer = append([]byte(nil), body...)
			}
			// The status comes from a kernel thread of its own, before or
			// after the acknowledgement.
			if acked && (typ != unix.AUDIT_GET || answer != nil) {
				return answer, nil
			}
			b = b[min(nlmsgAlign(size), len(b)):]
		}
	}
}
