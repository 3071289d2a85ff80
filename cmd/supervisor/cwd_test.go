//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadCwd (issue 13 item 8a): a working directory that is missing, a
// file, or not searchable is reported by name with what to do, for run
// (exit 125, as env -C does) and ensure, never as a "bad interpreter".
func TestBadCwd(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	noX := filepath.Join(base, "nox")
	if err := os.Mkdir(noX, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, want string
		needUser        bool
	}{
		{"missing", filepath.Join(base, "does", "not", "exist"), "does not exist; create it", false},
		{"file", file, "is a file (mode -rw-r--r--), not a directory; use a directory path", false},
		{"not searchable", noX, "is not searchable (mode drw-------): permission denied; chmod u+x " + noX, true},
	}
	for _, tt := range tests {
		for _, cmdName := range []string{"run", "ensure"} {
			t.Run(tt.name+"/"+cmdName, func(t *testing.T) {
				if tt.needUser && os.Geteuid() == 0 {
					t.Skip("root searches any directory (CAP_DAC_READ_SEARCH), so a missing x bit cannot be seen as root")
				}
				args := []string{"run", "--cwd", tt.dir, "--", "/bin/true"}
				if cmdName == "ensure" {
					args = []string{"ensure", "--port", "1", "--cwd", tt.dir, "--", "/bin/true"}
				}
				_, stderr, code := in.run(args...)
				want := `supervisor: working directory "` + tt.dir + `" ` + tt.want
				if code == 0 || !strings.Contains(stderr, want) || strings.Contains(stderr, "interpreter") {
					t.Errorf("supervisor %s: exit %d, stderr %q; want non-zero and %q", strings.Join(args, " "), code, stderr, want)
				}
				if cmdName == "run" && code != 125 {
					t.Errorf("run: exit %d, want 125 (a supervisor error, as env -C gives)", code)
				}
			})
		}
	}

	// A run from a directory removed under it: getwd fails.
	t.Run("current dir removed", func(t *testing.T) {
		gone := filepath.Join(base, "gone")
		if err := os.Mkdir(gone, 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := in.command()
		cmd.Path, cmd.Args = "/bin/sh", []string{"sh", "-c", `cd "$1" && rmdir "$1" && exec "$2" run -- /bin/true`, "sh", gone, bin}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		const want = "supervisor: the current directory cannot be found (was it removed?)"
		if err == nil || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "cd to a directory that exists") {
			t.Errorf("run in a removed directory: %v, stderr %q; want %q", err, stderr.String(), want)
		}
	})

	// The flag is used: a good --cwd is where the server runs.
	t.Run("good cwd", func(t *testing.T) {
		out, stderr, code := in.run("run", "--cwd", base, "--", "/bin/pwd")
		if code != 0 || strings.TrimSpace(out) != base {
			t.Errorf("run --cwd %s -- pwd: exit %d, out %q, stderr %q; want %s", base, code, out, stderr, base)
		}
	})
}
