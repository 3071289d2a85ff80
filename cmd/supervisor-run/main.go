//go:build unix

// Command supervisor-run is the lean run entry: what a host's MCP config
// launches instead of `supervisor run`, with the same arguments after
// "run". It starts in a fraction of `supervisor`'s time, because it links
// only the run request and the exec (internal/leanrun). Where the daemon is up and execs the server in this
// process's place, that is all it does; every other run it hands to
// `supervisor run`, installed beside it, by exec.
package main

import (
	"os"
	"runtime"

	"github.com/seed-86a41135/supervisor/internal/leanrun"
)

// The main goroutine stays on the process's first thread, so the exec of
// the server in this process's place (from the main goroutine) is the
// thread group leader's. An exec from another thread makes the kernel
// wait for the leader to die and hand its identity over (de_thread): time
// on every start, and a moment in which the process's pid shows a zombie.
// Locked in init, where the runtime keeps the main goroutine on that
// thread.
func init() { runtime.LockOSThread() }

func main() {
	os.Exit(leanrun.Main(os.Args[1:], os.Environ(), os.Stderr))
}
