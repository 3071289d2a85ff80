package hosts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkStatusManyProjects: a ~/.claude.json with 400 projects, each
// with one server, as long-time Claude Code users have.
func BenchmarkStatusManyProjects(b *testing.B) {
	home := b.TempDir()
	var sb strings.Builder
	sb.WriteString(`{"numStartups": 3, "projects": {`)
	for i := range 400 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"/home/u/p%d": {"allowedTools": [], "history": [%q], "mcpServers": {"fs": {"command": "npx", "args": ["-y", "srv"]}}}`,
			i, strings.Repeat("x", 800))
	}
	sb.WriteString(`}}`)
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	hs, err := Lookup([]string{"claude-code"})
	if err != nil {
		b.Fatal(err)
	}
	env := Env{GOOS: "linux", Home: home, Getenv: func(string) string { return "" }}
	o := Options{Env: &env, Exe: "/usr/local/bin/supervisor"}
	for b.Loop() {
		rs, err := Status(hs, o)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, r := range rs {
			n += len(r.Entries)
		}
		if n != 400 {
			b.Fatalf("Status found %d servers, want 400", n)
		}
	}
}
