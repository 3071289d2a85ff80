package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/cobra/doc"
)

var updateCLIDocs = flag.Bool("update-cli-docs", false, "rewrite docs/cli from the command tree")

// docs/cli is the CLI reference, generated from the cobra tree: every
// command's help, flags and examples as `supervisor CMD --help` shows them.
// It fails when the tree changed and docs/cli did not; rewrite it with
// `go test ./cmd/supervisor -run TestCLIReferenceIsCurrent -update-cli-docs`.
func TestCLIReferenceIsCurrent(t *testing.T) {
	t.Parallel()
	root := newRootCommand(nil)
	finishHelp(root)
	root.DisableAutoGenTag = true // no date: the same tree gives the same files
	gen := t.TempDir()
	if err := doc.GenMarkdownTree(root, gen); err != nil {
		t.Fatalf("generate the CLI reference: %v", err)
	}
	dir := filepath.Join("..", "..", "docs", "cli")
	if *updateCLIDocs {
		os.RemoveAll(dir)
		if err := os.CopyFS(dir, os.DirFS(gen)); err != nil {
			t.Fatal(err)
		}
		return
	}
	names := func(d string) []string {
		entries, _ := os.ReadDir(d)
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		slices.Sort(out)
		return out
	}
	want, got := names(gen), names(dir)
	if !slices.Equal(want, got) {
		t.Fatalf("docs/cli has %v, the command tree makes %v: rerun with -update-cli-docs", got, want)
	}
	for _, name := range want {
		w, _ := os.ReadFile(filepath.Join(gen, name))
		g, _ := os.ReadFile(filepath.Join(dir, name))
		if !bytes.Equal(w, g) {
			t.Errorf("docs/cli/%s is stale: rerun with -update-cli-docs", name)
		}
	}
}
