// Package lockfile owns advisory whole-file locks that the operating system
// drops when their holder dies: flock(2) on unix, LockFileEx on Windows. The
// daemon's singleton, the start lock and the per-port mutex are built on
// it, so none of them can go stale. It opens and removes no file itself.
package lockfile

import "errors"

// ErrHeld means another open file holds the lock.
var ErrHeld = errors.New("held by another process")
