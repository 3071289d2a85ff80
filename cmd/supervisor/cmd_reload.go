package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/config"
	"github.com/seed-86a41135/supervisor/internal/daemon"
)

// configLoader returns how the daemon reads its config, at start and on
// every reload: the file named by the environment as of now (the daemon's
// start), merged over the defaults, then the start-time environment
// overrides, then flags (the daemon's flags, re-applied each time). A
// reload thus re-reads only the file; the environment and flag layers are
// the ones the daemon started with.
func configLoader(flags func(*config.Effective)) func() (*config.Effective, error) {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := env[k]; !dup { // the first wins, as in os.Getenv
			env[k] = v
		}
	}
	getenv := func(k string) string { return env[k] }
	return func() (*config.Effective, error) {
		eff, err := config.Load(getenv)
		if err != nil {
			return nil, err
		}
		flags(eff)
		return eff, nil
	}
}

// reloader adapts load to daemon.Config.Reload.
func reloader(load func() (*config.Effective, error)) func() (*daemon.Tunables, error) {
	return func() (*daemon.Tunables, error) {
		eff, err := load()
		if err != nil {
			return nil, err
		}
		return &daemon.Tunables{Settings: eff.Settings, Grace: eff.Grace, EOFGrace: eff.EOFGrace,
			File: eff.File, Loaded: eff.Loaded}, nil
	}
}

func newDaemonReloadCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "reload",
		Short: "Make the running daemon re-read its config file (as SIGHUP does)",
		Long: "Make the running daemon re-read its config file, with the environment and flags\n" +
			"it started with, as SIGHUP to it does. A bad file is reported here as\n" +
			"FILE:LINE: why, and the daemon keeps its current config.\n\n" +
			"New values apply to new work: runs and ensures started from now on (and their\n" +
			"[servers.NAME] overrides), breaker thresholds and cooldowns from the next\n" +
			"failure, stops begun from now on (default grace, EOF grace), health check\n" +
			"timeouts, log rotation size and retention. What already runs keeps what it\n" +
			"started with: a server's grace, a shared server's linger, health interval and\n" +
			"restart backoff.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var r api.Reloaded
			if err := call(api.TypeDaemonReload, nil, &r); err != nil {
				return &exitError{code: 1, err: err}
			}
			if r.Loaded {
				fmt.Fprintf(cmd.OutOrStdout(), "config reloaded from %s\n", r.File)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "config reloaded: %s not found, built-in defaults\n", r.File)
			}
			return nil
		},
	}
}
