package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/session"
)

func newSessionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Act on one session",
	}
	cmd.AddCommand(newSessionEndCommand())
	return cmd
}

func newSessionEndCommand() *cobra.Command {
	var grace time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "end ID [--grace D]",
		Short: "Stop every process of a session through the stop cascade",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := session.ValidateID(args[0]); err != nil {
				return err
			}
			if err := checkGrace(grace); err != nil {
				return err
			}
			return callCascade(cmd, api.TypeSessionEnd, &api.SessionEndRequest{ID: args[0], GraceMS: api.Millis(grace)}, asJSON)
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, "SIGTERM grace before SIGKILL (default 5s)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
