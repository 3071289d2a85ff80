package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/internal/hosts"
	"github.com/seed-86a41135/supervisor/internal/service"
)

// nativeService is this OS's service manager and what install-service and
// uninstall-service pass it: this binary, this environment, this uid.
func nativeService() (*service.Manager, service.Options, error) {
	m, err := service.Native()
	if err != nil {
		return nil, service.Options{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, service.Options{}, fmt.Errorf("find this binary: %w", err)
	}
	return m, service.Options{Binary: exe, Getenv: os.Getenv, UID: os.Getuid()}, nil
}

func newDaemonInstallServiceCommand() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "install-service [--dry-run]",
		Short: "Run the daemon as a per-user service (systemd user unit, launchd agent)",
		Long: "Write the per-user service unit for this OS with this binary's absolute path\n" +
			"(Linux: $XDG_CONFIG_HOME/systemd/user/supervisor.service; macOS:\n" +
			"~/Library/LaunchAgents/" + service.Label + ".plist) and enable and start it.\n" +
			"Running it again rewrites the unit only if it changed.\n\n" +
			"If the service manager cannot be reached (no user bus, as in containers and CI),\n" +
			"the unit stays written, a warning says what to run, and the exit status is 0.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, o, err := nativeService()
			if err != nil {
				return err
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			pinned, note, err := hosts.Pin(o.Binary, dryRun)
			if err != nil {
				return err
			}
			if note != "" {
				fmt.Fprintf(errOut, "note: %s\n", note)
				o.Binary = pinned
			}
			if dir := hosts.TemporaryDir(o.Binary); dir != "" {
				fmt.Fprintf(errOut, "supervisor: warning: this binary lives in a temporary location (%s is under %s), and the unit will run it from there; install it (e.g. `go install ./cmd/supervisor`) and rerun install-service from the installed binary\n", o.Binary, dir)
			}
			if dryRun {
				r, err := m.Plan(o)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "# would write %s (%s):\n%s", r.Path, m.Name, r.Unit)
				for _, c := range r.Commands {
					fmt.Fprintf(out, "# then run: %s\n", c)
				}
				return nil
			}
			r, err := m.Install(o)
			if err != nil {
				return fmt.Errorf("install %s: %w", m.Name, err)
			}
			if r.Changed {
				fmt.Fprintf(out, "wrote %s\n", r.Path)
			} else {
				fmt.Fprintf(out, "%s is up to date\n", r.Path)
			}
			if r.CommandErr != nil {
				fmt.Fprintf(errOut, "supervisor: warning: the %s is written but not enabled: %v\n", m.Name, r.CommandErr)
				fmt.Fprintf(errOut, "hint: where the service manager is reachable, run: %s\n", strings.Join(r.Commands, " && "))
				return nil
			}
			fmt.Fprintf(out, "enabled and started: %s\n", strings.Join(r.Commands, " && "))
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the unit and where it would go; write and run nothing")
	return cmd
}

func newDaemonUninstallServiceCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "uninstall-service",
		Short: "Stop and disable the per-user service and remove its unit",
		Long: "Stop and disable the per-user service (stopping the daemon, which stops its\n" +
			"servers through the cascade) and remove the unit file. Nothing installed is not\n" +
			"an error. If the service manager cannot be reached, the file is removed anyway\n" +
			"and a warning says so.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, o, err := nativeService()
			if err != nil {
				return err
			}
			r, err := m.Uninstall(o)
			if err != nil {
				return fmt.Errorf("uninstall %s: %w", m.Name, err)
			}
			if !r.Changed {
				fmt.Fprintf(cmd.OutOrStdout(), "not installed (no %s)\n", r.Path)
				return nil
			}
			if r.CommandErr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "supervisor: warning: could not disable the %s: %v\n", m.Name, r.CommandErr)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", r.Path)
			return nil
		},
	}
}
