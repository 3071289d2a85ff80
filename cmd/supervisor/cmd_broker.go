package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/internal/broker"
	"github.com/seed-86a41135/supervisor/internal/logwriter"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// brokerCommand is the name the daemon spawns the broker by.
const brokerCommand = "_broker"

// executeBroker runs `supervisor _broker ARGS` as main does any command,
// but without building the whole command tree first: a broker lives as
// long as its shared server, one per server, and an idle one may never
// reach its first GC, so the tree's garbage (about 0.2 MiB of heap) would
// stay resident for its life.
func executeBroker(args []string) int {
	cmd := newBrokerCommand()
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "supervisor: %s: %v\n", brokerCommand, err)
		return 1
	}
	return 0
}

// newBrokerCommand is the broker process the daemon spawns for a shared
// server (design §11); it is not for people to run.
func newBrokerCommand() *cobra.Command {
	var socket string
	var linger, idle time.Duration
	var lazy bool
	var drop []string
	var sandboxRules string
	var logOpt logwriter.Options
	cmd := &cobra.Command{
		Use:    brokerCommand + " --socket PATH [--linger D] -- CMD [ARG...]",
		Short:  "Relay clients to one shared server (started by the daemon)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) (rerr error) {
			if socket == "" || len(args) == 0 {
				return fmt.Errorf("%s needs --socket PATH and a command after --", brokerCommand)
			}
			if logOpt.Path != "" {
				finish, err := captureStderr(logOpt)
				if err != nil {
					return err
				}
				defer func() {
					// Said while stderr is still the log: finish closes it,
					// and executeBroker's report would go nowhere.
					if rerr != nil {
						fmt.Fprintf(os.Stderr, "supervisor: %s: %v\n", brokerCommand, rerr)
					}
					finish()
				}()
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			log := hclog.New(&hclog.LoggerOptions{Name: "broker", Output: os.Stderr, Level: hclog.Info})
			cwd, _ := os.Getwd()
			var cache *broker.Cache
			if lazy {
				cache = readCache(os.Stdin, log)
			}
			os.Stdin.Close() // read or not, the daemon's writer is done with it
			var rules *sandbox.Rules
			if sandboxRules != "" {
				rules = new(sandbox.Rules)
				if err := json.Unmarshal([]byte(sandboxRules), rules); err != nil {
					return fmt.Errorf("--sandbox-rules: %w", err)
				}
			}
			return broker.Serve(ctx, broker.ServeConfig{
				Socket: socket, Linger: linger, Ready: os.Stdout,
				Broker: broker.Config{Argv: args, Dir: cwd, Env: dropEnv(os.Environ(), drop), Sandbox: rules, Log: log, Lazy: lazy, Cache: cache, Idle: idle},
			})
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the unix socket the daemon hands clients over")
	cmd.Flags().DurationVar(&linger, "linger", 30*time.Second, "how long to outlive the last client")
	cmd.Flags().BoolVar(&lazy, "lazy", false, "answer from the cache on stdin (JSON) and start the server on demand")
	cmd.Flags().DurationVar(&idle, "idle", 0, "stop the server after this long with nothing in flight")
	cmd.Flags().StringVar(&logOpt.Path, "log", "", "write stderr (the broker's and its upstream's) to this capped, rotated log")
	cmd.Flags().Int64Var(&logOpt.MaxBytes, "log-max-bytes", 10<<20, "rotate the log before it would pass this size")
	cmd.Flags().IntVar(&logOpt.Keep, "log-keep", 3, "rotated logs kept")
	cmd.Flags().StringVar(&sandboxRules, "sandbox-rules", "", "confine the upstream to these rules (JSON, as the daemon planned them)")
	cmd.Flags().StringArrayVar(&drop, "drop-env", nil, "a variable the daemon set for the broker itself, not passed to the upstream (repeatable)")
	return cmd
}

// readCache reads the lazy-start cache the daemon writes on stdin (none:
// /dev/null). One that cannot be read means a cold start, which fills a
// new one: the cache only saves time, it never decides an answer alone.
func readCache(r io.Reader, log hclog.Logger) *broker.Cache {
	data, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil || len(bytes.TrimSpace(data)) == 0 {
		if err != nil {
			log.Warn("read the cache on stdin; starting cold", "err", err)
		}
		return nil
	}
	var c broker.Cache
	if err := json.Unmarshal(data, &c); err != nil {
		log.Warn("the cache on stdin is not valid; starting cold", "err", err)
		return nil
	}
	return &c
}

// dropEnv is env without the variables named in drop.
func dropEnv(env, drop []string) []string {
	if len(drop) == 0 {
		return env
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, k) {
			out = append(out, kv)
		}
	}
	return out
}
