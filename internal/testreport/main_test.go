package main

import (
	"os/exec"
	"strings"
	"testing"
)

// A real `go test -json` stream: a passing, a failing and a skipped test
// in a throwaway module, and a package that does not build.
func TestReportCountsARealStream(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := exec.Command("sh", "-c", "mkdir -p \"$(dirname \"$1\")\" && printf '%s' \"$2\" > \"$1\"", "sh", dir+"/"+name, text).Run(); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module m\n\ngo 1.22\n")
	write("a/a_test.go", `package a
import ("testing"; "time")
func TestOK(t *testing.T) { t.Run("sub", func(t *testing.T) {}) }
func TestSlow(t *testing.T) { time.Sleep(300 * time.Millisecond) }
func TestBad(t *testing.T) { t.Log("the reason it failed") ; t.Fail() }
func TestSkipped(t *testing.T) { t.Skip("tmux is not installed") }
`)
	write("b/b_test.go", "package b\nfunc broken( {\n")
	cmd := exec.Command("go", "test", "-json", "./...")
	cmd.Dir = dir
	stream, _ := cmd.Output() // fails: a test failed
	var out strings.Builder
	code := report(strings.NewReader(string(stream)), &out)
	got := out.String()
	for _, want := range []string{
		"3 passed, 1 failed, 1 skipped (tests and subtests; 2 packages failed)",
		"slowest tests:\n     0.3s m/a TestSlow\n",
		"--- FAIL m/a TestBad",
		"the reason it failed",
		"SKIP m/a TestSkipped: a_test.go:6: tmux is not installed",
		"FAIL m/b",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "TestOK/sub") && strings.Contains(got[strings.Index(got, "slowest"):], "TestOK/sub") {
		t.Errorf("subtests are listed among the slowest, want top-level tests only:\n%s", got)
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}
