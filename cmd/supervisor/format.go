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

func printOutcomes(w io.Writer, outs []shutdown.Outcome) {
	if len(outs) == 0 {
		fmt.Fprintln(w, "no live processes")
		return
	}
	for _, o := range outs {
		fmt.Fprintln(w, o.String())
	}
}

// callCascade sends a request answered by stop outcomes and prints them.
func callCascade(cmd *cobra.Command, typ string, req any, asJSON bool) error {
	var resp api.Outcomes
	if err := call(typ, req, &resp); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), resp.Outcomes)
	}
	printOutcomes(cmd.OutOrStdout(), resp.Outcomes)
	return nil
}
