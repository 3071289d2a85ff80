// Command supervisor is a process supervisor for AI agent hosts: one daemon
// per user owns every MCP server spawn. See README.md.
package main

import (
	"os"
)

func main() {
	os.Exit(execute(os.Args[1:]))
}
