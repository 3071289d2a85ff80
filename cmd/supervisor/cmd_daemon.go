package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/client"
	"github.com/seed-86a41135/supervisor/internal/config"
	"github.com/seed-86a41135/supervisor/internal/daemon"
	"github.com/seed-86a41135/supervisor/internal/keeper"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/shutdown"
)

func newDaemonCommand(inherited []int) *cobra.Command {
	var foreground bool
	var logLevel, cgroups, inPlace, metricsAddr string
	var pprof, metricsNames bool
	var retention time.Duration
	cmd := &cobra.Command{
		Use:   "daemon [--foreground]",
		Short: "Run the per-user daemon (detached unless --foreground)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := paths()
			if err != nil {
				return err
			}
			if pprof && metricsAddr == "" && cmd.Flags().Changed("pprof") {
				return fmt.Errorf("--pprof needs --metrics-addr ADDR: the profiles are served there (e.g. --metrics-addr 127.0.0.1:9464 --pprof)")
			}
			if cmd.Flags().Changed("retention") && retention <= 0 {
				return fmt.Errorf("--retention %v: must be positive (e.g. 168h)", retention)
			}
			if foreground {
				// A long-lived daemon must not hold fds leaked into it.
				api.CloseFds(inherited)
				if inPlace != "auto" && inPlace != "off" {
					return fmt.Errorf("--in-place %q: want auto or off", inPlace)
				}
				if cgroups != "auto" && cgroups != "off" {
					return fmt.Errorf("--cgroups %q: want auto or off", cgroups)
				}
				// Defaults < config file < environment < flags (package config);
				// a reload (SIGHUP, `daemon reload`) re-reads only the file.
				load := configLoader(func(eff *config.Effective) {
					if cmd.Flags().Changed("retention") {
						eff.Set("retention", "retention", func(e *config.Effective) { e.Settings.Retention = retention })
					}
				})
				eff, err := load()
				if err != nil {
					logStartError(p, err)
					return err
				}
				eff.WriteWarnings(cmd.ErrOrStderr())
				st := eff.Settings
				err = daemon.Run(context.Background(), daemon.Config{Paths: p, Stderr: cmd.ErrOrStderr(),
					LogLevel: logLevel, Cgroups: cgroups == "auto", InPlace: inPlace == "auto", Settings: &st, MetricsAddr: metricsAddr, Pprof: pprof, MetricsNames: metricsNames,
					Grace: eff.Grace, EOFGrace: eff.EOFGrace, Reload: reloader(load)})
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
			eff, err := config.Load(os.Getenv)
			if err != nil {
				return err // the daemon would refuse it: say so here, not in its log
			}
			eff.WriteWarnings(cmd.ErrOrStderr())
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find this binary: %w", err)
			}
			env := os.Environ()
			if cmd.Flags().Changed("retention") {
				env = append(env, settings.EnvRetention+"="+retention.String())
			}
			if cmd.Flags().Changed("metrics-addr") {
				env = append(env, settings.EnvMetricsAddr+"="+metricsAddr)
			}
			if pprof {
				env = append(env, settings.EnvPprof+"=1")
			}
			if metricsNames {
				env = append(env, settings.EnvMetricsNames+"=1")
			}
			c, err := client.EnsureRunning(ctx, exe, p, env)
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
	cmd.Flags().DurationVar(&retention, "retention", 7*24*time.Hour, "compact ended sessions and exited processes older than this (also $"+settings.EnvRetention+")")
	defCgroups := os.Getenv(settings.EnvCgroups)
	if defCgroups == "" {
		defCgroups = "auto"
	}
	cmd.Flags().BoolVar(&pprof, "pprof", os.Getenv(settings.EnvPprof) == "1", "also serve Go's profiles at http://ADDR/debug/pprof/ (needs --metrics-addr; also $"+settings.EnvPprof+"=1)")
	cmd.Flags().BoolVar(&metricsNames, "metrics-names", os.Getenv(settings.EnvMetricsNames) == "1", "add each server name's memory, CPU and processes to the metrics (a series per name; also $"+settings.EnvMetricsNames+"=1)")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", os.Getenv(settings.EnvMetricsAddr), "serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9464 (off when empty; also $"+settings.EnvMetricsAddr+")")
	defInPlace := os.Getenv(settings.EnvInPlace)
	if defInPlace == "" {
		defInPlace = "auto"
	}
	cmd.Flags().StringVar(&inPlace, "in-place", defInPlace, "auto: a shim execs its server in its own place where the kernel can tell the daemon its exit status (Linux 6.15+), so no shim process stays; off: the daemon spawns every server (also $"+settings.EnvInPlace+")")
	cmd.Flags().StringVar(&cgroups, "cgroups", defCgroups, "auto: a cgroup per server where cgroup2 is writable; off: process groups and markers only (also $"+settings.EnvCgroups+")")
	cmd.AddCommand(newDaemonStopCommand(), newDaemonRestartCommand(), newDaemonInstallServiceCommand(), newDaemonUninstallServiceCommand(),
		newDaemonReloadCommand())
	return cmd
}

// logStartError appends why a daemon refused to start to its log: an
// auto-started daemon's stderr is /dev/null, and its starter points there.
func logStartError(p api.Paths, err error) {
	if api.EnsurePrivateDir(p.StateDir) != nil {
		return
	}
	f, ferr := os.OpenFile(p.Log(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if ferr != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s supervisor: %v\n", time.Now().Format(time.RFC3339), err)
}

func newDaemonStopCommand() *cobra.Command {
	var asJSON, keep bool
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "stop [--keep-processes]",
		Short: "Stop every session through the stop cascade, then the daemon",
		Long: "Stop every session through the stop cascade, then the daemon.\n\n" +
			"With --keep-processes the daemon exits without touching any server: the next\n" +
			"daemon (started by `supervisor daemon`, or by the first shim that needs one)\n" +
			"re-adopts them, and shims re-attach. `supervisor daemon restart` does both.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkGrace(grace); err != nil {
				return err
			}
			pid, outcomes, err := stopDaemon(api.DaemonStop{KeepProcesses: keep, GraceMS: wireGrace(cmd, grace), Progress: true},
				progressTo(cmd.ErrOrStderr()))
			if errors.Is(err, api.ErrNotRunning) {
				// A keeper between a crash and the next daemon would
				// start one again in a moment: it is what runs.
				if p, perr := paths(); perr == nil {
					if ks := keeper.Stop(p.StateDir, 10*time.Second); len(ks) > 0 {
						fmt.Fprintf(cmd.OutOrStdout(), "no daemon was running; stopped its keeper (pid %v), which was about to start it again\n", ks)
						return nil
					}
				}
			}
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), outcomes)
			}
			if len(outcomes) > 0 {
				printOutcomes(cmd.OutOrStdout(), outcomes)
			}
			if keep {
				fmt.Fprintf(cmd.OutOrStdout(), "daemon (pid %d) stopped; its servers keep running for the next daemon\n", pid)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "daemon (pid %d) stopped\n", pid)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the outcomes as JSON")
	cmd.Flags().BoolVar(&keep, "keep-processes", false, "exit without stopping any server (for an upgrade: the next daemon re-adopts them)")
	cmd.Flags().DurationVar(&grace, "grace", 0, graceUsage)
	return cmd
}

// stopDaemon asks the running daemon to exit and waits until it has;
// progress, when not nil, is shown the progress of a long stop.
func stopDaemon(req api.DaemonStop, progress func(api.Progress)) (int, []shutdown.Outcome, error) {
	c, err := dial()
	if err != nil {
		return 0, nil, err
	}
	defer c.Close()
	pid := c.Daemon.PID
	tok, _ := proc.TokenOf(pid)
	var resp api.Outcomes
	if err := c.CallProgress(api.TypeDaemonStop, &req, &resp, progress); err != nil {
		return 0, nil, err
	}
	if !proc.WaitExit(pid, tok, 30*time.Second) {
		return 0, nil, fmt.Errorf("daemon (pid %d) still running 30s after it was asked to stop; see its log", pid)
	}
	return pid, resp.Outcomes, nil
}

// restartResult is `daemon restart --json`: the daemon replaced (none:
// 0 and "") and the one now running.
type restartResult struct {
	OldPID     int           `json:"old_pid"`
	OldVersion string        `json:"old_version"`
	PID        int           `json:"pid"`
	Version    string        `json:"version"`
	Recovery   *api.Recovery `json:"recovery,omitempty"`
}

func newDaemonRestartCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "restart [--json]",
		Short: "Replace the running daemon with this binary, keeping every server running",
		Long: "Stop the running daemon with --keep-processes and start this binary's daemon,\n" +
			"which re-adopts every server; shims re-attach and hosts notice nothing. This is\n" +
			"how an upgraded supervisor takes over.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := paths()
			if err != nil {
				return err
			}
			// A file the new daemon would refuse must not cost the old one
			// first: the servers would be left with no daemon at all.
			eff, err := config.Load(os.Getenv)
			if err != nil {
				return err
			}
			eff.WriteWarnings(cmd.ErrOrStderr())
			old, oldVersion := 0, ""
			if c, err := dial(); err == nil {
				old, oldVersion = c.Daemon.PID, c.Daemon.Version
				c.Close()
				if _, _, err := stopDaemon(api.DaemonStop{KeepProcesses: true}, nil); err != nil {
					return err
				}
			} else if !errors.Is(err, api.ErrNotRunning) {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find this binary: %w", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := client.EnsureRunning(ctx, exe, p, os.Environ())
			if err != nil {
				return err
			}
			defer c.Close()
			var st api.Status
			if err := c.Call(api.TypeStatus, nil, &st); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(w, restartResult{OldPID: old, OldVersion: oldVersion, PID: st.PID, Version: st.Version, Recovery: st.Recovery})
			}
			if old == 0 {
				fmt.Fprintf(w, "no daemon was running; started pid %d (version %s)\n", st.PID, st.Version)
			} else {
				fmt.Fprintf(w, "daemon restarted: pid %d (version %s) -> pid %d (version %s)\n", old, oldVersion, st.PID, st.Version)
			}
			if r := st.Recovery; r != nil {
				fmt.Fprintf(w, "recovery: %s\n", clean(r.String()))
				if sr := r.StoreRebuilt; sr != nil {
					fmt.Fprintf(w, "registry: %s\n", storeRebuiltLine(sr))
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the old and the new daemon as JSON")
	return cmd
}
