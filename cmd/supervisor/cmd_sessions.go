package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
)

func newSessionsCommand() *cobra.Command {
	var all, asJSON, wide bool
	cmd := &cobra.Command{
		Use:   "sessions [--all] [--json]",
		Short: "List sessions (one per running agent host)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp api.SessionList
			if err := call(api.TypeSessions, &api.SessionsRequest{All: all}, &resp); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), resp.Sessions)
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "ID\tHOST PID\tSTATE\tPROCESSES\tSHARED\tMEM\tCPU\tPIDS\tSTARTED\tHOST COMMAND")
			now := time.Now()
			for _, s := range resp.Sessions {
				mem, cpu, procs := usageCells(s.Usage)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", s.ID, pidOrDash(s.HostPID), s.State, s.Processes, s.Shared,
					mem, cpu, procs, ago(s.StartedAt, now), shortCommand([]string{s.HostCommand}, wide))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include ended sessions")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	addWideFlags(cmd, &wide)
	return cmd
}
