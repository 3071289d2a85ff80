package proc

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// How a process that is not our child ended.
//
// A process the daemon did not fork (a shim that exec'd its server in its
// own place, or one re-adopted after a restart) is reaped by its parent,
// not by us. While it is a zombie, /proc/PID/stat has its wait status;
// once reaped, kernels from 6.15 keep it on the pidfd (PIDFD_INFO_EXIT).
// Between the two there is a moment (the reaper has claimed the zombie,
// release_task has not yet stored the status) that a short retry covers.

// ExitInfoSupported reports whether this kernel keeps a reaped process's
// exit status on its pidfd (PIDFD_INFO_EXIT, Linux 6.15). Told by the
// kernel's version: the flag cannot be probed without a reaped process,
// and an older kernel silently ignores it.
func ExitInfoSupported() bool { return exitInfo() }

var exitInfo = sync.OnceValue(func() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	major, minor, ok := kernelVersion(unix.ByteSliceToString(u.Release[:]))
	if !ok || major < 6 || (major == 6 && minor < 15) {
		return false
	}
	return HandlesSupported()
})

// kernelVersion parses "6.18.44-fc-v782" as 6, 18.
func kernelVersion(release string) (major, minor int, ok bool) {
	f := strings.SplitN(release, ".", 3)
	if len(f) < 2 {
		return 0, 0, false
	}
	digits := func(s string) string { // "15-rc1" → "15"
		if i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
			return s[:i]
		}
		return s
	}
	major, err1 := strconv.Atoi(f[0])
	minor, err2 := strconv.Atoi(digits(f[1]))
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return major, minor, true
}

// ExitStatus returns the wait status of the process pidfd refers to (pid,
// carrying tok), once the pidfd has polled readable. ok is false when the
// status cannot be had: a kernel without PIDFD_INFO_EXIT whose process was
// reaped before we looked.
func ExitStatus(pidfd, pid int, tok Token) (ws syscall.WaitStatus, ok bool) {
	withInfo := ExitInfoSupported()
	for range 200 { // 200 × 0.5 ms: the gap between zombie and stored status
		if withInfo {
			if ws, ok := pidfdExit(pidfd); ok {
				return ws, true
			}
		}
		if ws, ok := ZombieStatus(pid, tok); ok {
			return ws, true
		}
		if !withInfo {
			return 0, false
		}
		time.Sleep(500 * time.Microsecond)
	}
	return 0, false
}

// pidfdExit asks the pidfd for the exit status (PIDFD_GET_INFO).
func pidfdExit(pidfd int) (syscall.WaitStatus, bool) {
	var info unix.PidfdInfo
	info.Mask = unix.PIDFD_INFO_EXIT
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(pidfd), uintptr(unix.PIDFD_GET_INFO), uintptr(unsafe.Pointer(&info)))
	if e != 0 || info.Mask&unix.PIDFD_INFO_EXIT == 0 {
		return 0, false
	}
	return syscall.WaitStatus(info.Exit_code), true
}

// OpenSelfHandle opens a pidfd for this process, to hand to the daemon
// before it execs its server in its own place.
func OpenSelfHandle() (int, error) {
	fd, err := unix.PidfdOpen(unix.Getpid(), 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd_open self: %w", err)
	}
	return fd, nil
}

// HandleFromFd takes over a pidfd received from another process after
// checking that it refers to pid, carrying tok, alive: a pidfd names a
// process, but a peer could send one for any process it can see. The
// token returned is the full one, pidfs inode included.
func HandleFromFd(fd, pid int, tok Token) (*Handle, Token, error) {
	var info unix.PidfdInfo
	info.Mask = unix.PIDFD_INFO_PID
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(unix.PIDFD_GET_INFO), uintptr(unsafe.Pointer(&info)))
	if e != 0 {
		return nil, Token{}, fmt.Errorf("fd %d is not a pidfd of a live process: %w", fd, e)
	}
	if int(info.Tgid) != pid {
		return nil, Token{}, fmt.Errorf("the pidfd handed over is of pid %d, not %d", info.Tgid, pid)
	}
	got, err := tokenOfPidfd(pid, fd)
	if err != nil {
		return nil, Token{}, err
	}
	if !tok.Matches(got) {
		return nil, Token{}, fmt.Errorf("pid %d: %w", pid, ErrTokenMismatch)
	}
	return &Handle{fd: fd, pid: pid}, got, nil
}
