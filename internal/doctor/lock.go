package doctor

import (
	"fmt"
	"os"

	"github.com/seed-86a41135/supervisor/internal/lockfile"
)

// tryLock opens path afresh and tries to lock it without waiting;
// lockfile.ErrHeld means someone has it. Otherwise the caller gets the
// open, locked file and must close it (unlinking it first, while still
// holding it, if the file is to go: a waiter that opened it meanwhile then
// locks an unlinked inode instead of racing us for a path we are deleting).
// create creates a missing file; without it a missing file is an error that
// satisfies errors.Is(err, fs.ErrNotExist).
func tryLock(path string, create bool) (*os.File, error) {
	flags := os.O_RDONLY
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := lockfile.TryLock(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// unlinkHeld removes path while f, which must be the file at path, is held.
func unlinkHeld(f *os.File, path string) error {
	fst, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	pst, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if !os.SameFile(fst, pst) {
		return fmt.Errorf("%s was replaced while it was being checked", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
