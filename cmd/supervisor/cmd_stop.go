package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
)

func newStopCommand() *cobra.Command {
	var grace time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stop ID|NAME [--grace D]",
		Short: "Stop one process (and its tree) through the stop cascade",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkGrace(grace); err != nil {
				return err
			}
			return callCascade(cmd, api.TypeStop, &api.StopRequest{Target: args[0], GraceMS: api.Millis(grace)}, asJSON)
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, "SIGTERM grace before SIGKILL (default 5s)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
