package main

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

func closeFd(fd int) { unix.Close(fd) }

// pollReadable waits for fd to become readable (a pidfd: its process
// exited) for at most limit.
func pollReadable(fd int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}
