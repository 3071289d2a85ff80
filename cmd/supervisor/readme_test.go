package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeNewcomerPath: the README gives a newcomer the two commands of
// the project's contract (the demo, and the test suite exactly as CI runs
// it), links nothing outside the repository, and claims nothing stale.
func TestReadmeNewcomerPath(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, want := range []string{"go run ./cmd/supervisor demo", "CI=true bash .ci/run"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README lacks the command %q", want)
		}
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	// The whole suite, race detector on, nothing cached (the flags between
	// may change: a timeout, -json for the summary).
	if !regexp.MustCompile(`(?m)^go test -race -count=1 .*\./\.\.\.`).Match(ci) {
		t.Errorf(".ci/run no longer runs the whole suite (go test -race -count=1 ... ./...)")
	}
	// Links leaving the repository by a relative path break on a clone.
	if m := regexp.MustCompile(`\]\((\.\./[^)]*)\)`).FindAllString(readme, -1); len(m) > 0 {
		t.Errorf("README links outside the repository: %v", m)
	}
	if strings.Contains(readme, "Not yet built: macOS and Windows") {
		t.Errorf("README still says macOS and Windows are not built; the cross-OS checks run in .ci/run")
	}
}
