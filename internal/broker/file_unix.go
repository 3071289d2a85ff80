//go:build unix

package broker

import (
	"fmt"
	"os"
	"syscall"
)

// PollableFile wraps a descriptor received from elsewhere (over a unix
// socket with SCM_RIGHTS) for Attach: it is made non-blocking first, so
// the runtime poller owns it and Detach's Close interrupts a pending read
// or write. O_NONBLOCK belongs to the open file description: every other
// holder of it (the process that handed it over) sees it too.
func PollableFile(fd int, name string) (*os.File, error) {
	if err := syscall.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("broker: make %s (fd %d) non-blocking: %w", name, fd, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}
