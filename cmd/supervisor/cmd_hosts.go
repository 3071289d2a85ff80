package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/internal/hosts"
)

// hostFile is one line of `hosts --json`.
type hostFile struct {
	Host      string        `json:"host"`
	Title     string        `json:"title"`
	File      string        `json:"file"`
	Project   bool          `json:"project"`
	Format    hosts.Format  `json:"format"`
	Wrapped   int           `json:"wrapped"`
	Unwrapped int           `json:"unwrapped"`
	Remote    int           `json:"remote"`
	NoCommand int           `json:"no_command"`
	Servers   []hosts.Entry `json:"servers"`
	// Problems are wrapper commands the host cannot start (see
	// hosts.Unresolvable), each with its fix.
	Problems []hostProblem `json:"problems,omitempty"`
	Error    string        `json:"error,omitempty"`
}

type hostProblem struct {
	hosts.CommandIssue
	Fix string `json:"fix"`
}

func newHostsCommand() *cobra.Command {
	var asJSON bool
	var project string
	cmd := &cobra.Command{
		Use:   "hosts [--json] [--project DIR]",
		Short: "List the agent hosts found here, their config files and how many servers are wrapped",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := hosts.Options{}
			if project != "" {
				var err error
				if opts.Project, err = projectDir(project); err != nil {
					return err
				}
			}
			rs, err := hosts.Status(hosts.All(), opts)
			if err != nil {
				return err
			}
			titles := map[string]string{}
			for _, h := range hosts.All() {
				titles[h.Name] = h.Title
			}
			out := []hostFile{}
			for _, r := range rs {
				if !r.Exists {
					continue
				}
				f := hostFile{Host: r.File.Host, Title: titles[r.File.Host], File: r.File.Path, Project: r.File.Project,
					Format: r.File.Format, Wrapped: r.Count(hosts.IsWrapped), Unwrapped: r.Count(hosts.IsUnwrapped),
					Remote: r.Count(hosts.Remote), NoCommand: r.Count(hosts.NoCommand), Servers: r.Entries}
				if f.Servers == nil {
					f.Servers = []hosts.Entry{}
				}
				if r.Err != nil {
					f.Error = r.Err.Error()
				}
				for _, c := range hosts.Unresolvable(r, os.Getenv("PATH")) {
					f.Problems = append(f.Problems, hostProblem{CommandIssue: c, Fix: c.Fix(r.File.Host)})
				}
				out = append(out, f)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			if len(out) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no agent host config files found")
				return nil
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "HOST\tWRAPPED\tUNWRAPPED\tREMOTE\tFILE")
			for _, f := range out {
				if f.Error != "" {
					fmt.Fprintf(tw, "%s\t-\t-\t-\t%s\n", f.Host, clean(f.Error))
					continue
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", f.Host, f.Wrapped, f.Unwrapped, f.Remote, clean(f.File))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, f := range out {
				for _, p := range f.Problems {
					fmt.Fprintf(cmd.OutOrStdout(), "\nproblem: %s %s: wrapped server(s) %s run %q, which the host cannot start: %s\n  fix: %s\n",
						f.Host, clean(f.File), clean(strings.Join(p.Servers, ", ")), p.Command, clean(p.Problem), clean(p.Fix))
				}
			}
			for _, f := range out {
				if f.Unwrapped > 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "\nwrap them with `supervisor install HOST` (or --all); --dry-run shows the change first")
					break
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&project, "project", "", "also the project files in `DIR`")
	return cmd
}
