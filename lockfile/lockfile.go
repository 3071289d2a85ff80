// Package lockfile owns advisory whole-file locks that the operating system
// drops when their holder dies: flock(2) on unix, LockFileEx on Windows. The
// daemon's singleton, the start lock and the per-port mutex are built on
// it, so none of them can go stale. It opens and removes no file itself.
package lockfile

import (
	"errors"
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
