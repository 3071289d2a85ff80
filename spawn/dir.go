package spawn

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// DirError is why a working directory cannot be used: it is missing, not a
// directory, or not searchable. A chdir failure inside fork/exec surfaces
// as a bare errno that execve could have returned too (ENOENT reads as a
// missing #! interpreter), so the directory is checked by name instead.
type DirError struct {
	Dir string
	Why string // what is wrong, e.g. "does not exist"
	Fix string // what to do
	Err error
}

func (e *DirError) Error() string {
	s := fmt.Sprintf("working directory %q %s", e.Dir, e.Why)
	// ENOENT and ENOTDIR would only repeat Why.
	if e.Err != nil && !errors.Is(e.Err, fs.ErrNotExist) && !errors.Is(e.Err, syscall.ENOTDIR) {
		s += ": " + e.Err.Error()
	}
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

func (e *DirError) Unwrap() error { return e.Err }

// CheckDir reports whether dir can be a child's working directory: it
// exists, is a directory (after symlinks) and this process may search it.
// An empty dir means "inherit" and is always fine.
func CheckDir(dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &DirError{Dir: dir, Why: "does not exist", Err: unwrapPath(err),
			Fix: "create it, or start from (or pass --cwd) a directory that exists"}
	case errors.Is(err, syscall.ENOTDIR):
		return &DirError{Dir: dir, Why: "is not a directory (a part of its path is a file)", Err: unwrapPath(err),
			Fix: "use a directory path"}
	case errors.Is(err, fs.ErrPermission):
		return &DirError{Dir: dir, Why: "cannot be reached", Err: unwrapPath(err),
			Fix: "give yourself search (x) permission on its parent directories, or use another directory"}
	case err != nil:
		return &DirError{Dir: dir, Why: "cannot be checked", Err: unwrapPath(err)}
	case !st.IsDir():
		return &DirError{Dir: dir, Why: fmt.Sprintf("is a file (mode %s), not a directory", st.Mode()),
			Fix: "use a directory path"}
	}
	if err := searchable(dir); err != nil {
		return &DirError{Dir: dir, Why: fmt.Sprintf("is not searchable (mode %s)", st.Mode()), Err: err,
			Fix: fmt.Sprintf("chmod u+x %s, or use another directory", dir)}
	}
	return nil
}

// unwrapPath drops the *PathError around err: DirError already names the
// path, and "stat /x: no such file" would name it twice.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
