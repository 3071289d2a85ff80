package daemon

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/seed-86a41135/supervisor/lockfile"
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
		// For a person reading the file: the lock, not its text, keeps a
		// second daemon out, and nothing reads the pid back.
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// withFileLock runs fn while holding an exclusive flock on path, waiting for
// it. Used so that many shims starting at once launch one daemon.
func withFileLock(path string, fn func() error) error {
	unlock, err := lockPath(path)
	if err != nil {
		return err
	}
	defer unlock()
	return fn()
}

// lockPath takes an exclusive lock on the file at path (created if
// missing), waiting for it; unlock releases it.
func lockPath(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := lockfile.Lock(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = lockfile.Unlock(f) // the close releases it anyway
		f.Close()
	}, nil
}
