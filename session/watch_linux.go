package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Watcher tells when watched processes (hosts) die. One epoll loop over
// pidfds serves every watch: no poll interval, no goroutine per host.
type Watcher struct {
	log  Logger
	epfd int
	evfd int // wakes Run for shutdown

	mu      sync.Mutex
	watches map[int]*watch // by pidfd
	closed  bool
}

type watch struct {
	pid    int
	tok    proc.Token
	fd     int
	onExit func()
	// onStatus, when set instead of onExit, gets the exit status too
	// (WatchStatus).
	onStatus func(ws syscall.WaitStatus, known bool)
}

// NewWatcher creates the epoll set; Run drives it, Close releases it.
func NewWatcher(log Logger) (*Watcher, error) {
	if log == nil {
		log = nopLogger{}
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, fmt.Errorf("epoll_ctl eventfd: %w", err)
	}
	return &Watcher{log: log, epfd: epfd, evfd: evfd, watches: map[int]*watch{}}, nil
}

// Watch calls onExit (from the Run goroutine, once) when the process pid
// with creation token tok exits. It returns proc.ErrGone or
// proc.ErrTokenMismatch when that process is already gone; the returned
// cancel stops the watch without calling onExit.
func (w *Watcher) Watch(pid int, tok proc.Token, onExit func()) (cancel func(), err error) {
	return w.add(&watch{pid: pid, tok: tok, onExit: onExit})
}

// WatchStatus is Watch for a process that is not our child but whose exit
// status matters (a server exec'd in its shim's place, one re-adopted
// after a restart): onStatus gets the wait status, read from the zombie
// or from the pidfd once its parent reaped it (proc.ExitStatus); known is
// false where neither could be had. It runs on a goroutine of its own, as
// that read may wait a moment for the reaper.
func (w *Watcher) WatchStatus(pid int, tok proc.Token, onStatus func(ws syscall.WaitStatus, known bool)) (cancel func(), err error) {
	return w.add(&watch{pid: pid, tok: tok, onStatus: onStatus})
}

func (w *Watcher) add(wt *watch) (cancel func(), err error) {
	pid := wt.pid
	h, err := proc.OpenHandle(pid, wt.tok)
	if err != nil {
		return nil, err
	}
	fd := h.Fd() // the watch owns it from here and closes it by number
	wt.fd = fd
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		unix.Close(fd)
		return nil, errors.New("host watcher is closed")
	}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("epoll_ctl pidfd of %d: %w", pid, err)
	}
	w.watches[fd] = wt
	return func() { w.remove(wt) }, nil
}

func (w *Watcher) remove(wt *watch) bool {
	if !w.detach(wt) {
		return false
	}
	unix.Close(wt.fd)
	return true
}

// detach takes wt out of the set without closing its pidfd.
func (w *Watcher) detach(wt *watch) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur, ok := w.watches[wt.fd]; !ok || cur != wt {
		return false
	}
	delete(w.watches, wt.fd)
	// Fails only for an fd the kernel dropped from the set already (closed
	// by its watcher): either way it is out.
	_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, wt.fd, nil)
	return true
}

// Len returns the number of active watches.
func (w *Watcher) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watches)
}

// Run dispatches exits until ctx is done.
func (w *Watcher) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		one := [8]byte{1}
		_, _ = unix.Write(w.evfd, one[:]) // an eventfd write of 1 fails only past 2^64-2 pending
	})
	defer stop()
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(w.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == w.evfd {
				var buf [8]byte
				_, _ = unix.Read(w.evfd, buf[:]) // drain, or the next Run would spin; EAGAIN is drained
				if ctx.Err() != nil {
					return nil
				}
				continue
			}
			w.mu.Lock()
			wt, ok := w.watches[fd]
			w.mu.Unlock()
			// Events are keyed by fd number: a cancelled watch's number may
			// already belong to a new watch, so confirm this pidfd is the
			// one that became readable before firing.
			if !ok || !exited(wt.fd) {
				continue
			}
			if wt.onStatus != nil {
				if w.detach(wt) {
					w.log.Debug("watched process exited", "pid", wt.pid)
					go func() {
						ws, known := proc.ExitStatus(wt.fd, wt.pid, wt.tok)
						unix.Close(wt.fd)
						wt.onStatus(ws, known)
					}()
				}
				continue
			}
			if w.remove(wt) {
				w.log.Debug("watched process exited", "pid", wt.pid)
				wt.onExit()
			}
		}
	}
}

// Close releases every watch and the epoll set. Call after Run returned.
func (w *Watcher) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	for fd := range w.watches {
		unix.Close(fd)
	}
	w.watches = nil
	unix.Close(w.evfd)
	return unix.Close(w.epfd)
}

// exited reports whether a pidfd is readable now (its process has exited).
func exited(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}
