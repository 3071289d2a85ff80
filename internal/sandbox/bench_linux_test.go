//go:build linux

package sandbox

import (
	"os"
	"runtime"
	"testing"
)

// The pieces of a sandboxed start, apart: planning (in the daemon) and
// confining (in the thread that forks or execs the server). The spawn
// figures in cmd/bench measure the whole start beside a plain one.
func BenchmarkPlan(b *testing.B) {
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	ctx := Context{Home: home, Cwd: cwd, Argv: []string{"/usr/bin/true"}, StateDir: "/nonexistent/state"}
	for b.Loop() {
		if _, err := Plan(Spec{Enabled: true}, ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConfine(b *testing.B) {
	if !Support().Filesystem {
		b.Skip("no Landlock here")
	}
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	r, err := Plan(Spec{Enabled: true}, Context{Home: home, Cwd: cwd, Argv: []string{"/usr/bin/true"}, StateDir: "/nonexistent/state"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(r.Read)+len(r.Write)), "rules")
	for b.Loop() {
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never handed back: the thread ends with it
			done <- Confine(r)
		}()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}
