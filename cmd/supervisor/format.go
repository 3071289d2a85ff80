package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mattn/go-runewidth"
	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/shutdown"
)

func newJSONEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc
}

// table aligns tab-separated cells into columns as wide as their widest
// cell on a terminal: text/tabwriter counts a rune as one column, so a CJK
// name or an emoji (two cells each) pushes the rest of its row out of line.
// Cells are separated by at least two spaces; the last cell of a line is
// not padded. Lines are buffered until Flush.
type table struct {
	w   io.Writer
	buf []byte
}

func newTable(w io.Writer) *table { return &table{w: w} }

func (t *table) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// Flush writes the buffered lines aligned.
func (t *table) Flush() error {
	text := string(t.buf)
	t.buf = t.buf[:0]
	if text == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	rows := make([][]string, len(lines))
	var widths []int
	for i, l := range lines {
		rows[i] = strings.Split(l, "\t")
		for j, c := range rows[i][:len(rows[i])-1] {
			if j == len(widths) {
				widths = append(widths, 0)
			}
			widths[j] = max(widths[j], cellWidth(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		var line strings.Builder
		for j, c := range r {
			line.WriteString(c)
			if j < len(r)-1 {
				line.WriteString(strings.Repeat(" ", widths[j]-cellWidth(c)+2))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}

// cellWidth is how many terminal cells s takes: two for a wide (East
// Asian, emoji) character, none for a combining mark.
func cellWidth(s string) int { return runewidth.StringWidth(s) }

// Widths past which table cells are cut (unless --wide): a command is
// the longest thing on a row, a name the next.
const (
	maxCommandCells = 60
	maxNameCells    = 32
)

// fit cuts s to at most n terminal cells, ending it with "..."; never in
// the middle of a character. wide (--wide, --no-trunc) leaves s whole.
func fit(s string, n int, wide bool) string {
	if wide || cellWidth(s) <= n {
		return s
	}
	return runewidth.Truncate(s, n, "...")
}

// nameCell shows a user-chosen name in a table: escaped, "-" for none,
// cut to maxNameCells unless wide.
func nameCell(s string, wide bool) string { return fit(orDash(s), maxNameCells, wide) }

// ago says how long before now t was, coarsely ("3s ago", "2h ago"), or
// how long after ("in 25s") for a time still to come; "-" for none.
// --json keeps the exact time.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if d := now.Sub(t); d >= 0 {
		return roughDuration(d) + " ago"
	}
	return "in " + roughDuration(t.Sub(now))
}

// roughDuration is d in its largest whole unit: 45s, 12m, 5h, 3d. Up to
// two days count in hours, where a day would round too much away.
func roughDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// addWideFlags adds --wide and its alias --no-trunc (docker's name).
func addWideFlags(cmd *cobra.Command, wide *bool) {
	cmd.Flags().BoolVar(wide, "wide", false, "print commands and names in full, however long")
	cmd.Flags().BoolVar(wide, "no-trunc", false, "the same as --wide")
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

// shortCommand shows argv on one table cell, cut to maxCommandCells
// unless wide.
func shortCommand(argv []string, wide bool) string {
	return fit(clean(strings.Join(argv, " ")), maxCommandCells, wide)
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
			head += " " + clean(o.Name)
		}
		fmt.Fprintf(w, "%s: %s\n", head, clean(string(o.Result)))
		tw := newTable(w)
		procs := o.Procs
		if len(procs) == 0 && o.PID > 0 {
			procs = []shutdown.ProcOutcome{{PID: o.PID, Role: shutdown.RoleLeader, Result: o.Result, Command: o.Command}}
		}
		for _, p := range procs {
			cmd := shortCommand([]string{orDash(p.Command)}, false)
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
		for _, pid := range o.Unproven {
			fmt.Fprintf(tw, "  %d\t-\tnot signalled: holds its stdout, not proven its own\n", pid)
		}
		_ = tw.Flush() // to the terminal: as fmt.Fprintf's, unchecked
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
