package proc

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Handle is a kqueue holding one EVFILT_PROC NOTE_EXIT watch: the watch
// binds the process that held the PID when it was registered, whatever
// later owns the PID, and the kqueue fd polls readable once that process
// has exited (an event is pending; nothing ever retrieves it, so it stays
// readable).
//
// Unlike a Linux pidfd it cannot carry a signal: Signal checks the watch,
// then signals by PID (see Signal for the window this leaves).
type Handle struct {
	kq  int
	pid int
}

// exitedIdent is the EVFILT_USER event a handle is born with, already
// triggered, when the exit of its process cannot be watched any more (a
// zombie, or a process past the point where NOTE_EXIT is posted): its fd
// then polls readable at once, as a pidfd of a zombie does.
const exitedIdent = 1

// OpenHandle registers a NOTE_EXIT watch for pid and checks, after
// registering, that the process it bound still carries tok: the watch binds
// to whoever owns the PID at registration time, so the check must come
// second. A zombie (or exiting process) carrying tok gives a handle that
// reports exited at once, like a pidfd of a zombie on Linux. The caller
// closes it.
func OpenHandle(pid int, tok Token) (*Handle, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	kq, err := unix.Kqueue()
	if err != nil {
		return nil, fmt.Errorf("kqueue for pid %d: %w", pid, err)
	}
	unix.CloseOnExec(kq)
	h := &Handle{kq: kq, pid: pid}
	// XNU refuses the watch with ESRCH for a PID nobody holds, and also
	// for a zombie or a process deep in exit (proc_find skips both): only
	// Stat can tell which.
	watchErr := h.kevent(unix.Kevent_t{
		Ident:  uint64(pid),
		Filter: unix.EVFILT_PROC,
		Flags:  unix.EV_ADD,
		Fflags: unix.NOTE_EXIT,
	})
	if watchErr != nil && !errors.Is(watchErr, unix.ESRCH) {
		h.Close()
		return nil, fmt.Errorf("kevent EVFILT_PROC for pid %d: %w", pid, watchErr)
	}
	info, err := Stat(pid)
	switch {
	case err != nil:
	case !tok.Matches(info.Token):
		err = fmt.Errorf("pid %d: %w", pid, ErrTokenMismatch)
	case watchErr != nil && info.State != 'Z' && info.State != 'X':
		// proc_find also skips a process still being forked: it cannot
		// be watched yet, and it has not exited either.
		err = fmt.Errorf("kevent EVFILT_PROC for pid %d, which is not exiting: %w", pid, watchErr)
	}
	if err != nil {
		h.Close()
		return nil, err
	}
	// P_WEXIT is set before NOTE_EXIT is posted: a process seen exiting
	// after the registration may have posted it before, and the watch
	// would never fire. Mark such a handle exited now (if NOTE_EXIT fires
	// too, the handle is just readable twice over).
	if watchErr != nil || info.State == 'Z' || info.State == 'X' {
		if err := h.kevent(unix.Kevent_t{
			Ident:  exitedIdent,
			Filter: unix.EVFILT_USER,
			Flags:  unix.EV_ADD,
			Fflags: unix.NOTE_TRIGGER,
		}); err != nil {
			h.Close()
			return nil, fmt.Errorf("kevent EVFILT_USER for exited pid %d: %w", pid, err)
		}
	}
	return h, nil
}

// kevent applies one change to the handle's kqueue, without waiting.
func (h *Handle) kevent(ev unix.Kevent_t) error {
	for {
		_, err := unix.Kevent(h.kq, []unix.Kevent_t{ev}, nil, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// PID is the process's PID.
func (h *Handle) PID() int { return h.pid }

// Fd is the kqueue fd, for poll(2): readable once the process has exited.
func (h *Handle) Fd() int { return h.kq }

// Signal sends sig to the process unless its watch says it has exited; a
// process already gone gives ErrGone. Signal 0 checks liveness.
//
// macOS has no way to signal through a handle, so a window remains
// between the check and kill(2): the process would have to exit, be
// reaped, and its PID be given to a new process in those few microseconds
// for the signal to reach a stranger. XNU hands out PIDs in increasing
// order up to 99999 before wrapping, which makes that reuse practically
// impossible, but it is not excluded the way pidfd_send_signal excludes it.
func (h *Handle) Signal(sig syscall.Signal) error {
	if h.exited() {
		return fmt.Errorf("pid %d: %w", h.pid, ErrGone)
	}
	if err := unix.Kill(h.pid, sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pid %d: %w", h.pid, ErrGone)
		}
		return fmt.Errorf("signal %s to pid %d: %w", SignalName(sig), h.pid, err)
	}
	return nil
}

// exited reports, without blocking, whether an exit is pending on the
// kqueue. It polls rather than calls kevent so that the event stays
// pending and the fd stays readable for Wait and for callers polling Fd.
func (h *Handle) exited() bool { return waitReadable(h.kq, 0) }

// Wait waits until the process exits, for at most limit (forever when
// limit < 0). It reports whether it exited.
func (h *Handle) Wait(limit time.Duration) bool { return waitReadable(h.kq, limit) }

// Close releases the kqueue.
func (h *Handle) Close() error { return unix.Close(h.kq) }

// HandlesSupported reports true: kqueue EVFILT_PROC exists on every macOS.
// The handle binds one process for waiting, but signals still go by PID
// (see Handle.Signal).
func HandlesSupported() bool { return true }
