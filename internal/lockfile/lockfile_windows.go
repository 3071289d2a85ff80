package lockfile

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// Windows locks are mandatory byte ranges: locking the file's content would
// make the PID written in the daemon's lock file unreadable to the CLI. The
// lock therefore covers one byte far past any content.
const (
	lockOffsetHigh = 0x7fffffff
	lockLen        = 1
)

// TryLock takes an exclusive lock on f without waiting; ErrHeld (wrapped)
// when someone else has it.
func TryLock(f *os.File) error {
	err := lock(f, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return fmt.Errorf("lock %s: %w", f.Name(), ErrHeld)
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return nil
}

// Lock takes an exclusive lock on f, waiting for it.
func Lock(f *os.File) error {
	if err := lock(f, windows.LOCKFILE_EXCLUSIVE_LOCK); err != nil {
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return nil
}

// Unlock releases the lock (closing f does too).
func Unlock(f *os.File) error {
	ol := &windows.Overlapped{OffsetHigh: lockOffsetHigh}
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, lockLen, 0, ol)
}

func lock(f *os.File, flags uint32) error {
	ol := &windows.Overlapped{OffsetHigh: lockOffsetHigh}
	return windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, lockLen, 0, ol)
}
