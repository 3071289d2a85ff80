package proc

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/windows"
)

// Handle is a process HANDLE: it refers to one process object, and the
// object (and with it the PID) lives as long as the handle, so a recycled
// PID can never redirect it. It is signalled once the process exits.
type Handle struct {
	h   atomic.Uintptr // windows.Handle; 0 once closed
	pid int
}

// handleAccess is what a Handle asks for, most wanted first. SET_QUOTA and
// TERMINATE let Job.Assign put the process in a job; without SET_QUOTA it
// can still be terminated; a process of another user or a protected one may
// grant only waiting and querying, which is still enough to watch it.
var handleAccess = []uint32{
	windows.SYNCHRONIZE | windows.PROCESS_TERMINATE | windows.PROCESS_QUERY_LIMITED_INFORMATION | windows.PROCESS_SET_QUOTA,
	windows.SYNCHRONIZE | windows.PROCESS_TERMINATE | windows.PROCESS_QUERY_LIMITED_INFORMATION,
	windows.SYNCHRONIZE | windows.PROCESS_QUERY_LIMITED_INFORMATION,
}

// OpenHandle opens pid and checks, after opening, that the process it
// refers to carries tok: OpenProcess binds to whoever owns the PID at open
// time, so the check must come second (the handle then pins that process
// object). An exited process that some handle still keeps opens fine, as
// a zombie's pidfd does on Linux; its Wait returns at once. The caller
// closes it.
func OpenHandle(pid int, tok Token) (*Handle, error) {
	h, err := openProcess(pid, handleAccess...)
	if err != nil {
		return nil, err
	}
	got, err := tokenOfHandle(h)
	if err != nil {
		err = fmt.Errorf("pid %d: %w", pid, err)
	} else if !tok.Matches(got) {
		err = fmt.Errorf("pid %d: %w", pid, ErrTokenMismatch)
	}
	if err != nil {
		windows.CloseHandle(h)
		return nil, err
	}
	ph := &Handle{pid: pid}
	ph.h.Store(uintptr(h))
	return ph, nil
}

// PID is the process's PID.
func (h *Handle) PID() int { return h.pid }

// Sys is the process HANDLE, for callers that wait on many objects at once
// (WaitForMultipleObjects). It stays owned by h: do not close it, and do
// not use it after h.Close.
func (h *Handle) Sys() windows.Handle { return windows.Handle(h.h.Load()) }

// Signal delivers sig the Windows way, through the handle, so it can never
// reach a process that recycled the PID:
//
//   - SIGKILL: TerminateProcess with exit code 1.
//   - 0: a liveness check on the handle (it never terminates anything).
//   - SIGTERM, SIGINT, SIGHUP: a CTRL_BREAK_EVENT to the console process
//     group the process leads. That only reaches a process started with
//     CREATE_NEW_PROCESS_GROUP (the group's id is its PID) on the console
//     we are attached to. Signal refuses, with an error, when the process
//     does not lead its own group or leads ours: GenerateConsoleCtrlEvent
//     given a PID that leads no group can reach every process on the
//     console (this one included, which Go turns into os.Interrupt, fatal
//     where unhandled). A nil error means the event was sent, not
//     that the process heeded it; the cascade escalates to terminating the
//     job after its grace either way. (CTRL_C_EVENT cannot be sent to a
//     group, so SIGINT gets the break event too.)
//   - any other signal: an error wrapping errors.ErrUnsupported.
//
// A process already exited gives ErrGone.
func (h *Handle) Signal(sig syscall.Signal) error {
	ph := h.Sys()
	if ph == 0 {
		return fmt.Errorf("signal %s to pid %d: handle is closed", SignalName(sig), h.pid)
	}
	switch sig {
	case 0, syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP:
	default:
		return fmt.Errorf("signal %s to pid %d: %w", SignalName(sig), h.pid, errors.ErrUnsupported)
	}
	if gone, err := hasExited(ph); err == nil && gone {
		return fmt.Errorf("pid %d: %w", h.pid, ErrGone)
	}
	switch sig {
	case 0:
		return nil
	case syscall.SIGKILL:
		if err := windows.TerminateProcess(ph, 1); err != nil {
			// Terminating a process that has just exited is refused
			// with ERROR_ACCESS_DENIED: tell that apart from a real
			// refusal.
			if gone, gerr := hasExited(ph); gerr == nil && gone {
				return fmt.Errorf("pid %d: %w", h.pid, ErrGone)
			}
			return fmt.Errorf("TerminateProcess pid %d: %w", h.pid, err)
		}
		return nil
	}
	if err := checkOwnConsoleGroup(h.pid); err != nil {
		return fmt.Errorf("signal %s to pid %d: %w", SignalName(sig), h.pid, err)
	}
	if err := windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(h.pid)); err != nil {
		return fmt.Errorf("signal %s to pid %d: GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT): %w", SignalName(sig), h.pid, err)
	}
	return nil
}

// checkOwnConsoleGroup makes sure pid leads its own console process group
// and that the group is not ours, so a CTRL_BREAK_EVENT to group pid
// reaches that group alone. The group id is read from the process's
// parameters block; the PID cannot have been recycled meanwhile since the
// caller's Handle pins the process object.
func checkOwnConsoleGroup(pid int) error {
	group, err := consoleGroup(pid)
	if err != nil {
		return fmt.Errorf("read console process group: %w", err)
	}
	if group != uint32(pid) {
		return fmt.Errorf("not the leader of a console process group (started without CREATE_NEW_PROCESS_GROUP; its group is %d)", group)
	}
	if own, ok := ownConsoleGroup(); ok && own == group {
		return fmt.Errorf("its console process group %d is ours", group)
	}
	return nil
}

// Wait waits until the process exits, for at most limit (forever when
// limit < 0). It reports whether it exited.
func (h *Handle) Wait(limit time.Duration) bool {
	ph := h.Sys()
	if ph == 0 {
		return false
	}
	ms := uint32(windows.INFINITE)
	if limit >= 0 {
		// Round up, so a short limit still waits rather than polls, and
		// stay below INFINITE for absurdly long ones.
		d := limit / time.Millisecond
		if limit%time.Millisecond != 0 {
			d++
		}
		ms = uint32(min(d, windows.INFINITE-1))
	}
	ev, err := windows.WaitForSingleObject(ph, ms)
	return err == nil && ev == windows.WAIT_OBJECT_0
}

// Close releases the handle. It is safe to call twice (a Windows handle
// value is reused at once, so a second CloseHandle could close someone
// else's), but not while a Wait or Signal on h is still running.
func (h *Handle) Close() error {
	ph := windows.Handle(h.h.Swap(0))
	if ph == 0 {
		return nil
	}
	if err := windows.CloseHandle(ph); err != nil {
		return fmt.Errorf("close handle of pid %d: %w", h.pid, err)
	}
	return nil
}

// HandlesSupported is true: every Windows process can be opened by handle.
func HandlesSupported() bool { return true }
