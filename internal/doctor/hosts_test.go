package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDoctorUnwrappedHost(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, ".cursor", "mcp.json")
	os.MkdirAll(filepath.Dir(cfg), 0o755)
	os.WriteFile(cfg, []byte(`{"mcpServers": {
		"fs": {"command": "npx", "args": ["-y", "fs"]},
		"done": {"command": "/usr/bin/supervisor", "args": ["run", "--name", "done", "--", "x"]},
		"web": {"url": "https://example.com/mcp"}}}`), 0o644)
	d := newDoctor(t)
	d.Getenv = func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	fs, err := d.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := kinds(fs)[KindUnwrappedHost]
	if len(got) != 1 || got[0].Path != cfg || !strings.HasSuffix(got[0].Evidence, "not through `supervisor run`: fs") ||
		!strings.HasPrefix(got[0].Fix, "`supervisor install cursor`") {
		t.Fatalf("findings %+v, want one unwrapped-host for %s naming fs", fs, cfg)
	}
}
