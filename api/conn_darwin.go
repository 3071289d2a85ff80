package api

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxSunPath is the usable length of sockaddr_un.sun_path (104 with its NUL
// on macOS).
const maxSunPath = 103

// recvFlags: macOS has no MSG_CMSG_CLOEXEC.
const recvFlags = 0

// cloexecAll marks received fds close-on-exec right after recvmsg, under
// recvLock, so no fork can come in between.
func cloexecAll(fds []int) {
	for _, fd := range fds {
		unix.CloseOnExec(fd)
	}
}

// recvLock holds off forks (syscall.ForkLock, as the net package does
// around accept on macOS) from recvmsg until the received fds are marked
// close-on-exec.
func recvLock()   { syscall.ForkLock.RLock() }
func recvUnlock() { syscall.ForkLock.RUnlock() }

// PeerCred returns the pid and uid of the process at the other end, as the
// kernel recorded them at connect time (LOCAL_PEERPID, LOCAL_PEERCRED).
func (c *Conn) PeerCred() (pid, uid int, err error) {
	var cred *unix.Xucred
	var cerr, perr error
	if err := c.rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		pid, perr = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	}); err != nil {
		return 0, 0, fmt.Errorf("LOCAL_PEERCRED: %w", err)
	}
	if cerr != nil {
		return 0, 0, fmt.Errorf("LOCAL_PEERCRED: %w", cerr)
	}
	if perr != nil {
		return 0, 0, fmt.Errorf("LOCAL_PEERPID: %w", perr)
	}
	return pid, int(cred.Uid), nil
}
