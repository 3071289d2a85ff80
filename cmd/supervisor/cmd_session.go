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
	var asJSON, hook bool
	cmd := &cobra.Command{
		Use:   "end ID [--grace D] | end --hook",
		Short: "Stop every process of a session through the stop cascade",
		Long: `Stop every process of a session through the stop cascade.

With --hook, for an agent host's SessionEnd hook (supervisor install --hooks
adds one): read the hook's JSON on stdin and end the session whose label is
its session_id. It prints nothing, and exits 0 when no daemon runs or no
session matches: a hook must never break its host.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if hook {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkGrace(grace); err != nil {
				return err
			}
			if hook {
				return endHookSession(cmd.InOrStdin(), grace)
			}
			if err := session.ValidateID(args[0]); err != nil {
				return err
			}
			return callCascade(cmd, api.TypeSessionEnd, &api.SessionEndRequest{ID: args[0], GraceMS: wireGrace(cmd, grace), Progress: true}, asJSON)
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, graceUsage)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&hook, "hook", false, "read a SessionEnd hook's JSON on stdin and end the session labelled with its session_id")
	return cmd
}
