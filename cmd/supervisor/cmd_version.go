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
			version, commit, date := api.Build()
			built := ""
			if commit != "" {
				built = "commit " + commit
				if date != "" {
					built += " of " + date
				}
				built += ", "
			}
			fmt.Fprintf(cmd.OutOrStdout(), "supervisor %s (%sprotocol %d, %s, %s/%s)\n",
				version, built, api.Protocol, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}
