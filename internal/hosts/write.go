package hosts

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/seed-86a41135/supervisor/internal/atomicfile"
)

// write replaces the file at real (name is how the user knows it) with
// out, an edit of src. Hosts rewrite their files while they run (Claude
// Code rewrites ~/.claude.json all the time), so the file is read again
// right before writing and, if it changed, redo makes the edit again on the
// fresh bytes: their keys survive. The result must parse (check) or nothing
// is written. The original goes to a backup beside the file the first
// time; the write itself is a temp file in the same directory, fsync,
// rename and fsync of the directory, keeping mode and owner.
func (o *Options) write(name, real string, src, out []byte, redo func([]byte) ([]byte, error), check func([]byte) error) (written bool, err error) {
	fi, err := os.Stat(real)
	if err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	// Explicit: a rename replaces a file whatever its mode, and root may
	// write anything; a file made read-only means "leave me alone".
	if fi.Mode().Perm()&0o222 == 0 {
		return false, fmt.Errorf("%s: read-only (mode %04o), left untouched: make it writable (chmod u+w) and rerun", name, fi.Mode().Perm())
	}
	if o.beforeWrite != nil {
		o.beforeWrite(real)
	}
	// A host rewriting its file (Claude Code rewrites ~/.claude.json all the
	// time) while we write: compare again right before the rename, and redo
	// the edit on what it wrote, a few times.
	for attempt := 0; ; attempt++ {
		fresh, err := os.ReadFile(real)
		if err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
		if !bytes.Equal(fresh, src) {
			if out, err = redo(fresh); err != nil {
				return false, fileError(name, err)
			}
			src = fresh
			if bytes.Equal(out, src) {
				return false, nil // the fresh file has the edit already
			}
		}
		if err := check(out); err != nil {
			return false, fmt.Errorf("%s: the edited file does not parse, so it was not written (please report this): %w", name, err)
		}
		if err := backup(real, src, fi); err != nil {
			return false, fmt.Errorf("%s: back up before writing: %w", name, err)
		}
		based := src
		err = atomicfile.WriteIf(real, out, fi, func() error {
			if o.beforeRename != nil {
				o.beforeRename(real)
			}
			if now, err := os.ReadFile(real); err != nil || !bytes.Equal(now, based) {
				return atomicfile.ErrChangedMeanwhile
			}
			return nil
		})
		if errors.Is(err, atomicfile.ErrChangedMeanwhile) && attempt < 5 {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
		return true, nil
	}
}

// backup keeps src, the file's content before our first change, beside it.
// An existing backup is the older original: never overwritten.
func backup(real string, src []byte, fi fs.FileInfo) error {
	b := real + BackupSuffix
	if _, err := os.Lstat(b); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return atomicfile.Write(b, src, fi)
}

func readBackup(path string) ([]byte, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(real + BackupSuffix)
}

// dropBackup removes the backup once the file is the original again.
func dropBackup(path string) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return
	}
	cur, err := os.ReadFile(real)
	if err != nil {
		return
	}
	if b, err := os.ReadFile(real + BackupSuffix); err == nil && bytes.Equal(b, cur) {
		os.Remove(real + BackupSuffix)
	}
}
