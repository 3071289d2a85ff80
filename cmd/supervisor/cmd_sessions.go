package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
)

func newSessionsCommand() *cobra.Command {
	var all, asJSON bool
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
			fmt.Fprintln(tw, "ID\tHOST PID\tSTATE\tPROCESSES\tSTARTED\tHOST COMMAND")
			for _, s := range resp.Sessions {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s ago\t%s\n", s.ID, pidOrDash(s.HostPID), s.State, s.Processes,
					since(s.StartedAt, nil), shortCommand([]string{s.HostCommand}))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include ended sessions")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
