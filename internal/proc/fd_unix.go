//go:build unix

package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// FdKind describes the file an fd refers to: "pipe", "socket", "tty",
// "file", "null" or "other", with its inode.
func FdKind(fd int) (string, uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", 0, fmt.Errorf("fstat fd %d: %w", fd, err)
	}
	return kindOf(&st), st.Ino, nil
}

// ownFds lists this process's fds above 2 from dir (/proc/self/fd,
// /dev/fd). The list includes the fd that read it, closed by now.
func ownFds(dir string) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			fds = append(fds, fd)
		}
	}
	return fds, nil
}

// markCloexec sets close-on-exec on those of fds that are open and lack
// it, and returns them.
func markCloexec(fds []int) []int {
	var marked []int
	for _, fd := range fds {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // not open (the listing's own fd), or ours
		}
		unix.CloseOnExec(fd)
		marked = append(marked, fd)
	}
	return marked
}

// waitReadable waits until fd (a pidfd, a kqueue) polls readable, for at
// most limit (forever when limit < 0; one look when 0), and reports
// whether it did. Polling consumes nothing: the fd stays readable.
func waitReadable(fd int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		ms := -1
		if limit >= 0 {
			ms = 0
			if left := time.Until(deadline); left > 0 {
				ms = int(left.Milliseconds()) + 1
			}
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false
		}
		if n > 0 {
			return true
		}
		if limit >= 0 && !time.Now().Before(deadline) {
			return false
		}
	}
}
