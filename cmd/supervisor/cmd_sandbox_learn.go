package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/internal/atomicfile"
	"github.com/seed-86a41135/supervisor/internal/leanrun"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// learnDrain is how long learning goes on after the server exits, for
// what it left running to finish.
const learnDrain = 2 * time.Second

func newSandboxLearnCommand() *cobra.Command {
	var (
		name, cwd, out string
		flags          sandboxFlags
	)
	cmd := &cobra.Command{
		Use:   "learn [--name N] [--cwd DIR] [--out FILE] [sandbox flags] -- CMD [ARG...]",
		Short: "Run a server unconfined, note every file and address it uses, and write the sandbox policy it needs",
		Long: `learn runs CMD as its host would, with this terminal's (or the host's) stdin and
stdout, and nothing denied. It notes each file the server and everything it
starts open, run, create or remove, and each address they connect to (a
seccomp listener: no privilege needed, Linux 5.0 and later). When the server
exits, it writes to --out (default: learned/NAME.toml in the state directory)
a [servers.NAME] section that allows what the server used beyond what every
sandboxed server gets (the plan ` + "`sandbox check`" + ` shows), and exits
with the server's status. Secrets it asked for are listed, never allowed.
The environment it keeps is the sandbox's, so what it learns is what a
sandboxed run will need. Put it in a host config in place of
` + "`supervisor run`" + ` for one session, then copy what it wrote into your config.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := commandAfterDash(cmd, args, "sandbox learn: the server command", "supervisor sandbox learn [--name N] -- CMD [ARG...]"); err != nil {
				return err
			}
			spec, _, err := flags.parse(cmd)
			if err != nil {
				return err
			}
			if name == "" {
				name = filepath.Base(args[0])
			}
			if spec == nil {
				spec = &sandbox.Spec{}
			}
			spec.Enabled = true // the baseline: what a sandbox gives it anyway
			merged, err := configuredSandbox(cmd, spec, false, name)
			if err != nil {
				return err
			}
			// What its host gave it by name (a host config's env block)
			// it keeps, as a sandboxed run does.
			pl, err := planFor(*merged, cwd, args, leanrun.Given(os.Environ(), os.Getppid()))
			if err != nil {
				return err
			}
			if out == "" {
				p, err := paths()
				if err != nil {
					return err
				}
				out = filepath.Join(p.StateDir, "learned", name+".toml")
			}
			if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
				return fmt.Errorf("sandbox learn: where the policy goes: %w", err)
			}
			code, learned, err := learnRun(pl)
			if err != nil {
				return &exitError{code: 125, err: fmt.Errorf("sandbox learn: %w", err)}
			}
			text := learned.TOML(name, pl.ctx.Home, strings.Join(args, " "))
			if err := atomicfile.Write(out, []byte(text), nil); err != nil {
				return &exitError{code: 125, err: fmt.Errorf("sandbox learn: write %s: %w", out, err)}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "supervisor: learnt %s's policy (%d read, %d write, %d addresses, %d secrets asked for): %s\n",
				name, len(learned.Read), len(learned.Write), len(learned.Hosts), len(learned.Secrets), out)
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "server name: its [servers.NAME] in the config, and in what is written (default: the command's base name)")
	cmd.Flags().StringVar(&cwd, "cwd", "", "the server's working directory (default: the current one)")
	cmd.Flags().StringVar(&out, "out", "", "where to write the learnt policy (default: learned/NAME.toml in the state directory)")
	flags.add(cmd)
	return cmd
}

// learnRun runs pl's command watched, with this process's stdio and the
// environment its sandbox keeps, passing on the signals a host ends it
// with, and returns its exit status and what it needed.
func learnRun(pl plan) (int, sandbox.Learned, error) {
	c := exec.Command(pl.ctx.Argv[0], pl.ctx.Argv[1:]...)
	c.Dir, c.Env = pl.ctx.Cwd, pl.kept
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := sandbox.Watch(ctx, c.Start)
	if err != nil {
		return 0, sandbox.Learned{}, err
	}
	served := l.Done()
	waited := make(chan error, 1)
	go func() { waited <- c.Wait() }()
	var werr error
	for done := false; !done; {
		select {
		case sig := <-sigs:
			_ = c.Process.Signal(sig)
		case werr = <-waited:
			done = true
		}
	}
	// What it left running may still be at work: a moment more, then
	// learning ends (their watched calls then fail, as the tree is done).
	var serr error
	select {
	case serr = <-served:
	case <-time.After(learnDrain):
		cancel()
		serr = <-served
	}
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(werr, &ee):
		code = ee.ExitCode()
		if code < 0 {
			code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
	case werr != nil:
		return 0, sandbox.Learned{}, werr
	}
	if serr != nil {
		return code, sandbox.Learned{}, serr
	}
	touched, hosts := l.Touched()
	return code, sandbox.Learn(pl.rules, sandbox.Denied(pl.ctx), pl.ctx.Home, touched, hosts), nil
}
