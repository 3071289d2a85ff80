package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/shutdown"
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
			return callCascade(cmd, api.TypeStop, &api.StopRequest{Target: args[0], GraceMS: wireGrace(cmd, grace), Progress: true}, asJSON)
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, graceUsage)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// graceUsage documents --grace for stop, session end and daemon stop.
var graceUsage = fmt.Sprintf("SIGTERM grace before SIGKILL, at most %v (default 5s); a stop under way is shortened to it, and 0s kills at once", shutdown.MaxGrace)

// wireGrace is --grace as a request carries it. 0 there means the
// default, so an explicit --grace 0s asks for the shortest grace, 1 ms:
// SIGTERM, then SIGKILL at once.
func wireGrace(cmd *cobra.Command, g time.Duration) int64 {
	if g == 0 && cmd.Flags().Changed("grace") {
		return 1
	}
	return api.Millis(g)
}
