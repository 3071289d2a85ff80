package main

import (
	"os"
	"runtime"
)

// `supervisor run` keeps its main goroutine on the process's first thread,
// so the exec of its server in its place is the thread group leader's (see
// cmd/supervisor-run's init). Other commands, the daemon above all, are
// left to the scheduler.
func init() {
	if len(os.Args) > 1 && os.Args[1] == "run" {
		runtime.LockOSThread()
	}
}
