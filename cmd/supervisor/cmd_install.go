package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/internal/hosts"
)

// installOptions are the flags install and uninstall share.
type installOptions struct {
	all, dryRun, hooks, asJSON, force bool
	project                           string
	share, lazy, sandbox              []string
}

func (o *installOptions) addFlags(cmd *cobra.Command, verb string) {
	cmd.Flags().BoolVar(&o.all, "all", false, verb+" every known host")
	cmd.Flags().StringVar(&o.project, "project", "", "also the project files in `DIR` (.mcp.json, .vscode/mcp.json, ...)")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print a unified diff of each change and write nothing")
	cmd.Flags().BoolVar(&o.hooks, "hooks", false, "also the SessionEnd hooks of Claude Code and Gemini CLI")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print what was done to each file as JSON (notes, warnings and diffs go to stderr)")
}

// resolve turns the arguments into hosts and hosts.Options.
func (o *installOptions) resolve(cmd *cobra.Command, args []string) ([]hosts.Host, hosts.Options, error) {
	var hs []hosts.Host
	var err error
	switch {
	case o.all && len(args) > 0:
		return nil, hosts.Options{}, &hintError{err: errors.New("name hosts or give --all, not both"), hint: fmt.Sprintf("see `%s --help`", cmd.CommandPath())}
	case o.all:
		hs = hosts.All()
	case len(args) == 0:
		return nil, hosts.Options{}, &hintError{err: errors.New("no host given"),
			hint: fmt.Sprintf("name one or more of %s, or give --all; `supervisor hosts` shows what is on this machine", strings.Join(hosts.Names(), ", "))}
	default:
		if hs, err = hosts.Lookup(args); err != nil {
			return nil, hosts.Options{}, &hintError{err: err, hint: "`supervisor hosts` shows what is on this machine"}
		}
	}
	opts := hosts.Options{DryRun: o.dryRun, Hooks: o.hooks, Force: o.force, Share: o.share, Lazy: o.lazy, Sandbox: o.sandbox, Out: cmd.OutOrStdout(), Warn: cmd.ErrOrStderr()}
	if o.asJSON {
		opts.Out = cmd.ErrOrStderr() // stdout stays one JSON document
	}
	if o.project != "" {
		if opts.Project, err = projectDir(o.project); err != nil {
			return nil, hosts.Options{}, err
		}
	}
	return hs, opts, nil
}

func projectDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--project %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("--project %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("--project %s: not a directory", dir)
	}
	return abs, nil
}

func newInstallCommand() *cobra.Command {
	var o installOptions
	cmd := &cobra.Command{
		Use:   "install [HOST...|--all] [--project DIR] [--dry-run] [--hooks] [--force] [--json]",
		Short: "Wrap the stdio MCP servers in agent host configs in `supervisor run`",
		Long: `Wrap every stdio MCP server in the named agent hosts' config files:
{command: C, args: A} becomes {command: S, args: ["run", "--name", NAME, "--", C, A...]},
every other field untouched; remote servers are left alone. S is this binary's
absolute path in per-user files and the bare name "supervisor" in project files
meant to be committed (and when this binary runs from a temporary place).
The bare name must run this binary: when ` + "`supervisor`" + ` on PATH is missing or
another file, install refuses and writes nothing (--force writes anyway,
with a warning). Each changed file gets a backup beside it
(<file>.supervisor-backup); ` + "`supervisor uninstall`" + ` puts everything back.

Hosts: ` + strings.Join(hosts.Names(), ", "),
		RunE: func(cmd *cobra.Command, args []string) error {
			hs, opts, err := o.resolve(cmd, args)
			if err != nil {
				return err
			}
			rs, err := hosts.Install(hs, opts)
			var be *hosts.BareCommandError
			if errors.As(err, &be) {
				return &hintError{err: err, hint: be.Fix()}
			}
			if err != nil {
				return err
			}
			return report(cmd, rs, o, len(args) > 0, true)
		},
	}
	o.addFlags(cmd, "wrap the servers of")
	cmd.Flags().StringSliceVar(&o.share, "share", nil, "wrap these servers (by name, comma-separated or repeated) shared: one process for every session (run --share)")
	cmd.Flags().StringSliceVar(&o.lazy, "lazy", nil, "wrap these servers (by name, comma-separated or repeated) lazy: started on the first call their cache cannot answer (run --lazy)")
	cmd.Flags().StringSliceVar(&o.sandbox, "sandbox", nil, "wrap these servers (by name, comma-separated or repeated) sandboxed: least privilege, and what their host config's env block gives them (run --sandbox; docs/sandbox.md)")
	cmd.Flags().BoolVar(&o.force, "force", false, "write the bare name `supervisor` even when PATH would not find this binary under it")
	return cmd
}

func newUninstallCommand() *cobra.Command {
	var o installOptions
	cmd := &cobra.Command{
		Use:   "uninstall [HOST...|--all] [--project DIR] [--dry-run] [--hooks] [--json]",
		Short: "Put agent host configs back the way they were before install",
		Long: `Unwrap every server that install wrapped; a file that is exactly what install
made of its backup gets the backup back, byte for byte.

Hosts: ` + strings.Join(hosts.Names(), ", "),
		RunE: func(cmd *cobra.Command, args []string) error {
			hs, opts, err := o.resolve(cmd, args)
			if err != nil {
				return err
			}
			rs, err := hosts.Uninstall(hs, opts)
			if err != nil {
				return err
			}
			return report(cmd, rs, o, len(args) > 0, false)
		},
	}
	o.addFlags(cmd, "unwrap the servers of")
	return cmd
}

// report prints one line per file that exists (and, for hosts named on the
// command line, says when none of their files does); file errors go to
// stderr and make the exit status 1.
func report(cmd *cobra.Command, rs []hosts.Result, o installOptions, named, install bool) error {
	if o.asJSON {
		return reportJSON(cmd, rs, o)
	}
	w := cmd.OutOrStdout()
	found := map[string]bool{}
	failed := 0
	for _, r := range rs {
		if !r.Exists {
			continue
		}
		found[r.File.Host] = true
		if r.Err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "supervisor: %v\n", r.Err)
			failed++
			continue
		}
		fmt.Fprintf(w, "%s %s: %s\n", r.File.Host, r.File.Path, summary(r, o.dryRun, install))
	}
	if named {
		seen := map[string]bool{}
		for _, r := range rs {
			if !found[r.File.Host] && !seen[r.File.Host] {
				seen[r.File.Host] = true
				fmt.Fprintf(w, "%s: no config file (looked for %s)\n", r.File.Host, strings.Join(pathsOf(rs, r.File.Host), ", "))
			}
		}
	} else if len(found) == 0 {
		fmt.Fprintln(w, "no agent host config files found (see `supervisor hosts`)")
	}
	// A running host read its config at start: it goes on starting the
	// servers the old way until it reads it again.
	var changed []string
	for _, r := range rs {
		if r.Changed && r.Err == nil && !o.dryRun && !slices.Contains(changed, r.File.Host) {
			changed = append(changed, r.File.Host)
		}
	}
	if len(changed) > 0 {
		verb := "start their servers through supervisor"
		if !install {
			verb = "start their servers directly again"
		}
		fmt.Fprintf(w, "restart %s so they %s (in Claude Code, /mcp reconnects a server)\n", strings.Join(changed, ", "), verb)
	}
	if failed > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// installFile is one file of `install --json` and `uninstall --json`.
type installFile struct {
	Host    string `json:"host"`
	Path    string `json:"path"`
	Project bool   `json:"project"`
	Hook    bool   `json:"hook"`
	Exists  bool   `json:"exists"`
	// Changed: written; with --dry-run, would be.
	Changed bool `json:"changed"`
	// Command is what install wraps the servers in ("" for uninstall).
	Command string        `json:"command,omitempty"`
	Servers []hosts.Entry `json:"servers"`
	Error   string        `json:"error,omitempty"`
}

// installReport is the document `install --json` and `uninstall --json`
// print: every file looked at, whether or not it exists.
type installReport struct {
	DryRun bool          `json:"dry_run"`
	Files  []installFile `json:"files"`
}

// reportJSON prints rs as one JSON document; a file's error is in it and
// makes the exit status 1.
func reportJSON(cmd *cobra.Command, rs []hosts.Result, o installOptions) error {
	rep := installReport{DryRun: o.dryRun, Files: []installFile{}}
	failed := false
	for _, r := range rs {
		f := installFile{Host: r.File.Host, Path: r.File.Path, Project: r.File.Project, Hook: r.File.Hook,
			Exists: r.Exists, Changed: r.Changed, Command: r.Command, Servers: r.Entries}
		if f.Servers == nil {
			f.Servers = []hosts.Entry{}
		}
		if r.Err != nil {
			f.Error = r.Err.Error()
			failed = true
		}
		rep.Files = append(rep.Files, f)
	}
	if err := writeJSON(cmd.OutOrStdout(), rep); err != nil {
		return err
	}
	if failed {
		return &exitError{code: 1}
	}
	return nil
}

func pathsOf(rs []hosts.Result, host string) []string {
	var out []string
	for _, r := range rs {
		if r.File.Host == host {
			out = append(out, r.File.Path)
		}
	}
	return out
}

// summary says in a line what happened to a file's servers.
func summary(r hosts.Result, dryRun, install bool) string {
	would := func(s string) string {
		if dryRun {
			return "would be " + s
		}
		return s
	}
	if r.File.Hook {
		switch {
		case r.Count(hosts.Wrapped) > 0:
			return would("SessionEnd hook added")
		case r.Count(hosts.Unwrapped) > 0:
			return would("SessionEnd hook removed")
		case install:
			return "SessionEnd hook already there"
		}
		return "no SessionEnd hook of ours"
	}
	var parts []string
	add := func(a hosts.Action, what string) {
		var names []string
		for _, e := range r.Entries {
			if e.Action == a {
				names = append(names, e.Name)
			}
		}
		if len(names) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", what, strings.Join(names, ", ")))
		}
	}
	if install {
		add(hosts.Wrapped, would("wrapped"))
		add(hosts.Repinned, would("re-pinned to this binary"))
		add(hosts.Already, "already wrapped")
	} else {
		add(hosts.Unwrapped, would("unwrapped"))
		add(hosts.KeptWrapped, "wrapped before install, kept")
		add(hosts.NotWrapped, "not wrapped")
	}
	add(hosts.Remote, "left alone (remote)")
	add(hosts.NoCommand, "left alone (no command)")
	if len(parts) == 0 {
		parts = append(parts, "no servers")
	}
	if !r.Changed {
		parts = append(parts, "unchanged")
	}
	return strings.Join(parts, "; ")
}
