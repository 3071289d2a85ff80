package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/internal/config"
	"github.com/seed-86a41135/supervisor/internal/launcher"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/spawn"
)

func newSandboxCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "What a server's sandbox would allow, before running it",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newSandboxCheckCommand(), newSandboxLearnCommand())
	return cmd
}

func newSandboxCheckCommand() *cobra.Command {
	var (
		name, cwd string
		flags     sandboxFlags
	)
	cmd := &cobra.Command{
		Use:   "check [--name N] [--cwd DIR] [--sandbox] [--allow-read P] [--allow-write P] [--allow-env V] [--network none|all|HOST:PORT,...] -- CMD [ARG...]",
		Short: "Dry-run a server's sandbox: the rules, environment and network it would get, and whether this machine enforces them",
		Long: `check plans the sandbox ` + "`supervisor run`" + ` would give CMD, from these flags over the
config file's [servers.NAME] over its top level, as the daemon would: the paths
it may read and write, the secrets closed to it, the variables of this
environment it would keep, its network, and what this kernel can enforce. It
runs nothing. It exits 0 when the sandbox can be had here, 125 when a run
would be refused (and says why), and 1 when the config sandboxes nothing for
this server.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := commandAfterDash(cmd, args, "sandbox check: the server command", "supervisor sandbox check [--name N] -- CMD [ARG...]"); err != nil {
				return err
			}
			spec, off, err := flags.parse(cmd)
			if err != nil {
				return err
			}
			if spec == nil && !off {
				spec = &sandbox.Spec{} // the config decides
			}
			if name == "" {
				name = filepath.Base(args[0])
			}
			merged, err := configuredSandbox(cmd, spec, off, name)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			caps := sandbox.Support()
			fmt.Fprintf(w, "enforced here: %s\n", caps)
			if merged == nil {
				fmt.Fprintf(w, "%s: no sandbox (pass --sandbox, or set sandbox = true in the config)\n", name)
				return &exitError{code: 1}
			}
			if err := caps.Enforceable(*merged); err != nil {
				return &exitError{code: 125, err: err}
			}
			return printPlan(w, *merged, name, cwd, args)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "server name: its [servers.NAME] in the config (default: the command's base name)")
	cmd.Flags().StringVar(&cwd, "cwd", "", "the server's working directory (default: the current one)")
	flags.add(cmd)
	return cmd
}

// configuredSandbox is server name's policy as the daemon would merge it:
// spec (its flags; off for --sandbox=false) over the config file's
// [servers.NAME] over its top level. nil for none.
func configuredSandbox(cmd *cobra.Command, spec *sandbox.Spec, off bool, name string) (*sandbox.Spec, error) {
	e, err := config.Load(os.Getenv)
	if err != nil {
		return nil, err
	}
	e.WriteWarnings(cmd.ErrOrStderr())
	return settings.MergeSandbox(spec, off, e.Settings.Servers[name], e.Settings.Sandbox), nil
}

// plan is a sandbox planned as the daemon would plan it: for the command
// as it runs (flattened, its program resolved), in this environment.
type plan struct {
	ctx   sandbox.Context
	rules sandbox.Rules
	env   []string // the environment, flattened
	kept  []string // what of it the server keeps
}

// given are the variables its host gave the server by name (learn), nil
// where that is not known (check).
func planFor(spec sandbox.Spec, cwd string, argv []string, given []string) (plan, error) {
	var err error
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return plan{}, err
		}
	}
	if cwd, err = filepath.Abs(cwd); err != nil {
		return plan{}, err
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return plan{}, err
	}
	p, err := paths()
	if err != nil {
		return plan{}, err
	}
	env := os.Environ()
	if fl, ok, _ := launcher.Flatten(argv, cwd, env); ok {
		argv, env = fl.Argv, fl.Env
	}
	argv = append([]string(nil), argv...)
	pathEnv, _ := proc.EnvValue(env, "PATH")
	if path, err := spawn.Resolve(argv[0], pathEnv, cwd); err == nil {
		argv[0] = path
	}
	ctx := sandbox.Context{Home: home, Cwd: cwd, Argv: argv, StateDir: p.StateDir}
	rules, kept, err := sandbox.Prepare(spec, ctx, env, given)
	if err != nil {
		return plan{}, &exitError{code: 125, err: err}
	}
	return plan{ctx: ctx, rules: rules, env: env, kept: kept}, nil
}

// printPlan plans spec for argv as the daemon would and prints the plan.
func printPlan(w io.Writer, spec sandbox.Spec, name, cwd string, argv []string) error {
	pl, err := planFor(spec, cwd, argv, nil)
	if err != nil {
		return err
	}
	ctx, rules, env, kept := pl.ctx, pl.rules, pl.env, pl.kept
	argv = ctx.Argv
	fmt.Fprintf(w, "%s: %s\n", name, rules.Summary(len(kept), len(env)))
	fmt.Fprintf(w, "command: %s\n", strings.Join(argv, " "))
	if rules.Preset != "" {
		fmt.Fprintf(w, "preset:  %s\n", rules.Preset)
	}
	for _, x := range []struct {
		what  string
		paths []string
	}{{"read", rules.Read}, {"write", rules.Write}} {
		for _, path := range x.paths {
			fmt.Fprintf(w, "%-7s  %s\n", x.what+":", path)
		}
	}
	for _, d := range sandbox.Denied(ctx) {
		if _, err := os.Lstat(d); err == nil && !rules.Covers(d) {
			fmt.Fprintf(w, "closed:  %s\n", d)
		}
	}
	var names, dropped []string
	for _, kv := range kept {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "SUPERVISOR_") && !slices.Contains(names, k) {
			dropped = append(dropped, k)
		}
	}
	fmt.Fprintf(w, "env:     %s\n", strings.Join(names, " "))
	fmt.Fprintf(w, "hidden:  %s (and whatever its host gives it by name is kept)\n", strings.Join(dropped, " "))
	net := "all"
	switch {
	case rules.Hosts != nil:
		var hs []string
		for _, h := range rules.Hosts {
			hs = append(hs, h.String())
		}
		net = strings.Join(hs, " ") + ", through the egress proxy (HTTP_PROXY, HTTPS_PROXY and ALL_PROXY point to it); nothing else"
	case rules.NoNetwork:
		net = "none"
	}
	fmt.Fprintf(w, "network: %s\n", net)
	return nil
}
