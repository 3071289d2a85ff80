package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/daemon"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/usage"
	"github.com/seed-86a41135/supervisor/spawn"
)

// inspection is everything `inspect` shows of one server.
type inspection struct {
	Process api.Process `json:"process"`
	// Tree is its processes now: its own, its descendants, the rest of its
	// cgroup and those carrying its marker (escaped ones included).
	Tree    []treeProc  `json:"tree"`
	Events  []api.Event `json:"events"`
	LogPath string      `json:"log_path,omitempty"`
	Log     []string    `json:"log"`
	// LogError says why the log's tail could not be read, when it could
	// not: an empty Log alone would read as a server that wrote nothing.
	LogError string `json:"log_error,omitempty"`
}

type treeProc struct {
	PID     int      `json:"pid"`
	PPID    int      `json:"ppid"`
	Argv    []string `json:"argv"`
	Because string   `json:"because"` // the server itself, descendant, cgroup, marker
}

func newInspectCommand() *cobra.Command {
	var asJSON bool
	var lines int
	var sessionID string
	cmd := &cobra.Command{
		Use:   "inspect ID|NAME [--session S] [--lines N] [--json]",
		Short: "Show one server in full: its record, process tree, limits and usage, last events and log lines",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if lines < 0 {
				return fmt.Errorf("--lines %d: must not be negative", lines)
			}
			p, err := paths()
			if err != nil {
				return err
			}
			c, err := dial()
			if err != nil {
				return err
			}
			defer c.Close()
			procs, err := c.Processes(api.PsRequest{All: true, Session: sessionID})
			if err != nil {
				return fmt.Errorf("list processes: %w", err)
			}
			rec, err := pickProcess(procs, args[0])
			if err != nil {
				return err
			}
			in := inspection{Process: rec, Tree: processTree(rec), Events: []api.Event{}, Log: []string{}}
			var evs api.EventList
			if err := c.Call(api.TypeEvents, &api.EventsRequest{Session: rec.Session}, &evs); err != nil {
				return fmt.Errorf("read events: %w", err)
			}
			for _, ev := range evs.Events {
				if ev.Process == rec.ID {
					in.Events = append(in.Events, ev)
				}
			}
			in.Events = in.Events[max(0, len(in.Events)-lines):]
			in.LogPath = daemon.RunLogPath(p, rec.Name, rec.ID)
			if rec.Shared {
				in.LogPath = daemon.LogPath(p, rec.Name, rec.Port)
			}
			if f, err := os.Open(in.LogPath); err == nil {
				var buf bytes.Buffer
				if _, err := printTail(&buf, in.LogPath, f, lines); err != nil {
					in.LogError = err.Error()
				}
				f.Close()
				if s := strings.TrimRight(buf.String(), "\n"); s != "" {
					in.Log = strings.Split(s, "\n")
				}
			} else if !errors.Is(err, fs.ErrNotExist) {
				in.LogError = err.Error() // none yet is no error: it has written nothing
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), in)
			}
			return printInspection(cmd.OutOrStdout(), in)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&lines, "lines", 10, "how many of its last events and log lines")
	cmd.Flags().StringVar(&sessionID, "session", "", "only the server of this session (a name runs in many)")
	return cmd
}

// pickProcess is the process arg names: the one with that id, else of
// that name the running one, else the one started last.
func pickProcess(procs []api.Process, arg string) (api.Process, error) {
	var named, running []api.Process
	for _, p := range procs {
		if p.ID == arg {
			return p, nil
		}
		if p.Name == arg {
			named = append(named, p)
			if !p.State.Final() {
				running = append(running, p)
			}
		}
	}
	switch {
	case len(running) == 1:
		return running[0], nil
	case len(running) > 1:
		ids := make([]string, len(running))
		for i, p := range running {
			ids[i] = p.ID + " (session " + p.Session + ")"
		}
		return api.Process{}, &hintError{err: fmt.Errorf("%q names %d running servers: %s", arg, len(running), strings.Join(ids, ", ")),
			hint: "name one by its id, or pass --session"}
	case len(named) > 0:
		return slices.MaxFunc(named, func(a, b api.Process) int { return a.StartedAt.Compare(b.StartedAt) }), nil
	}
	return api.Process{}, &hintError{err: fmt.Errorf("no server %q", arg), hint: "see `supervisor ps --all` for the servers' names and ids"}
}

// processTree is rec's processes now, each with why it is the server's,
// the proofs the stop cascade uses: descent, the cgroup, the marker.
func processTree(rec api.Process) []treeProc {
	if rec.State.Final() || rec.PID <= 0 {
		return []treeProc{}
	}
	infos, _ := proc.Scan()
	children := map[int][]int{}
	ppid := map[int]int{}
	for _, in := range infos {
		if in.State == 'Z' {
			continue
		}
		children[in.PPID] = append(children[in.PPID], in.PID)
		ppid[in.PID] = in.PPID
	}
	because := map[int]string{}
	if proc.Verify(rec.PID, rec.Token) == nil {
		because[rec.PID] = "the server"
	}
	queue := []int{rec.PID}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if because[c] == "" {
				because[c] = "descendant"
				queue = append(queue, c)
			}
		}
	}
	if rec.Cgroup != "" {
		if pids, err := cgroup.Procs(rec.Cgroup); err == nil {
			for _, pid := range pids {
				if because[pid] == "" {
					because[pid] = "cgroup"
				}
			}
		}
	}
	for _, in := range infos {
		if because[in.PID] != "" || in.State == 'Z' || in.UID != os.Getuid() {
			continue
		}
		if env, err := proc.Environ(in.PID); err == nil {
			if v, _ := proc.EnvValue(env, spawn.EnvProcID); v == rec.ID {
				because[in.PID] = "marker"
			}
		}
	}
	out := []treeProc{}
	for pid, why := range because {
		argv, _ := proc.Cmdline(pid)
		out = append(out, treeProc{PID: pid, PPID: ppid[pid], Argv: argv, Because: why})
	}
	slices.SortFunc(out, func(a, b treeProc) int { return a.PID - b.PID })
	return out
}

func printInspection(w io.Writer, in inspection) error {
	p := in.Process
	mode := "spawned by the daemon"
	switch {
	case p.InPlace:
		mode = "exec'd in its shim's place (the host's own child)"
	case p.Broker:
		mode = "a shared server's broker"
	case p.Shared:
		mode = fmt.Sprintf("shared on port %d", p.Port)
	case p.ShimPID > 0:
		mode = fmt.Sprintf("spawned by the daemon for shim %d", p.ShimPID)
	}
	fmt.Fprintf(w, "%s  %s\n", p.ID, p.Name)
	fmt.Fprintf(w, "  state:    %s", p.State)
	if p.PID > 0 {
		fmt.Fprintf(w, ", pid %d", p.PID)
	}
	if p.ExitedAt != nil {
		fmt.Fprintf(w, ", ended %s ago", time.Since(*p.ExitedAt).Round(time.Second))
	}
	fmt.Fprintf(w, "\n  session:  %s\n  how:      %s\n", p.Session, mode)
	fmt.Fprintf(w, "  command:  %s\n  cwd:      %s\n", strings.Join(p.Argv, " "), p.Cwd)
	fmt.Fprintf(w, "  started:  %s (%s ago); restarts %d; health %s\n", p.StartedAt.Format(time.RFC3339), time.Since(p.StartedAt).Round(time.Second), p.Restarts, orNone(p.Health))
	if p.Usage != nil {
		fmt.Fprintf(w, "  usage:    %s memory (%s), %.1f%% CPU, %d processes\n", usage.Bytes(p.Usage.MemoryBytes), orNone(p.Usage.MemorySource), p.Usage.CPUPercent, p.Usage.Procs)
	}
	limits := daemon.DescribeLimits(p.Limits)
	if limits == "" {
		limits = "none"
	}
	if len(p.LimitHit) > 0 {
		limits += "; hit: " + strings.Join(p.LimitHit, ", ")
	}
	fmt.Fprintf(w, "  limits:   %s\n", limits)
	if p.Sandboxed {
		fmt.Fprintf(w, "  sandbox:  confined (its rules are in its process.start event; docs/sandbox.md)\n")
	}
	if p.Egress != nil {
		where := "on the daemon's loopback, port " + strconv.Itoa(p.Egress.Port)
		if p.Egress.Netns {
			where = "in its own network namespace"
		}
		fmt.Fprintf(w, "  network:  %s, through the egress proxy %s\n", strings.Join(p.Egress.Hosts, " "), where)
	}
	if p.Cgroup != "" {
		fmt.Fprintf(w, "  cgroup:   %s\n", p.Cgroup)
	}
	if p.Stop != nil {
		fmt.Fprintf(w, "  stopped:  %s (%d processes)\n", p.Stop.Result, len(p.Stop.Procs))
	}
	fmt.Fprintf(w, "tree (%d):\n", len(in.Tree))
	for _, t := range in.Tree {
		fmt.Fprintf(w, "  %-7d %-7d %-11s %s\n", t.PID, t.PPID, t.Because, strings.Join(t.Argv, " "))
	}
	fmt.Fprintf(w, "events (last %d):\n", len(in.Events))
	for _, ev := range in.Events {
		fmt.Fprintf(w, "  %s  %-16s %s\n", ev.Time.Local().Format("15:04:05"), ev.Kind, ev.Detail)
	}
	fmt.Fprintf(w, "log (last %d lines of %s):\n", len(in.Log), in.LogPath)
	if in.LogError != "" {
		fmt.Fprintf(w, "  (cannot be read: %s)\n", in.LogError)
	}
	for _, l := range in.Log {
		fmt.Fprintf(w, "  %s\n", l)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
