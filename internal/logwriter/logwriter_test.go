package logwriter

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopyRotates(t *testing.T) {
	tests := []struct {
		name      string
		max       int64
		keep      int
		lines     int
		lineLen   int // including the newline
		wantFiles int
	}{
		{"under the cap", 1000, 2, 5, 10, 1},
		{"rotates and keeps", 100, 3, 100, 10, 4},
		{"keep none", 100, 0, 100, 10, 1},
		{"a line longer than the cap", 8, 1, 2, 20, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.log")
			var in bytes.Buffer
			for i := 0; i < tt.lines; i++ {
				l := fmt.Sprintf("%d ", i)
				in.WriteString(l + strings.Repeat("x", tt.lineLen-len(l)-1) + "\n")
			}
			all := in.String()
			var tee bytes.Buffer
			if err := Copy(&in, Options{Path: path, MaxBytes: tt.max, Keep: tt.keep, Tee: &tee}); err != nil {
				t.Fatal(err)
			}
			if tee.String() != all {
				t.Errorf("tee got %d bytes, want the %d read", tee.Len(), len(all))
			}
			var kept string
			files := 0
			for i := tt.keep; i >= 0; i-- {
				p := path
				if i > 0 {
					p = Backup(path, i)
				}
				b, err := os.ReadFile(p)
				if os.IsNotExist(err) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				files++
				if int64(len(b)) > tt.max {
					t.Errorf("%s holds %d bytes, over the cap %d", p, len(b), tt.max)
				}
				kept += string(b)
			}
			if files != tt.wantFiles {
				t.Errorf("%d files, want %d", files, tt.wantFiles)
			}
			if !strings.HasSuffix(all, kept) || kept == "" {
				t.Errorf("kept %q: want a non-empty tail of what was written, without gaps", kept)
			}
			if _, err := os.Stat(Backup(path, tt.keep+1)); !os.IsNotExist(err) {
				t.Errorf("backup %d exists (%v), want only %d kept", tt.keep+1, err, tt.keep)
			}
		})
	}
}
