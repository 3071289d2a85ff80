package api

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// maxSunPath is the usable length of sockaddr_un.sun_path (108 with its NUL).
const maxSunPath = 107

// recvFlags makes received fds close-on-exec atomically (design §5).
const recvFlags = unix.MSG_CMSG_CLOEXEC

// cloexecAll has nothing to do: MSG_CMSG_CLOEXEC did it.
func cloexecAll([]int) {}

// recvLock and recvUnlock have nothing to guard: MSG_CMSG_CLOEXEC marks
// received fds atomically.
func recvLock()   {}
func recvUnlock() {}

// PeerCred returns the pid and uid of the process at the other end, as the
// kernel recorded them at connect time (SO_PEERCRED).
func (c *Conn) PeerCred() (pid, uid int, err error) {
	var cred *unix.Ucred
	var cerr error
	if err := c.rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	if cerr != nil {
		return 0, 0, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	return int(cred.Pid), int(cred.Uid), nil
}
