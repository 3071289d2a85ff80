package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/daemon"
	"github.com/seed-86a41135/supervisor/proc"
)

func newDaemonCommand(inherited []int) *cobra.Command {
	var foreground bool
	var logLevel, cgroups string
	cmd := &cobra.Command{
		Use:   "daemon [--foreground]",
		Short: "Run the per-user daemon (detached unless --foreground)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := paths()
			if err != nil {
				return err
			}
			if foreground {
				// A long-lived daemon must not hold fds leaked into it.
				for _, fd := range inherited {
					syscall.Close(fd)
				}
				if cgroups != "auto" && cgroups != "off" {
					return fmt.Errorf("--cgroups %q: want auto or off", cgroups)
				}
				settings := daemon.DefaultSettings()
				if err := settings.ApplyEnv(os.Getenv); err != nil {
					return err
				}
				err := daemon.Run(context.Background(), daemon.Config{Paths: p, Stderr: cmd.ErrOrStderr(),
					LogLevel: logLevel, Cgroups: cgroups == "auto", Settings: &settings})
				var already *daemon.AlreadyRunningError
				if errors.As(err, &already) {
					fmt.Fprintf(cmd.ErrOrStderr(), "supervisor: %v\n", already)
					return nil
				}
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if c, err := api.Dial(ctx, p.Socket); err == nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "supervisor: daemon already running (pid %d)\n", c.Daemon.PID)
				c.Close()
				return nil
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find this binary: %w", err)
			}
			c, err := daemon.EnsureRunning(ctx, exe, p, os.Environ())
			if err != nil {
				return err
			}
			defer c.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "daemon running, pid %d, socket %s\n", c.Daemon.PID, p.Socket)
			return nil
		},
	}
	cmd.Flags().BoolVar(&foreground, "foreground", false, "stay attached and log to stderr too")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "trace, debug, info, warn or error")
	defCgroups := os.Getenv(daemon.EnvCgroups)
	if defCgroups == "" {
		defCgroups = "auto"
	}
	cmd.Flags().StringVar(&cgroups, "cgroups", defCgroups, "auto: a cgroup per server where cgroup2 is writable; off: process groups and markers only (also $"+daemon.EnvCgroups+")")
	cmd.AddCommand(newDaemonStopCommand())
	return cmd
}

func newDaemonStopCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop every session through the stop cascade, then the daemon",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dial()
			if err != nil {
				return err
			}
			defer c.Close()
			pid := c.Daemon.PID
			tok, _ := proc.TokenOf(pid)
			var resp api.Outcomes
			if err := c.Call(api.TypeDaemonStop, nil, &resp); err != nil {
				return err
			}
			if !proc.WaitExit(pid, tok, 30*time.Second) {
				return fmt.Errorf("daemon (pid %d) still running 30s after it was asked to stop; see its log", pid)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), resp.Outcomes)
			}
			if len(resp.Outcomes) > 0 {
				printOutcomes(cmd.OutOrStdout(), resp.Outcomes)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "daemon (pid %d) stopped\n", pid)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the outcomes as JSON")
	return cmd
}
