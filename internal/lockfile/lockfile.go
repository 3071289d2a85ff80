// Package lockfile owns advisory whole-file locks that the operating system
// drops when their holder dies: flock(2) on unix, LockFileEx on Windows. The
// daemon's singleton, the start lock and the per-port mutex are built on
// it, so none of them can go stale. It removes no file; Hold opens (and
// creates) the file it locks.
package lockfile

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrHeld means another open file holds the lock.
var ErrHeld = errors.New("held by another process")

// ReadPID is the PID written at the start of a lock or pid file (the
// daemon writes its own into the lock it holds), 0 when there is none.
func ReadPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	pid, _ := strconv.Atoi(f[0])
	return pid
}

// Hold takes an exclusive lock on the file at path (created if missing),
// waiting for it; unlock releases it.
func Hold(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := Lock(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = Unlock(f) // the close releases it anyway
		f.Close()
	}, nil
}

// Free says no process holds the lock at path now (it takes the lock and
// lets it go at once): a holder that was exiting has let it go. A file
// that cannot be opened is not known to be free.
func Free(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if TryLock(f) != nil {
		return false
	}
	_ = Unlock(f) // the close releases it anyway
	return true
}
