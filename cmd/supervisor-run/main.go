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

	"github.com/seed-86a41135/supervisor/internal/leanrun"
)

func main() {
	os.Exit(leanrun.Main(os.Args[1:], os.Environ(), os.Stderr))
}
