package main

import (
	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/internal/demo"
)

func newDemoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "A self-contained tour: a private daemon, a fake host, its death and the cleanup",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return demo.Run(cmd.Context(), cmd.OutOrStdout())
		},
	}
}
