//go:build unix

package proc

import (
	"fmt"
	"os"
	"strconv"

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
