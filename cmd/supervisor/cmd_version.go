package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "supervisor %s (protocol %d, %s, %s/%s)\n",
				api.Version, api.Protocol, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}
