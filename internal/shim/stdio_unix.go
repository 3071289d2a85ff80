//go:build unix

package shim

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/shutdown"
)

// stdioFds are what the shim hands the daemon with a run request: its own
// fds 0-2, passed with SCM_RIGHTS.
func stdioFds() []int { return []int{0, 1, 2} }

// detachStdio points fds 0 and 1 at /dev/null (closing them outright would
// let the next open reuse the numbers).
func detachStdio() error {
	null, err := unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer unix.Close(null)
	for _, fd := range []int{0, 1} {
		if err := dupOnto(null, fd); err != nil {
			return fmt.Errorf("detach fd %d: %w", fd, err)
		}
	}
	return nil
}

// localStdio duplicates fds 0-2 for a server the shim starts itself, and
// describes the host channels among them for the cascade.
func localStdio() ([3]*os.File, []shutdown.Channel, error) {
	var stdio [3]*os.File
	var channels []shutdown.Channel
	for fd := 0; fd < 3; fd++ {
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			for _, f := range stdio[:fd] {
				f.Close()
			}
			return stdio, nil, fmt.Errorf("duplicate fd %d: %w", fd, err)
		}
		stdio[fd] = os.NewFile(uintptr(dup), fmt.Sprintf("stdio%d", fd))
		if kind, ino, err := proc.FdKind(fd); err == nil && (kind == "pipe" || kind == "socket") {
			channels = append(channels, shutdown.Channel{Fd: fd, Kind: kind, Inode: ino})
		}
	}
	return stdio, channels, nil
}
