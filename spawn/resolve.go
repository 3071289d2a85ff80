package spawn

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Exit codes a shell (and `supervisor run`) uses when a command cannot run.
const (
	CodeNotExecutable = 126
	CodeNotFound      = 127
)

// StartError is why a command could not be started. Code is the exit status
// a shell would give: 127 not found, 126 not executable, 125 otherwise.
type StartError struct {
	Name string
	Code int
	Err  error
}

func (e *StartError) Error() string {
	switch e.Code {
	case CodeNotFound:
		return fmt.Sprintf("%q: command not found: %v", e.Name, e.Err)
	case CodeNotExecutable:
		return fmt.Sprintf("%q: not executable: %v", e.Name, e.Err)
	}
	return fmt.Sprintf("start %q: %v", e.Name, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// Resolve finds name the way a direct spawn by the caller would: a name with
// a slash is taken relative to dir, any other is searched in pathEnv (the
// caller's PATH, an empty entry meaning dir).
func Resolve(name, pathEnv, dir string) (string, error) {
	if name == "" {
		return "", &StartError{Name: name, Code: CodeNotFound, Err: errors.New("empty command")}
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", classify(name, err)
		}
		return p, nil
	}
	var denied error
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && denied == nil {
			denied = err
		}
	}
	if denied != nil {
		return "", &StartError{Name: name, Code: CodeNotExecutable, Err: denied}
	}
	return "", &StartError{Name: name, Code: CodeNotFound, Err: errors.New("not found in PATH")}
}

var errNotExec = errors.New("permission denied (no execute bit)")

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory", p)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: %w", p, errNotExec)
	}
	return nil
}

func classify(name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &StartError{Name: name, Code: CodeNotFound, Err: err}
	}
	return &StartError{Name: name, Code: CodeNotExecutable, Err: err}
}
