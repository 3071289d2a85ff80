package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/internal/doctor"
)

type doctorOptions struct {
	fix    bool
	asJSON bool
	// onlyPIDs is a hidden test seam: it limits the process checks, and so
	// what --fix may stop, to these PIDs. Tests on a shared machine plant
	// their own orphans and must neither judge nor stop anyone else's.
	onlyPIDs []int
}

func newDoctorCommand() *cobra.Command {
	var o doctorOptions
	cmd := &cobra.Command{
		Use:   "doctor [--fix] [--json]",
		Short: "Audit for leaked MCP servers, stale supervisor files, open breakers and shadow installs",
		Long: "Audit this machine for untracked MCP-looking processes whose host is gone, processes\n" +
			"carrying this instance's markers that the daemon has no record of, lock, socket and\n" +
			"pid files nobody owns, open circuit breakers, a daemon of another version, and more\n" +
			"than one `supervisor` on PATH. --fix stops orphans that name a known MCP package or\n" +
			"binary (a name that merely contains \"mcp\" is reported, never stopped) through the\n" +
			"stop cascade and removes stale files while no daemon runs; it touches nothing else. With --json\n" +
			"the findings are a JSON array on stdout and what --fix did goes to stderr.\n" +
			"Exit status 0: no problems left; 1: some remain.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, pid := range o.onlyPIDs {
				if pid <= 0 {
					return fmt.Errorf("--only-pid %d: must be a process id (1 or more)", pid)
				}
			}
			p, err := paths()
			if err != nil {
				return err
			}
			ctx := context.Background()
			d := &doctor.Doctor{Paths: p, OnlyPIDs: o.onlyPIDs}
			findings, err := d.Check(ctx)
			if err != nil {
				return fmt.Errorf("audit: %w", err)
			}
			var did []string
			if o.fix {
				did = d.Fix(ctx, findings)
			}
			w := cmd.OutOrStdout()
			if o.asJSON {
				// stdout stays one JSON document; what --fix did goes to stderr.
				for _, line := range did {
					fmt.Fprintln(cmd.ErrOrStderr(), line)
				}
				if err := writeJSON(w, findings); err != nil {
					return err
				}
			} else {
				printFindings(w, findings, did)
			}
			if doctor.Unfixed(findings) > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.fix, "fix", false, "stop provable orphans and remove stale files (only while no daemon runs)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the findings as a JSON array")
	cmd.Flags().IntSliceVar(&o.onlyPIDs, "only-pid", nil, "limit the process checks and --fix to this PID (repeatable; for tests)")
	_ = cmd.Flags().MarkHidden("only-pid") // fails only for a flag not defined, two lines up
	return cmd
}

// printFindings prints what --fix did, then one block per finding that
// remains.
func printFindings(w io.Writer, findings []doctor.Finding, did []string) {
	for _, line := range did {
		fmt.Fprintln(w, clean(line))
	}
	left := 0
	for _, f := range findings {
		if f.Fixed {
			continue
		}
		if left > 0 || len(did) > 0 {
			fmt.Fprintln(w)
		}
		left++
		head := string(f.Kind)
		if f.PID > 0 {
			head += fmt.Sprintf(" pid %d", f.PID)
		}
		if f.Path != "" {
			head += " " + f.Path
		}
		// Evidence quotes command lines and paths of processes anyone
		// may have started: escaped, they cannot move the cursor.
		fmt.Fprintln(w, clean(head))
		fmt.Fprintf(w, "  evidence: %s\n", clean(f.Evidence))
		fmt.Fprintf(w, "  fix:      %s\n", clean(f.Fix))
	}
	switch {
	case len(findings) == 0:
		fmt.Fprintln(w, "no problems found")
	case left == 0:
		fmt.Fprintln(w, "no problems left")
	}
}
