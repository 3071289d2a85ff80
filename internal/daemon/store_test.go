package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestMoveAsideKeepsEarlierFiles: a second damaged registry within the same
// second gets a name of its own; the first one kept is never replaced.
func TestMoveAsideKeepsEarlierFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "registry.db")
	now := time.Date(2026, 11, 24, 20, 1, 17, 0, time.UTC)
	var got []string
	for _, content := range []string{"first", "second", "third"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		aside, err := moveAside(path, now)
		if err != nil {
			t.Fatalf("moveAside: %v", err)
		}
		got = append(got, aside)
	}
	base := path + ".corrupt-20261124T200117Z"
	for i, want := range []struct{ name, content string }{{base, "first"}, {base + "-2", "second"}, {base + "-3", "third"}} {
		if got[i] != want.name {
			t.Errorf("move %d went to %s, want %s", i+1, got[i], want.name)
		}
		if b, err := os.ReadFile(want.name); err != nil || string(b) != want.content {
			t.Errorf("%s holds %q (%v), want %q", want.name, b, err, want.content)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s still there after moving it aside: %v", path, err)
	}
}
