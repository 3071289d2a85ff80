//go:build unix

package api

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCheckSafePath: the StrictModes rule for the socket and state
// directories, each directory up to / judged after symlinks.
func TestCheckSafePath(t *testing.T) {
	base := t.TempDir()
	mk := func(rel string, mode os.FileMode) string {
		d := filepath.Join(base, rel)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	link := func(name, target string) string {
		l := filepath.Join(base, name)
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dir     string
		wantErr error // nil: safe
	}{
		{"own 0700", mk("a", 0o700), nil},
		{"own 0755", mk("b", 0o755), nil},
		{"own sticky 1777", mk("c", os.ModeSticky|0o777), nil},
		{"own 0777", mk("d", 0o777), errUnsafeDir},
		{"own 0775", mk("e", 0o775), errUnsafeDir},
		{"own 0702", mk("f", 0o702), errUnsafeDir},
		{"under a 0777 dir", mk("g/x", 0o700), errUnsafeDir},
		{"under a sticky 1777 dir", mk("h/x", 0o700), nil},
		{"symlink to a private dir", link("l1", mk("i", 0o700)), nil},
		{"symlink into a 0777 dir", link("l2", mk("j/x", 0o700)), errUnsafeDir},
		{"missing", filepath.Join(base, "nope"), fs.ErrNotExist},
		{"a file", file, syscall.ENOTDIR},
	}
	// The parents' modes are set once their children exist.
	mk("g", 0o777)
	mk("h", os.ModeSticky|0o777)
	mk("j", 0o777)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSafePath(tt.dir)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("checkSafePath(%s): got %v, want %v", tt.dir, err, tt.wantErr)
			}
		})
	}

	t.Run("another uid", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("needs root to chown a directory to another uid (65534)")
		}
		d := mk("k", 0o700)
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{d, mk("k/sub", 0o700)} {
			if err := checkSafePath(dir); !errors.Is(err, errUnsafeDir) {
				t.Errorf("checkSafePath(%s) under uid 65534: got %v, want %v", dir, err, errUnsafeDir)
			}
		}
		if err := EnsurePrivateDir(d); !errors.Is(err, errUnsafeDir) {
			t.Errorf("EnsurePrivateDir(%s) of uid 65534: got %v, want %v", d, err, errUnsafeDir)
		}
	})
}
