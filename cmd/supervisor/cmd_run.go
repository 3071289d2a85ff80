package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/leanrun"

	"github.com/seed-86a41135/supervisor/internal/shim"
	"github.com/seed-86a41135/supervisor/session"
)

type runOptions struct {
	name         string
	cwd          string
	session      string
	grace        time.Duration
	maxInstances int
	frontFd      int
	share        bool
	lazy         bool
	flatten      bool
	idle         time.Duration
	limits       limitFlags
	sandbox      sandboxFlags
}

func newRunCommand() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [--name N] [--cwd DIR] [--session ID] [--grace D] [--share] [--lazy] [--idle D] [--flatten=false] [--memory-max SIZE] [--cpu-max CPUS] [--pids-max N] [--sandbox] [--allow-read P] [--allow-write P] [--allow-env V] [--network none|all|HOST:PORT,...] -- CMD [ARG...]",
		Short: "Run an MCP server under the daemon on this process's stdio (the shim)",
		Long: `run hands this process's stdin, stdout and stderr to the per-user daemon,
which starts CMD on them directly, tracks it in the session of the host that
launched run, and stops its whole tree when the host dies. run exits with the
server's status: its code, 128+N for signal N, 127 not found, 126 not
executable, 125 for a supervisor error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := commandAfterDash(cmd, args, "run: the server command", "supervisor run [--name N] -- CMD [ARG...]"); err != nil {
				return err
			}
			if err := checkGrace(o.grace); err != nil {
				return err
			}
			if o.session != "" {
				if err := session.ValidateID(o.session); err != nil {
					return fmt.Errorf("--session: %w", err)
				}
			} else if v := os.Getenv(session.EnvSession); v != "" {
				if err := session.ValidateID(v); err != nil {
					return fmt.Errorf("%s: %w", session.EnvSession, err)
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
			if o.idle < 0 {
				return fmt.Errorf("--idle %v: must be 0 (never) or more", o.idle)
			}
			var maxInst *int
			if cmd.Flags().Changed("max-instances") {
				if o.maxInstances < 0 {
					return fmt.Errorf("--max-instances %d: must be 0 (no cap) or more", o.maxInstances)
				}
				maxInst = &o.maxInstances
			}
			limits, err := o.limits.parse()
			if err != nil {
				return err
			}
			sb, noSandbox, err := o.sandbox.parse(cmd)
			if err != nil {
				return err
			}
			localAfter, err := api.LocalAfter(os.Getenv)
			if err != nil {
				return err
			}
			code, err := shim.Run(context.Background(), shim.Options{
				Spec: leanrun.Spec{
					Argv: args, Name: o.name, Dir: o.cwd, Session: o.session, Grace: o.grace, MaxInstances: maxInst,
					Share: o.share, NoShare: cmd.Flags().Changed("share") && !o.share, Lazy: o.lazy, Idle: o.idle, NoFlatten: !o.flatten, Limits: limits, Env: os.Environ(),
					Sandbox: sb, NoSandbox: noSandbox,
				},
				Exe: exe, Paths: p, FrontFd: o.frontFd, LocalAfter: localAfter,
			})
			if err != nil {
				return &exitError{code: code, err: err}
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.name, "name", "", "server name (default: the command's base name)")
	cmd.Flags().StringVar(&o.cwd, "cwd", "", "the server's working directory (default: the current one)")
	cmd.Flags().StringVar(&o.session, "session", "", "session id instead of the host-derived one ([A-Za-z0-9._-]{1,128}; also $SUPERVISOR_SESSION)")
	cmd.Flags().DurationVar(&o.grace, "grace", 0, "SIGTERM grace before SIGKILL when stopping (default 5s)")
	cmd.Flags().BoolVar(&o.share, "share", false, "share one server process with every client whose command, directory and environment match (design §11: the broker)")
	cmd.Flags().BoolVar(&o.lazy, "lazy", false, "answer the handshake and list calls from a cache and start the server on the first other request (design §11)")
	cmd.Flags().BoolVar(&o.flatten, "flatten", true, "run an npx or npm exec command as the program it would run, found offline in the project or npx's cache, so npm does not stay resident (--flatten=false keeps it)")
	cmd.Flags().DurationVar(&o.idle, "idle", 0, "stop the server after this long with nothing in flight, and start it again on the next request (0: never)")
	o.limits.add(cmd)
	o.sandbox.add(cmd)
	cmd.Flags().IntVar(&o.maxInstances, "max-instances", 1, "live instances of --name per session; the newest wins, older ones are stopped (0: no cap)")
	// The lean entry's hand-over after a lazy run's front: a flag, not an
	// environment variable, so a binary of another version that cannot
	// take it refuses it instead of dropping what the front read.
	cmd.Flags().IntVar(&o.frontFd, leanrun.FrontFdFlag, -1, "the memfd holding what the lean entry's front read (set by supervisor-run)")
	_ = cmd.Flags().MarkHidden(leanrun.FrontFdFlag) // fails only for a flag not defined
	return cmd
}

// limitFlags are --memory-max, --cpu-max and --pids-max.
type limitFlags struct{ memory, cpu, pids string }

func (f *limitFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.memory, "memory-max", "", "bound the server's whole tree to this much memory (512M, 2G): past it the kernel's OOM killer ends it (needs cgroups; none lifts the config's)")
	cmd.Flags().StringVar(&f.cpu, "cpu-max", "", "bound the server's whole tree to this many CPUs (1, 0.5) (needs cgroups; none lifts the config's)")
	cmd.Flags().StringVar(&f.pids, "pids-max", "", "bound the server's whole tree to this many processes and threads: a fork past it fails (needs cgroups; none lifts the config's)")
}

// parse reads the flags; nil when none is set.
func (f limitFlags) parse() (*api.Limits, error) {
	var l api.Limits
	var err error
	if f.memory != "" {
		if l.MemoryMax, err = cgroup.ParseMemoryMax(f.memory); err != nil {
			return nil, fmt.Errorf("--memory-max: %w", err)
		}
	}
	if f.cpu != "" {
		if l.CPUMax, err = cgroup.ParseCPUMax(f.cpu); err != nil {
			return nil, fmt.Errorf("--cpu-max: %w", err)
		}
	}
	if f.pids != "" {
		if l.PidsMax, err = cgroup.ParsePidsMax(f.pids); err != nil {
			return nil, fmt.Errorf("--pids-max: %w", err)
		}
	}
	if l == (api.Limits{}) {
		return nil, nil
	}
	return &l, nil
}
