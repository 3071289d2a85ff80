// Package atomicfile owns replacing a file so that readers see the old
// content or the new, never a part: a temp file in the same directory,
// fsync, rename, fsync of the directory, keeping the mode and owner of
// the file it replaces.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes data to path through a temp file in the same
// directory and a rename, with like's mode and owner (like may be nil: a
// new private file).
func Write(path string, data []byte, like fs.FileInfo) (err error) {
	return write(path, data, like, 0o600, nil)
}

// WriteMode is Write where a new file (like nil) gets newMode, set on the
// temp file before the rename: a file that must be readable by others
// (a service unit) is never seen private, nor left so by a failed chmod.
func WriteMode(path string, data []byte, like fs.FileInfo, newMode fs.FileMode) error {
	return write(path, data, like, newMode, nil)
}

// ErrChangedMeanwhile is for a WriteIf check to say the file changed
// since it was read: the caller redoes its edit on the new content.
var ErrChangedMeanwhile = errors.New("the file changed while it was being written")

// WriteIf is Write that calls still, when not nil, right before
// the rename: an error from it leaves the file alone.
func WriteIf(path string, data []byte, like fs.FileInfo, still func() error) (err error) {
	return write(path, data, like, 0o600, still)
}

func write(path string, data []byte, like fs.FileInfo, newMode fs.FileMode, still func() error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".supervisor-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	mode := newMode
	if like != nil {
		mode = like.Mode().Perm()
		if err = keepOwner(tmp, like); err != nil {
			return err
		}
	}
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if still != nil {
		if err = still(); err != nil {
			return err
		}
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		// The rename is durable once the directory is. Best effort: not
		// every platform or filesystem syncs a directory (Windows, some
		// network filesystems refuse), and the file's own bytes were
		// synced before the rename.
		_ = d.Sync()
		d.Close()
	}
	return nil
}
