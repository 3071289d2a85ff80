package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/daemon"
	"github.com/seed-86a41135/supervisor/internal/settings"
)

func newInitCommand() *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "init [--grace D] -- CMD [ARG...]",
		Short: "Be PID 1 of an agent container: reap, forward signals, supervise, clean up, exit with CMD's status",
		Long: `This is the container init (PID 1); for a config file, see supervisor config init.

init runs CMD as the container's main process with the supervisor daemon
in-process: every zombie is reaped, SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/
SIGUSR2/SIGWINCH are forwarded to CMD, MCP servers CMD starts through
'supervisor run' are supervised, and when CMD exits every process still left
goes through the stop cascade before init exits with CMD's status.

The daemon's state lives in $SUPERVISOR_STATE_DIR, or a fresh temporary
directory; CMD gets SUPERVISOR_STATE_DIR and SUPERVISOR_SOCKET so its shims
reach this daemon.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := commandAfterDash(cmd, args, "init: the command", "supervisor init -- CMD [ARG...]"); err != nil {
				return &exitError{code: 125, err: err}
			}
			if err := checkGrace(grace); err != nil {
				return &exitError{code: 125, err: err}
			}
			state := os.Getenv(api.EnvStateDir)
			if state == "" {
				dir, err := os.MkdirTemp("", "supervisor-init-")
				if err != nil {
					return &exitError{code: 125, err: fmt.Errorf("init: state directory: %w", err)}
				}
				defer os.RemoveAll(dir)
				state = dir
			}
			p, err := api.ResolvePaths(func(k string) string {
				if k == api.EnvStateDir {
					return state
				}
				return os.Getenv(k)
			})
			if err != nil {
				return &exitError{code: 125, err: fmt.Errorf("init: %w", err)}
			}
			env := append(os.Environ(), api.EnvStateDir+"="+p.StateDir, api.EnvSocket+"="+p.Socket)
			cwd, _ := os.Getwd()
			spec := &daemon.InitSpec{Argv: args, Env: env, Dir: cwd}
			err = daemon.Run(context.Background(), daemon.Config{
				Paths: p, Grace: grace, Init: spec, Cgroups: os.Getenv(settings.EnvCgroups) != "off",
				InPlace: os.Getenv(settings.EnvInPlace) != "off",
			})
			if err != nil {
				return &exitError{code: 125, err: fmt.Errorf("init: %w", err)}
			}
			if spec.Code != 0 {
				return &exitError{code: spec.Code}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, "SIGTERM grace for what is left when CMD exits (default 5s)")
	return cmd
}
