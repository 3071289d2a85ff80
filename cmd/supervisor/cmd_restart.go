package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
)

func newRestartCommand() *cobra.Command {
	var grace time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "restart ID|NAME [--grace D]",
		Short: "Stop a server the daemon started (ensure) and start it again as it was",
		Long: "restart stops the server through the stop cascade and starts it again with the\n" +
			"command, directory, environment and limits it was started with, then waits\n" +
			"until it is healthy. Only servers the daemon started itself (`supervisor ensure`)\n" +
			"can be: a host's stdio server talks to the host over the host's own pipes, which\n" +
			"no new process can be given, so only its host can start it again; restart says so.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkGrace(grace); err != nil {
				return err
			}
			c, err := dial()
			if err != nil {
				return err
			}
			defer c.Close()
			var r api.Restarted
			if err := c.Call(api.TypeRestart, &api.RestartRequest{Target: args[0], GraceMS: wireGrace(cmd, grace)}, &r); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s (%s): restarted, pid %d (was %d)\n", r.ID, r.Name, r.PID, r.OldPID)
			return nil
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, graceUsage)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
