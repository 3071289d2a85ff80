//go:build unix

package broker

import (
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawWriter writes to a non-blocking descriptor without the runtime
// poller: one attempt, never a wait (the queue's fast path).
type rawWriter struct{ rc syscall.RawConn }

// newRawWriter returns w's descriptor if it is non-blocking (os.Pipe's,
// PollableFile's), else nil: a write to a blocking one could block the
// routing goroutine, which must never wait on a peer.
func newRawWriter(w io.Writer) rawWriter {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return rawWriter{}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return rawWriter{}
	}
	nonblock := false
	if err := rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblock = err == nil && fl&unix.O_NONBLOCK != 0
	}); err != nil || !nonblock {
		return rawWriter{}
	}
	return rawWriter{rc}
}

func (r rawWriter) ok() bool { return r.rc != nil }

var newline = []byte{'\n'}

// writeOnce writes msg and a newline with one non-blocking writev, and
// returns how many bytes it wrote: 0 on any error (a full pipe, a closed
// descriptor), which the writer meets again and handles.
func (r rawWriter) writeOnce(msg []byte) int {
	n := 0
	// RawConn.Write fails only when the file is closed, before the
	// callback runs: n stays 0, which the caller handles as any failed
	// write.
	_ = r.rc.Write(func(fd uintptr) bool {
		var err error
		for {
			n, err = unix.Writev(int(fd), [][]byte{msg, newline})
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			n = 0
		}
		return true // one attempt: never wait for the poller
	})
	return n
}
