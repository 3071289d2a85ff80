// Command supervisor is a process supervisor for AI agent hosts: one daemon
// per user owns every MCP server spawn. See README.md.
package main

import (
	"os"

	"github.com/seed-86a41135/supervisor/internal/keeper"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

func main() {
	// Hosts leak fds without close-on-exec into their children; whatever
	// this process starts (a daemon, above all) must not inherit them.
	inherited, _ := proc.MarkInheritedCloexec()
	if len(os.Args) > 1 && os.Args[1] == brokerCommand {
		os.Exit(executeBroker(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == keeper.Command {
		os.Exit(keeper.Main(os.Args[2:]))
	}
	os.Exit(execute(os.Args[1:], inherited))
}
