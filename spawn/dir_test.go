//go:build linux

package spawn

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestStartBadDir: a working directory that is missing, a file, or not
// searchable is reported as such (code 125, a *DirError naming it), never
// as a bad #! interpreter or a command that is not executable.
func TestStartBadDir(t *testing.T) {
	r := newReaper(t)
	base := t.TempDir()
	file := filepath.Join(base, "file")
	writeFile(t, file, 0o644)
	noX := filepath.Join(base, "nox")
	if err := os.Mkdir(noX, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, want string
		needUser        bool
	}{
		{"missing", filepath.Join(base, "gone"), "does not exist", false},
		{"file", file, "is a file", false},
		{"under a file", filepath.Join(file, "sub"), "is not a directory", false},
		{"not searchable", noX, "is not searchable", true},
	}
	for _, tt := range tests {
		for _, argv0 := range []string{"/bin/true", "./relative"} {
			t.Run(tt.name+"/"+argv0, func(t *testing.T) {
				if tt.needUser && os.Geteuid() == 0 {
					t.Skip("root searches any directory (CAP_DAC_READ_SEARCH): a missing x bit cannot be seen as root")
				}
				files, _, _ := stdio(t)
				_, err := Start(r, Request{Argv: []string{argv0}, Dir: tt.dir, Stdio: files})
				var se *StartError
				var de *DirError
				if !errors.As(err, &se) || !errors.As(err, &de) {
					t.Fatalf("Start in %s: got %v, want a *StartError wrapping a *DirError", tt.dir, err)
				}
				if se.Code != 125 || de.Dir != tt.dir || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Start in %s: got code %d, %q; want code 125 and %q naming the directory", tt.dir, se.Code, err, tt.want)
				}
				assertClosed(t, files[:]...)
			})
		}
	}
}

// TestExecErrorDirVanished: a directory removed between CheckDir and the
// child's chdir fails fork/exec with ENOENT, the errno of a missing #!
// interpreter; the classification must look at the directory again.
func TestExecErrorDirVanished(t *testing.T) {
	dir := t.TempDir()
	gone := filepath.Join(dir, "gone")
	tests := []struct {
		name     string
		dir      string
		errno    syscall.Errno
		wantCode int
		wantDir  bool
	}{
		{"dir vanished, ENOENT", gone, syscall.ENOENT, 125, true},
		{"dir vanished, ENOTDIR", gone, syscall.ENOTDIR, 125, true},
		{"dir fine, ENOENT is the interpreter", dir, syscall.ENOENT, CodeNotExecutable, false},
		{"dir fine, EACCES is the command", dir, syscall.EACCES, CodeNotExecutable, false},
		{"no dir, ENOENT is the interpreter", "", syscall.ENOENT, CodeNotExecutable, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := execError("server", tt.dir, &os.SyscallError{Syscall: "fork/exec", Err: tt.errno})
			var se *StartError
			if !errors.As(err, &se) || se.Code != tt.wantCode {
				t.Fatalf("execError: got %v, want a *StartError with code %d", err, tt.wantCode)
			}
			var de *DirError
			if got := errors.As(err, &de); got != tt.wantDir {
				t.Errorf("execError: got %q (a *DirError: %v), want a *DirError: %v", err, got, tt.wantDir)
			}
		})
	}
}
