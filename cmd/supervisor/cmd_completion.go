package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// withCompletion adds cobra's `completion bash|zsh|fish|powershell` now
// rather than at Execute, so that an unknown shell is an error instead of
// the help text and exit 0.
func withCompletion(root *cobra.Command) *cobra.Command {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			return &hintError{err: fmt.Errorf("completion %q: unknown shell; want bash, zsh, fish or powershell", args[0]),
				hint: "e.g. `source <(supervisor completion bash)`"}
		}
	}
	return root
}
