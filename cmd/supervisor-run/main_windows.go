// Command supervisor-run is the lean run entry on Linux and macOS; on
// Windows hosts launch `supervisor run`.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "supervisor: supervisor-run is for Linux and macOS; on Windows use `supervisor run`")
	os.Exit(125)
}
