package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-86a41135/supervisor/api"
)

func readOr(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRotateLogCopyTruncate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "srv-80.log")
	// The server's end: O_APPEND, kept open across every rotation.
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const max = 100
	if rotated, err := rotateLog(filepath.Join(dir, "missing.log"), max, 3); rotated || err != nil {
		t.Fatalf("a missing log: rotated %v, err %v", rotated, err)
	}
	w.WriteString(strings.Repeat("a", max))
	if rotated, err := rotateLog(path, max, 3); rotated || err != nil {
		t.Fatalf("a log at the size: rotated %v, err %v; want it left alone", rotated, err)
	}
	for i, c := range []string{"b", "c", "d", "e"} {
		w.WriteString(c + strings.Repeat(c, max))
		if rotated, err := rotateLog(path, max, 3); !rotated || err != nil {
			t.Fatalf("rotation %d: rotated %v, err %v", i, rotated, err)
		}
		if got := readOr(t, path); got != "" {
			t.Fatalf("rotation %d: the log holds %d bytes, want it truncated", i, len(got))
		}
	}
	// The writer goes on at the start of the truncated file, no hole.
	w.WriteString("after\n")
	if got := readOr(t, path); got != "after\n" {
		t.Fatalf("after the rotations the log is %q", got)
	}
	want := map[int]string{1: "e", 2: "d", 3: "c", 4: "<none>"}
	for i, c := range want {
		got := readOr(t, backupPath(path, i))
		if c != "<none>" && !strings.HasSuffix(got, c+strings.Repeat(c, max)) {
			t.Errorf("backup %d is %.20q..., want it to end with %d %q", i, got, max+1, c)
		}
		if c == "<none>" && got != c {
			t.Errorf("backup %d exists (%d bytes), want 3 backups only", i, len(got))
		}
	}
	if _, err := os.Stat(path + ".rotating"); !os.IsNotExist(err) {
		t.Errorf("the staging file is left: %v", err)
	}
}

func TestRotateLogCutsABurst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "srv-80.log")
	var b strings.Builder
	for i := 0; b.Len() < 1000; i++ {
		fmt.Fprintf(&b, "%03d\n", i)
	}
	os.WriteFile(path+".1", []byte("old"), 0o600)
	os.WriteFile(path, []byte(b.String()), 0o600)
	if rotated, err := rotateLog(path, 100, 3); !rotated || err != nil {
		t.Fatalf("rotated %v, err %v", rotated, err)
	}
	all := b.String()
	// The newest 300 bytes, in 100-byte backups; the rest and "old" dropped.
	for i := 1; i <= 3; i++ {
		want := all[len(all)-100*i : len(all)-100*(i-1)]
		if got := readOr(t, backupPath(path, i)); got != want {
			t.Errorf("backup %d is %q, want %q", i, got, want)
		}
	}
	if got := readOr(t, backupPath(path, 4)); got != "<none>" {
		t.Errorf("a fourth backup: %q", got)
	}
	if got := readOr(t, path); got != "" {
		t.Errorf("log not truncated: %d bytes", len(got))
	}
}

func TestRotateLogWithoutBackups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "srv-80.log")
	os.WriteFile(path, []byte(strings.Repeat("x", 200)), 0o600)
	if rotated, err := rotateLog(path, 100, 0); !rotated || err != nil {
		t.Fatalf("rotated %v, err %v", rotated, err)
	}
	if got := readOr(t, path); got != "" {
		t.Errorf("log not truncated: %d bytes", len(got))
	}
	if got := readOr(t, backupPath(path, 1)); got != "<none>" {
		t.Errorf("a backup with 0 kept: %q", got)
	}
}

func TestLogPathsByNameSkipsBackupsAndLongerNames(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "logs"), 0o700)
	for _, n := range []string{"a-80.log", "a-80.log.1", "a-80.log.rotating", "a-b-81.log", "a-1-82.log", "ab-83.log"} {
		os.WriteFile(filepath.Join(dir, "logs", n), nil, 0o600)
	}
	got := LogPathsByName(api.Paths{StateDir: dir}, "a")
	if len(got) != 1 || filepath.Base(got[0]) != "a-80.log" {
		t.Fatalf("got %v, want only a-80.log", got)
	}
}
