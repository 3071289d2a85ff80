package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/internal/fixture"
)

func newFixtureCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "_fixture NAME [ARG...]",
		Short:              "Run a built-in test fixture (for tests and the demo)",
		Hidden:             true,
		DisableFlagParsing: true,
		Args:               cobra.MinimumNArgs(1),
		Run: func(_ *cobra.Command, args []string) {
			os.Exit(fixture.Run(args[0], args[1:]))
		},
	}
}
