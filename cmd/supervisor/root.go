package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/shutdown/outcome"
)

// exitError carries the exit status a command wants; main prints err.
type exitError struct {
	code int
	err  error // nil: nothing to print
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// hintError adds a hint line under an error.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

// execute runs the CLI. inherited are the fds this process inherited
// without close-on-exec (already marked so); a daemon closes them.
func execute(args []string, inherited []int) int {
	var root *cobra.Command
	if runOnly(args) {
		root = newRunRoot()
	} else {
		root = newRootCommand(inherited)
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	code := 1
	if cmd != nil && cmd.Name() == "run" {
		code = 125 // run's own status space: anything from the supervisor is 125
	}
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	var ue *usageError
	if (errors.As(err, &ue) || (cmd != nil && isUsageError(err))) && code == 1 {
		code = 2 // run keeps 125: its status space is the server's
	}
	if cmd != nil {
		err = friendlierArgs(cmd, err)
	}
	fmt.Fprintf(os.Stderr, "supervisor: %v\n", err)
	var he *hintError
	switch {
	case errors.As(err, &he) && he.hint != "":
		fmt.Fprintf(os.Stderr, "hint: %s\n", he.hint)
	case errors.As(err, &ee):
	case cmd != nil && isUsageError(err):
		fmt.Fprintf(os.Stderr, "hint: see `%s --help`\n", cmd.CommandPath())
	}
	return code
}

// runOnly says whether args are a plain `supervisor run`, every host's
// server start: it builds only its own command (newRunRoot), as the other
// commands' flags and help cost about a millisecond at each start. A run
// that asks for help gets the whole tree.
func runOnly(args []string) bool {
	if len(args) == 0 || args[0] != "run" {
		return false
	}
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || strings.HasPrefix(a, "--help=") {
			return false
		}
	}
	return true
}

func newRunRoot() *cobra.Command {
	root := newBareRoot()
	root.AddCommand(newRunCommand())
	return root
}

func newBareRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "supervisor",
		Short:         "A process supervisor for AI agent hosts' MCP servers",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       api.Version,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{hintError{err: err, hint: fmt.Sprintf("see `%s --help`", c.CommandPath())}}
	})
	return root
}

// usageError is a command line this CLI cannot take: an unknown command or
// flag, a missing argument. It exits 2, as getopt's users do, so a script
// (a host's hook line) can tell a typo from a command that ran and failed.
type usageError struct{ hintError }

func (e *usageError) Unwrap() error { return &e.hintError }

// refuseUnknownSubcommands makes every command that only groups others
// (`session`, `breaker`, `config`) refuse an argument that names none of
// them, with cobra's suggestion, where cobra would print the group's help
// and exit 0: `supervisor session ned` in a hook line would fail silently.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasParent() || !c.HasSubCommands() || c.Runnable() {
		return // the root's own check is cobra's
	}
	c.Args = cobra.ArbitraryArgs
	if !strings.Contains(c.Use, " ") {
		c.Use += " COMMAND" // runnable now, it would read as taking nothing
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2 // cobra's own default, set only where it looks
		}
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return &usageError{hintError{err: errors.New(msg), hint: fmt.Sprintf("see `%s --help`", c.CommandPath())}}
	}
}

func newRootCommand(inherited []int) *cobra.Command {
	root := newBareRoot()
	root.AddCommand(
		newRunCommand(),
		newPsCommand(),
		newTopCommand(),
		newSessionsCommand(),
		newSessionCommand(),
		newStopCommand(),
		newRestartCommand(),
		newInspectCommand(),
		newStatusCommand(),
		newDaemonCommand(inherited),
		newVersionCommand(),
		newDemoCommand(),
		newFixtureCommand(),
		newBrokerCommand(),
		newLogWriterCommand(),
		newInitCommand(),
		newEnsureCommand(),
		newBreakerCommand(),
		newLogsCommand(),
		newDoctorCommand(),
		newEventsCommand(),
		newHostsCommand(),
		newInstallCommand(),
		newUninstallCommand(),
		newConfigCommand(),
		newSandboxCommand(),
		newMetricsCommand(),
	)
	withCompletion(root)
	refuseUnknownSubcommands(root)
	finishHelpWhenShown(root)
	return root
}

// finishHelpWhenShown runs finishHelp the first time any help or usage is
// rendered, not at every start: it rewrites every command's usage line
// through a regexp, about a millisecond that `ps` or `status` would pay
// for text they never print.
func finishHelpWhenShown(root *cobra.Command) {
	var once sync.Once
	finish := func() { once.Do(func() { finishHelp(root) }) }
	help, usage := root.HelpFunc(), root.UsageFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		finish()
		help(c, args)
	})
	root.SetUsageFunc(func(c *cobra.Command) error {
		finish()
		return usage(c)
	})
}

func paths() (api.Paths, error) { return api.ResolvePaths(os.Getenv) }

// dial connects to a running daemon without starting one: listing and
// control commands never start the daemon.
func dial() (*api.Client, error) {
	p, err := paths()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := api.Dial(ctx, p.Socket)
	if errors.Is(err, api.ErrNotRunning) {
		return nil, &hintError{err: fmt.Errorf("%w (no daemon on %s)", api.ErrNotRunning, p.Socket),
			hint: "start it with `supervisor daemon`, or run a server with `supervisor run -- CMD`"}
	}
	return c, err
}

// call runs one request against the running daemon.
func call(typ string, req, resp any) error {
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Call(typ, req, resp)
}

func checkGrace(d time.Duration) error {
	if err := outcome.CheckGrace(d); err != nil {
		return &hintError{err: fmt.Errorf("--%w", err), hint: fmt.Sprintf("give a --grace from 0s to %v", shutdown.MaxGrace)}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := newJSONEncoder(w)
	return enc.Encode(v)
}

// missingArg names what a command's missing argument is and where to find
// one, for cobra's "accepts 1 arg(s), received 0", which says neither.
var missingArg = map[string][2]string{
	"supervisor stop":          {"a process id or name", "supervisor ps"},
	"supervisor session end":   {"a session id (or --hook)", "supervisor sessions"},
	"supervisor breaker reset": {"a breaker key or server name", "supervisor breaker list"},
}

// friendlierArgs turns cobra's missing-argument error into one that says
// what the command needs and where to look it up.
func friendlierArgs(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "received 0") {
		return err
	}
	if m, ok := missingArg[cmd.CommandPath()]; ok {
		return &hintError{err: fmt.Errorf("%s needs %s: see `%s`", cmd.Name(), m[0], m[1])}
	}
	return &hintError{err: fmt.Errorf("%s needs an argument", cmd.Name()), hint: fmt.Sprintf("see `%s --help`", cmd.CommandPath())}
}

// isUsageError recognizes cobra's argument and command errors, which carry
// no hint of their own.
func isUsageError(err error) bool {
	msg := err.Error()
	for _, s := range []string{"arg(s)", "unknown command", "requires at least", "accepts "} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// commandAfterDash checks that a command to run was given after "--" (and
// only there: a command before it would have its flags taken as ours).
func commandAfterDash(cmd *cobra.Command, args []string, what, usage string) error {
	if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
		return &hintError{err: fmt.Errorf("%s must follow --", what), hint: usage}
	}
	return nil
}
