//go:build unix

package shutdown

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// waker is a self-pipe: a poll on its read end wakes once wake is called.
// (A pipe rather than an eventfd, which macOS lacks.)
type waker struct{ r, w int }

func newWaker() (*waker, error) {
	var p [2]int
	// Held off forks until both ends are close-on-exec (macOS has no
	// pipe2): a server spawned meanwhile must not inherit one.
	syscall.ForkLock.RLock()
	err := unix.Pipe(p[:])
	if err == nil {
		unix.CloseOnExec(p[0])
		unix.CloseOnExec(p[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	for _, fd := range p {
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return nil, fmt.Errorf("pipe: nonblocking: %w", err)
		}
	}
	return &waker{r: p[0], w: p[1]}, nil
}

func (w *waker) fd() int { return w.r }

// wake makes the read end readable; a full pipe is already readable.
func (w *waker) wake() {
	_, _ = unix.Write(w.w, []byte{1}) // a full pipe (EAGAIN) has a wake pending already
}

// drain empties the pipe so the next poll blocks again.
func (w *waker) drain() {
	var buf [64]byte
	for {
		if n, err := unix.Read(w.r, buf[:]); n <= 0 || err != nil {
			return
		}
	}
}

func (w *waker) close() {
	unix.Close(w.r)
	unix.Close(w.w)
}
