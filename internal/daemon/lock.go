package daemon

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/seed-86a41135/supervisor/internal/lockfile"
)

// AlreadyRunningError says another daemon holds the singleton lock.
type AlreadyRunningError struct {
	PID  int
	Lock string
}

func (e *AlreadyRunningError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("daemon already running (pid %d holds %s)", e.PID, e.Lock)
	}
	return fmt.Sprintf("daemon already running (%s is locked)", e.Lock)
}

// lockSingleton takes an exclusive flock on path and writes our pid into it.
// The kernel drops the lock when we die, so it can never go stale.
func lockSingleton(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := lockfile.TryLock(f); err != nil {
		f.Close()
		if errors.Is(err, lockfile.ErrHeld) {
			return nil, &AlreadyRunningError{PID: lockfile.ReadPID(path), Lock: path}
		}
		return nil, err
	}
	if err := f.Truncate(0); err == nil {
		// Best effort: doctor and a second daemon's error name the holder
		// by it, and without it only say the lock is held; the lock, not
		// its text, keeps a second daemon out.
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
