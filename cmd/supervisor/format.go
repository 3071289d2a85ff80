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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
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
	s := strings.Join(argv, " ")
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
