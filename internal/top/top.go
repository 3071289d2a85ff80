// Package top is `supervisor top`'s view: the rows of a live table of
// every running server (its session's host, its name, what it costs now,
// its age, state and restarts) built from the daemon's process and session
// lists, sorted by a key the user picks, rendered as plain text, and the
// interactive terminal view that refreshes it.
package top

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mattn/go-runewidth"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/usage"
)

// Fetch takes one snapshot from the daemon.
type Fetch func() (Snapshot, error)

// ErrNoInteractive says the interactive view is not built for this OS
// (only for unix terminals): callers print the plain table instead.
var ErrNoInteractive = errors.New("the interactive view needs a unix terminal")

// Row is one server.
type Row struct {
	ID, Session, Host, Name, State string
	PID                            int
	Memory                         uint64
	MemoryKnown                    bool
	CPU                            float64 // % of one CPU
	Procs                          int
	Started                        time.Time
	Restarts                       int
}

// Snapshot is one refresh: the rows and what they sum to.
type Snapshot struct {
	Rows     []Row
	Sessions int
	At       time.Time
}

// Sort keys, each a key the view answers to.
var sortKeys = []struct{ key, name string }{
	{"m", "mem"}, {"c", "cpu"}, {"n", "name"}, {"a", "age"}, {"s", "state"}, {"r", "restarts"}, {"h", "host"},
}

// SortNames lists the sort keys' names, for flags and help.
func SortNames() []string {
	var out []string
	for _, k := range sortKeys {
		out = append(out, k.name)
	}
	return out
}

// ValidSort says whether name is a sort key's name.
func ValidSort(name string) bool {
	for _, k := range sortKeys {
		if k.name == name {
			return true
		}
	}
	return false
}

// Build turns the daemon's lists into a snapshot: every running process
// (servers and shared servers' brokers), with its session's host.
func Build(procs []api.Process, sessions []api.SessionInfo, at time.Time) Snapshot {
	hosts := map[string]string{}
	for _, s := range sessions {
		hosts[s.ID] = hostName(s.HostCommand)
	}
	snap := Snapshot{Sessions: len(sessions), At: at}
	for _, p := range procs {
		if p.State.Final() {
			continue
		}
		r := Row{ID: p.ID, Session: p.Session, Host: hosts[p.Session], Name: p.Name, State: string(p.State), PID: p.PID,
			Started: p.StartedAt, Restarts: p.Restarts}
		if p.Broker {
			r.Session, r.Host = "shared", fmt.Sprintf("%d clients", len(p.Clients))
		}
		if len(p.LimitHit) > 0 {
			r.State += "(" + strings.Join(p.LimitHit, ",") + ")"
		}
		if u := p.Usage; u != nil {
			r.Memory, r.MemoryKnown, r.CPU, r.Procs = u.MemoryBytes, u.MemorySource != "", u.CPUPercent, u.Procs
		}
		snap.Rows = append(snap.Rows, r)
	}
	return snap
}

// hostName is a host command's program ("claude" of "/usr/bin/claude
// --resume"; "node" for a node script shows the script's name).
func hostName(cmd string) string {
	f := strings.Fields(cmd)
	if len(f) == 0 {
		return "-"
	}
	name := filepath.Base(f[0])
	if (name == "node" || name == "bun" || name == "deno") && len(f) > 1 && !strings.HasPrefix(f[1], "-") {
		name = filepath.Base(f[1])
	}
	return name
}

// Sort orders rows by the key named by, biggest or newest first for
// figures, alphabetically for names; ties go by name then ID.
func Sort(rows []Row, by string) {
	less := func(a, b Row) (bool, bool) { // less, decided
		switch by {
		case "mem":
			if a.Memory != b.Memory {
				return a.Memory > b.Memory, true
			}
		case "cpu":
			if a.CPU != b.CPU {
				return a.CPU > b.CPU, true
			}
		case "age":
			if !a.Started.Equal(b.Started) {
				return a.Started.Before(b.Started), true
			}
		case "state":
			if a.State != b.State {
				return a.State < b.State, true
			}
		case "restarts":
			if a.Restarts != b.Restarts {
				return a.Restarts > b.Restarts, true
			}
		case "host":
			if a.Host != b.Host {
				return a.Host < b.Host, true
			}
		}
		return false, false
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if l, ok := less(rows[i], rows[j]); ok {
			return l
		}
		if rows[i].Name != rows[j].Name {
			return rows[i].Name < rows[j].Name
		}
		return rows[i].ID < rows[j].ID
	})
}

// column is one of the table's: its title, width in cells, alignment.
type column struct {
	title string
	width int
	right bool
}

// columns are the table's; SESSION widens to its longest id.
var columns = []column{
	{"SESSION", 7, false}, {"HOST", 12, false}, {"NAME", 22, false}, {"PID", 7, true}, {"STATE", 10, false},
	{"MEM", 7, true}, {"CPU", 7, true}, {"PROCS", 5, true}, {"AGE", 5, true}, {"RESTARTS", 8, true},
}

// Render writes snap as a table sorted by by, at most width cells wide
// (0: unbounded) and height lines tall (0: every row).
func Render(snap Snapshot, by string, width, height int) string {
	rows := append([]Row(nil), snap.Rows...)
	Sort(rows, by)
	var mem uint64
	var cpu float64
	for _, r := range rows {
		mem += r.Memory
		cpu += r.CPU
	}
	var b strings.Builder
	line := func(s string) {
		if width > 0 && runewidth.StringWidth(s) > width {
			s = runewidth.Truncate(s, width, "")
		}
		b.WriteString(strings.TrimRight(s, " "))
		b.WriteByte('\n')
	}
	line(fmt.Sprintf("supervisor top - %s - %s, %s, %s memory, %.1f%% CPU - sorted by %s",
		snap.At.Format("15:04:05"), plural(snap.Sessions, "session"), plural(len(rows), "server"), usage.Bytes(mem), cpu, by))
	// Session ids in full (host-PID-START is how a user finds a host's
	// servers in ps and events): the column is as wide as the widest.
	cols := slices.Clone(columns)
	for _, r := range rows {
		cols[0].width = min(max(cols[0].width, runewidth.StringWidth(clean(r.Session))), maxSessionWidth)
	}
	formatRow := func(cells []string) string { return formatCells(cols, cells) }
	var keys []string
	for _, k := range sortKeys {
		keys = append(keys, k.key+" "+k.name)
	}
	line("sort: " + strings.Join(keys, ", ") + "; q: quit")
	line("")
	cells := make([]string, len(columns))
	for i, c := range columns {
		cells[i] = c.title
	}
	line(formatRow(cells))
	// The four lines above, then as many rows as fit, the last line saying
	// how many more there are when not all do.
	fit := len(rows)
	if height > 0 && len(rows) > height-4 {
		fit = max(height-5, 0)
	}
	for i, r := range rows {
		if i == fit {
			line(fmt.Sprintf("... %d more", len(rows)-i))
			break
		}
		mem := "-"
		if r.MemoryKnown {
			mem = usage.Bytes(r.Memory)
		}
		line(formatRow([]string{r.Session, orDash(r.Host), orDash(r.Name), fmt.Sprint(r.PID), r.State, mem,
			fmt.Sprintf("%.1f%%", r.CPU), fmt.Sprint(r.Procs), age(snap.At.Sub(r.Started)), fmt.Sprint(r.Restarts)}))
	}
	if len(rows) == 0 {
		line("(no running servers)")
	}
	return b.String()
}

// maxSessionWidth bounds the SESSION column: an id longer than this (an
// explicit --session can be anything) is cut, marked with "~".
const maxSessionWidth = 40

// plural is "1 server", "2 servers".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func formatCells(columns []column, cells []string) string {
	var b strings.Builder
	for i, c := range columns {
		s := clean(cells[i])
		if runewidth.StringWidth(s) > c.width {
			s = runewidth.Truncate(s, c.width, "~")
		}
		pad := strings.Repeat(" ", c.width-runewidth.StringWidth(s))
		if c.right {
			b.WriteString(pad + s)
		} else {
			b.WriteString(s + pad)
		}
		b.WriteString("  ")
	}
	return b.String()
}

// clean keeps a name's control characters off the terminal.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age is a duration in its largest unit ("45s", "12m", "3h", "2d").
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
