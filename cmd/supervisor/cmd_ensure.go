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
	"github.com/seed-86a41135/supervisor/internal/leanrun"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/session"
	"github.com/seed-86a41135/supervisor/spawn/health"
)

type ensureOptions struct {
	port         int
	health       string
	name         string
	cwd          string
	session      string
	timeout      time.Duration
	linger       time.Duration
	interval     time.Duration
	grace        time.Duration
	adoptForeign bool
	json         bool
	limits       limitFlags
	sandbox      sandboxFlags
}

func newEnsureCommand() *cobra.Command {
	var o ensureOptions
	cmd := &cobra.Command{
		Use:   "ensure --port P [--health none|tcp|http://...] [--name N] [--cwd DIR] [--timeout D] [--linger D] [--memory-max SIZE] [--cpu-max CPUS] [--pids-max N] [--sandbox] [--allow-read P] [--allow-write P] [--allow-env V] [--network none|all] -- CMD [ARG...]",
		Short: "Start a shared port-bound server unless a healthy one runs; return once it is healthy",
		Long: `ensure returns 0 once a healthy server owns the port, starting CMD only if none
does. Concurrent calls for one port start one server and all wait for its
readiness. The server is shared across sessions: stdin /dev/null, output in
<state>/logs/<name>-<port>.log, restarted with backoff when it crashes or turns
unhealthy, stopped when the last session that ensured it has ended and the
linger has passed. A port held by a process supervisor does not own is
reported, never fought over (unless --adopt-foreign and it is healthy).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := commandAfterDash(cmd, args, "ensure: the server command", "supervisor ensure --port P -- CMD [ARG...]"); err != nil {
				return err
			}
			if !cmd.Flags().Changed("port") {
				return &hintError{err: errors.New("ensure: --port is required"), hint: "supervisor ensure --port P -- CMD [ARG...]"}
			}
			if o.port < 1 || o.port > 65535 {
				return fmt.Errorf("--port %d: want a TCP port from 1 to 65535", o.port)
			}
			if _, err := health.Parse(o.health); err != nil {
				return err
			}
			for flag, d := range map[string]time.Duration{"--timeout": o.timeout, "--linger": o.linger, "--interval": o.interval} {
				if d < 0 {
					return fmt.Errorf("%s %v: must not be negative", flag, d)
				}
			}
			if err := checkGrace(o.grace); err != nil {
				return err
			}
			if o.interval > 0 && o.interval < 10*time.Millisecond {
				return fmt.Errorf("--interval %v: at least 10ms (health checks are not free)", o.interval)
			}
			if o.session != "" {
				if err := session.ValidateID(o.session); err != nil {
					return fmt.Errorf("--session: %w", err)
				}
			}
			p, err := paths()
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find this binary: %w", err)
			}
			limits, err := o.limits.parse()
			if err != nil {
				return err
			}
			sb, noSandbox, err := o.sandbox.parse(cmd)
			if err != nil {
				return err
			}
			rr, err := leanrun.NewRequest(leanrun.Spec{Argv: args, Name: o.name, Dir: o.cwd, Session: o.session, Grace: o.grace, Env: os.Environ(), Limits: limits,
				Sandbox: sb, NoSandbox: noSandbox})
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("health") {
				o.health = "" // the daemon's: the config file's [servers.NAME] health, else tcp
			} else if o.health == "" {
				o.health = "none"
			}
			req := api.EnsureRequest{RunRequest: rr, Port: o.port, Health: o.health,
				TimeoutMS: api.Millis(o.timeout), LingerMS: api.Millis(o.linger), IntervalMS: api.Millis(o.interval),
				AdoptForeign: o.adoptForeign}
			// The readiness wait happens in the daemon; give it room.
			wait := o.timeout
			if wait == 0 {
				wait = settings.Defaults().ReadyTimeout
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait+30*time.Second)
			defer cancel()
			c, err := client.EnsureRunning(ctx, exe, p, os.Environ())
			if err != nil {
				return fmt.Errorf("reach the daemon: %w", err)
			}
			defer c.Close()
			var res api.Ensured
			if err := c.Call(api.TypeEnsure, &req, &res); err != nil {
				return err
			}
			if o.json {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			// The id and pid first, as scripts read them; then whether this
			// call started the server or joined the one already running.
			how := "joined"
			if res.Started {
				how = "started"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %d %s: %s on port %d\n", res.ID, res.PID, how, res.Name, res.Port)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.port, "port", 0, "TCP port the server listens on (required)")
	f.StringVar(&o.health, "health", "tcp", "none, tcp (connect to the port) or an http:// URL answering 2xx")
	f.StringVar(&o.name, "name", "", "server name, also its log's name (default: the command's base name)")
	f.StringVar(&o.cwd, "cwd", "", "the server's working directory (default: the current one)")
	f.StringVar(&o.session, "session", "", "the session taking a reference (default: the caller's host)")
	f.DurationVar(&o.timeout, "timeout", 0, "how long to wait for readiness (default 30s)")
	f.DurationVar(&o.linger, "linger", 0, "how long the server outlives its last session (default 30s)")
	f.DurationVar(&o.interval, "interval", 0, "liveness check period (default 10s)")
	f.DurationVar(&o.grace, "grace", 0, "SIGTERM grace before SIGKILL when the server is stopped (default 5s)")
	f.BoolVar(&o.adoptForeign, "adopt-foreign", false, "take over a process already listening on the port if its health check passes")
	f.BoolVar(&o.json, "json", false, "print JSON")
	o.limits.add(cmd)
	o.sandbox.add(cmd)
	return cmd
}
