package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/mattn/go-runewidth"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/config"
	"github.com/seed-86a41135/supervisor/internal/usage"
	"github.com/seed-86a41135/supervisor/session"
)

type psOptions struct {
	all     bool
	session string
	json    bool
	wide    bool
	quiet   bool
	format  string
	filters []string
}

func newPsCommand() *cobra.Command {
	var o psOptions
	cmd := &cobra.Command{
		Use:   "ps [--all] [--session ID] [--filter KEY=VALUE] [-q] [--format json|TEMPLATE] [--json]",
		Short: "List supervised processes",
		Long: "ps lists the running processes (--all: every one the registry keeps), a shared\n" +
			"server's clients under it. --filter name=N, state=S, session=ID or id=ID keeps\n" +
			"the matching ones (repeat it or join with commas: different keys must all\n" +
			"match, one key given twice matches either value; a state filter that names an\n" +
			"ended state implies --all). -q prints only ids. --format json is --json;\n" +
			"any other --format is a Go template run for each process, e.g.\n" +
			"'{{.ID}} {{.Name}} {{.PID}}' (the fields are --json's, in Go's names).\n" +
			"On a terminal the table fits its width: columns go, least useful first, and\n" +
			"the command is cut; HEALTH and PORT appear only when a shared server has them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.session != "" {
				if err := session.ValidateID(o.session); err != nil {
					return fmt.Errorf("--session: %w", err)
				}
			}
			f, err := parsePsFilters(o.filters)
			if err != nil {
				return err
			}
			var tmpl *template.Template
			switch {
			case o.format == "json":
				o.json = true
			case o.format != "":
				if tmpl, err = template.New("format").Option("missingkey=error").Parse(o.format); err != nil {
					return &usageError{hintError{err: fmt.Errorf("--format: %w", err), hint: "a Go template over the fields of `ps --json`, e.g. '{{.ID}} {{.Name}}'"}}
				}
			}
			c, err := dial()
			if err != nil {
				return err
			}
			defer c.Close()
			req := api.PsRequest{All: o.all || f.wantsEnded(), Session: o.session}
			if o.json && f.empty() {
				// The daemon's bytes, only indented: what writeJSON of the
				// decoded records would print, without decoding them.
				raw, err := c.ProcessesJSON(req)
				if err != nil {
					return err
				}
				var buf bytes.Buffer
				if err := json.Indent(&buf, raw, "", "  "); err != nil {
					return fmt.Errorf("the daemon's process list: %w", err)
				}
				buf.WriteByte('\n')
				_, err = cmd.OutOrStdout().Write(buf.Bytes())
				return err
			}
			procs, err := c.Processes(req)
			if err != nil {
				return err
			}
			procs = slices.DeleteFunc(procs, func(p api.Process) bool { return !f.match(p) })
			out := cmd.OutOrStdout()
			switch {
			case o.json:
				return writeJSON(out, procs)
			case o.quiet:
				for _, p := range procs {
					fmt.Fprintln(out, p.ID)
				}
				return nil
			case tmpl != nil:
				for _, p := range procs {
					if err := tmpl.Execute(out, p); err != nil {
						return fmt.Errorf("--format: %w", err)
					}
					fmt.Fprintln(out)
				}
				return nil
			}
			return writePsTable(out, procs, o.wide, terminalWidth(out))
		},
	}
	cmd.Flags().BoolVar(&o.all, "all", false, "include exited, failed and lost processes")
	cmd.Flags().StringVar(&o.session, "session", "", "only this session's processes")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "print only the process ids")
	cmd.Flags().StringVar(&o.format, "format", "", "json, or a Go template run for each process (e.g. '{{.ID}} {{.Name}}')")
	cmd.Flags().StringArrayVar(&o.filters, "filter", nil, "keep processes whose name, state, session or id is VALUE (KEY=VALUE; repeatable)")
	addWideFlags(cmd, &o.wide)
	return cmd
}

// psFilter is ps's --filter: per key the values it may have (none: any).
type psFilter map[string][]string

var psFilterKeys = []string{"name", "state", "session", "id"}

func parsePsFilters(args []string) (psFilter, error) {
	f := psFilter{}
	for _, arg := range args {
		for _, kv := range strings.Split(arg, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || v == "" {
				return nil, &usageError{hintError{err: fmt.Errorf("--filter %q: want KEY=VALUE", kv), hint: "keys: " + strings.Join(psFilterKeys, ", ")}}
			}
			if !slices.Contains(psFilterKeys, k) {
				msg := fmt.Sprintf("--filter: unknown key %q", k)
				if s := closest(k, psFilterKeys); s != "" {
					msg += fmt.Sprintf("; did you mean %s?", s)
				}
				return nil, &usageError{hintError{err: errors.New(msg), hint: "keys: " + strings.Join(psFilterKeys, ", ")}}
			}
			if k == "state" && !slices.Contains(psStates, api.ProcState(v)) {
				return nil, &usageError{hintError{err: fmt.Errorf("--filter state=%s: no such state", v), hint: "states: " + fmt.Sprint(psStates)}}
			}
			f[k] = append(f[k], v)
		}
	}
	return f, nil
}

var psStates = []api.ProcState{api.StateStarting, api.StateRunning, api.StateStopping,
	api.StateExited, api.StateFailed, api.StateLost}

func (f psFilter) empty() bool { return len(f) == 0 }

// wantsEnded: a state filter naming an ended state needs --all's records.
func (f psFilter) wantsEnded() bool {
	return slices.ContainsFunc(f["state"], func(s string) bool { return api.ProcState(s).Final() })
}

func (f psFilter) match(p api.Process) bool {
	for k, vals := range f {
		var have string
		switch k {
		case "name":
			have = p.Name
		case "state":
			have = string(p.State)
		case "session":
			have = p.Session
		case "id":
			have = p.ID
		}
		if !slices.Contains(vals, have) {
			return false
		}
	}
	return true
}

// closest is the candidate within two edits of s (or equal but for case),
// or "".
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if strings.EqualFold(s, c) {
			return c
		}
		if d := config.EditDistance(strings.ToLower(s), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// writePsTable prints procs as ps's table. HEALTH and PORT are shared
// servers' (a stdio server has neither): the columns appear only when a
// row has one. With width > 0 (a terminal) the table is fitted to it:
// the least useful columns go first, then the command is cut.
func writePsTable(w io.Writer, procs []api.Process, wide bool, width int) error {
	headers := []string{"ID", "SESSION", "NAME", "PID", "STATE", "MEM", "CPU", "PROCS", "STARTED", "HEALTH", "RESTARTS", "PORT", "COMMAND"}
	var rows [][]string
	shared := false
	now := time.Now()
	for _, p := range procs {
		port := "-"
		if p.Port > 0 {
			port = fmt.Sprint(p.Port)
		}
		shared = shared || p.Port > 0 || p.Shared || p.Broker || p.Unsafe != "" || (p.Health != "" && p.Health != "none")
		mem, cpu, nprocs := usageCells(p.Usage)
		rows = append(rows, []string{p.ID, orDash(p.Session), nameCell(p.Name, wide), pidOrDash(p.PID), stateCell(p), mem, cpu, nprocs,
			ago(p.StartedAt, now), healthCell(p), fmt.Sprint(p.Restarts), port, shortCommand(p.Argv, wide)})
		// A shared server's clients, under it: one per session.
		for _, cl := range p.Clients {
			rows = append(rows, []string{"  " + cl.ID, orDash(clean(cl.Session)), nameCell(p.Name, wide), "-", "attached", "-", "-", "-",
				ago(cl.Since, now), "-", "-", "-", "client of " + p.ID})
		}
	}
	if !shared {
		headers, rows = dropColumns(headers, rows, "HEALTH", "PORT")
	}
	if width > 0 && !wide {
		// Least useful first; ID, NAME, STATE and COMMAND always stay.
		for _, col := range []string{"RESTARTS", "PROCS", "PORT", "HEALTH", "CPU", "STARTED", "SESSION", "MEM", "PID"} {
			if tableWidth(headers, rows) <= width {
				break
			}
			headers, rows = dropColumns(headers, rows, col)
		}
		cutLastColumn(headers, rows, width)
	}
	tw := newTable(w)
	for _, r := range append([][]string{headers}, rows...) {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// dropColumns removes the named columns from headers and every row.
func dropColumns(headers []string, rows [][]string, names ...string) ([]string, [][]string) {
	for _, name := range names {
		i := slices.Index(headers, name)
		if i < 0 {
			continue
		}
		headers = slices.Delete(slices.Clone(headers), i, i+1)
		for j := range rows {
			rows[j] = slices.Delete(rows[j], i, i+1)
		}
	}
	return headers, rows
}

// tableWidth is how wide table's Flush would print these rows.
func tableWidth(headers []string, rows [][]string) int {
	widths := make([]int, len(headers))
	for _, r := range append([][]string{headers}, rows...) {
		for j, c := range r {
			widths[j] = max(widths[j], cellWidth(c))
		}
	}
	total := 2 * (len(widths) - 1)
	for _, w := range widths {
		total += w
	}
	return total
}

// cutLastColumn cuts the last cell of each row (the command) so the row
// fits width, marking a cut with "~"; it keeps at least 10 cells of it.
func cutLastColumn(headers []string, rows [][]string, width int) {
	widths := make([]int, len(headers)-1)
	for _, r := range append([][]string{headers}, rows...) {
		for j, c := range r[:len(r)-1] {
			widths[j] = max(widths[j], cellWidth(c))
		}
	}
	room := width
	for _, w := range widths {
		room -= w + 2
	}
	room = max(room, 10)
	for _, r := range rows {
		last := len(r) - 1
		if cellWidth(r[last]) > room {
			r[last] = runewidth.Truncate(r[last], room, "~")
		}
	}
}

// terminalWidth is w's width when it is a terminal, else 0.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return width
}

// usageCells are the MEM, CPU and PROCS columns: what a running server
// or a session costs now, dashes when it was not measured.
func usageCells(u *api.Usage) (mem, cpu, procs string) {
	if u == nil {
		return "-", "-", "-"
	}
	mem = "-"
	if u.MemorySource != "" {
		mem = usage.Bytes(u.MemoryBytes)
	}
	return mem, fmt.Sprintf("%.1f%%", u.CPUPercent), fmt.Sprint(u.Procs)
}

// stateCell is the STATE column: the state, and the limits the kernel
// enforced on the process ("exited(memory_max)"), in one word.
func stateCell(p api.Process) string {
	if len(p.LimitHit) == 0 {
		return string(p.State)
	}
	return string(p.State) + "(" + strings.Join(p.LimitHit, ",") + ")"
}

// healthCell is the HEALTH column: a shared server that is not safely
// shareable says so there.
func healthCell(p api.Process) string {
	if p.Unsafe != "" {
		return "unsafe: " + clean(p.Unsafe)
	}
	return orDash(p.Health)
}
