package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
)

func newBreakerCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "breaker", Short: "Circuit breakers of servers that keep failing to start"}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List circuit breakers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp api.BreakerList
			if err := call(api.TypeBreakers, nil, &resp); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), resp.Breakers)
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "KEY\tNAME\tSTATE\tFAILURES\tRETRY\tLAST FAILURE\tCOMMAND")
			now := time.Now()
			for _, b := range resp.Breakers {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", clean(b.Key), nameCell(b.Name, false), b.State, b.Failures,
					ago(b.RetryAt, now), orDash(b.LastReason), shortCommand(b.Argv, false))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	var resetJSON bool
	reset := &cobra.Command{
		Use:   "reset KEY|NAME [--json]",
		Short: "Close a circuit breaker by hand",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp api.BreakerList
			if err := call(api.TypeBreakerReset, &api.BreakerResetRequest{Target: args[0]}, &resp); err != nil {
				return err
			}
			if resetJSON {
				return writeJSON(cmd.OutOrStdout(), resp.Breakers)
			}
			var keys []string
			for _, b := range resp.Breakers {
				keys = append(keys, clean(b.Key)+" ("+clean(b.Name)+")")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "closed %s\n", strings.Join(keys, ", "))
			return nil
		},
	}
	reset.Flags().BoolVar(&resetJSON, "json", false, "print the closed breakers as JSON")
	cmd.AddCommand(list, reset)
	return cmd
}
