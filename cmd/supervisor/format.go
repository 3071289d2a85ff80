package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/shutdown"
)

func newJSONEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// clean shows a user-controlled string (a server name, argv, a session
// label) safely on a terminal: control characters are printed escaped
// (\x1b, \n) so a name cannot move the cursor, recolour or split a row.
// JSON output needs none of this: its encoder escapes them already.
func clean(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// pidOrDash shows a PID, or "-" for none (0: not started, or a record
// whose process is gone).
func pidOrDash[T ~int | ~int32 | ~int64](pid T) string {
	if pid <= 0 {
		return "-"
	}
	return fmt.Sprint(pid)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return clean(s)
}

func since(t time.Time, end *time.Time) string {
	if t.IsZero() {
		return "-"
	}
	stop := time.Now()
	if end != nil {
		stop = *end
	}
	return stop.Sub(t).Round(time.Second).String()
}

func shortCommand(argv []string) string {
	s := clean(strings.Join(argv, " "))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// printOutcomes is a stop's summary: a line per stopped server, then one
// per process of its tree with its command and how it ended, e.g.
//
//	p-1a2b3c4d5e fs: exited on SIGTERM
//	  4711  node server.js  exited on SIGTERM after 0.3s
func printOutcomes(w io.Writer, outs []shutdown.Outcome) {
	if len(outs) == 0 {
		fmt.Fprintln(w, "no live processes")
		return
	}
	for _, o := range outs {
		head := o.ID
		if o.Name != "" {
			head += " " + o.Name
		}
		fmt.Fprintf(w, "%s: %s\n", head, o.Result)
		tw := newTable(w)
		procs := o.Procs
		if len(procs) == 0 && o.PID > 0 {
			procs = []shutdown.ProcOutcome{{PID: o.PID, Role: shutdown.RoleLeader, Result: o.Result, Command: o.Command}}
		}
		for _, p := range procs {
			cmd := shortCommand([]string{orDash(p.Command)})
			if p.Role != shutdown.RoleLeader {
				cmd += " (" + string(p.Role) + ")"
			}
			res := string(p.Result)
			if p.AfterMS > 0 {
				res += fmt.Sprintf(" after %.1fs", float64(p.AfterMS)/1000)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\n", p.PID, cmd, res)
		}
		for _, pid := range o.Spared {
			fmt.Fprintf(tw, "  %d\t-\tspared (SUPERVISOR_KEEP=1)\n", pid)
		}
		tw.Flush()
	}
}

// callCascade sends a request answered by stop outcomes and prints them;
// the progress of a long stop goes to stderr meanwhile.
func callCascade(cmd *cobra.Command, typ string, req any, asJSON bool) error {
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.Close()
	var resp api.Outcomes
	if err := c.CallProgress(typ, req, &resp, progressTo(cmd.ErrOrStderr())); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), resp.Outcomes)
	}
	printOutcomes(cmd.OutOrStdout(), resp.Outcomes)
	return nil
}

// progressTo prints a long stop's progress frames to w.
func progressTo(w io.Writer) func(api.Progress) {
	return func(p api.Progress) { fmt.Fprintln(w, p.Message) }
}
