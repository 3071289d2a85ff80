package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/daemon"
)

func newLogsCommand() *cobra.Command {
	var follow bool
	var lines int
	var sessionID string
	cmd := &cobra.Command{
		Use:   "logs ID|NAME [-f] [--lines N] [--session S]",
		Short: "Show the captured output of a server (a shared server's output, a stdio server's stderr)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if lines < 0 {
				return fmt.Errorf("--lines %d: must not be negative", lines)
			}
			p, err := paths()
			if err != nil {
				return err
			}
			path, err := findLog(p, args[0], sessionID)
			if err != nil {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("no captured output yet for %q (%s)", args[0], clean(path))
				}
				return err
			}
			defer f.Close()
			off, err := printTail(cmd.OutOrStdout(), path, f, lines)
			if err != nil || !follow {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return followLog(ctx, cmd.OutOrStdout(), path, f, off)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing what is appended (across rotations)")
	cmd.Flags().IntVar(&lines, "lines", 50, "how many of the last lines to print first (0: all that is kept)")
	cmd.Flags().StringVar(&sessionID, "session", "", "only the server of this session (a name runs in many)")
	return cmd
}

// findLog finds the log of the server named (or with id) arg: the
// registry knows its kind, name, port and id (its log's name); without a
// daemon, the log files themselves do. Of several servers of one name, a
// running one is meant, else the one started last.
func findLog(p api.Paths, arg, sessionID string) (string, error) {
	type cand struct {
		path    string
		running bool
		started time.Time
	}
	var cands []cand
	if c, err := dial(); err == nil {
		if procs, err := c.Processes(api.PsRequest{All: true}); err == nil {
			for _, pr := range procs {
				if pr.ID != arg && pr.Name != arg || sessionID != "" && pr.Session != sessionID {
					continue
				}
				path := daemon.RunLogPath(p, pr.Name, pr.ID)
				if pr.Shared {
					path = daemon.LogPath(p, pr.Name, pr.Port)
				}
				if !slices.ContainsFunc(cands, func(c cand) bool { return c.path == path }) {
					cands = append(cands, cand{path, !pr.State.Final(), pr.StartedAt})
				}
			}
		}
		c.Close()
	}
	if len(cands) == 0 && sessionID == "" {
		for _, path := range daemon.LogPathsByName(p, arg) {
			cands = append(cands, cand{path: path})
		}
		if runLogs := daemon.RunLogPathsByName(p, arg); len(runLogs) > 0 {
			cands = append(cands, cand{path: runLogs[0]}) // the one written last
		}
	}
	if running := slices.DeleteFunc(slices.Clone(cands), func(c cand) bool { return !c.running }); len(running) > 0 {
		cands = running
	} else if len(cands) > 1 && !cands[0].started.IsZero() {
		newest := slices.MaxFunc(cands, func(a, b cand) int { return a.started.Compare(b.started) })
		cands = []cand{newest}
	}
	switch {
	case len(cands) == 0:
		return "", &hintError{err: fmt.Errorf("no captured output for %q in %s", arg, clean(filepath.Join(p.StateDir, "logs"))),
			hint: "see `supervisor ps --all` for the servers' names and ids"}
	case len(cands) > 1:
		paths := make([]string, len(cands))
		for i, c := range cands {
			paths[i] = c.path
		}
		return "", fmt.Errorf("%q names logs of several servers (%s); use a process id from `supervisor ps --all` or --session",
			arg, clean(strings.Join(paths, ", ")))
	}
	return cands[0].path, nil
}

// printTail prints the last n lines of the log at path, open as f (all
// that is kept when n is 0): from f, and from its rotated files (path.1
// the newest) for what f does not hold. It returns the offset it read f to.
func printTail(w io.Writer, path string, f *os.File, n int) (int64, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	read := int64(len(data))
	for i := 1; n == 0 || bytes.Count(data, []byte("\n")) <= n; i++ {
		older, err := os.ReadFile(fmt.Sprintf("%s.%d", path, i))
		if err != nil {
			break // no more backups (a gap in their numbers ends them too)
		}
		data = append(older, data...)
	}
	start := 0
	if n > 0 {
		end := len(data)
		if end > 0 && data[end-1] == '\n' {
			end--
		}
		for i, seen := end-1, 0; i >= 0; i-- {
			if data[i] == '\n' {
				seen++
				if seen == n {
					start = i + 1
					break
				}
			}
		}
	}
	_, err = w.Write(data[start:])
	return read, err
}

// followLog prints what is appended to path, across rotations: when the
// log writer renames the file to NAME.log.1 (and on, possibly several times
// between two looks), the rest of the old file is read through its open fd,
// then the files that came after it, oldest first, then the new one from
// its start. When the daemon copies a log to NAME.log.1 and truncates it (a
// server writing its log itself), a file shorter than what was read is read
// again from its start.
// A log file gives no event on append that works across rotation and every
// filesystem, so it is checked every 200 ms.
func followLog(ctx context.Context, w io.Writer, path string, f *os.File, off int64) error {
	defer func() { f.Close() }() // the file reopened last (Close twice is harmless)
	buf := make([]byte, 64<<10)
	drain := func() {
		for {
			n, err := f.ReadAt(buf, off)
			if n > 0 {
				w.Write(buf[:n])
				off += int64(n)
			}
			if err != nil || n == 0 {
				return
			}
		}
	}
	for {
		drain()
		if st, err := os.Stat(path); err == nil {
			cur, _ := f.Stat()
			switch {
			case !os.SameFile(st, cur):
				// Renamed away: its writer has moved on, so what the old
				// file has now is all it gets.
				if newer := newerLogs(path, cur); len(newer) > 0 {
					drain()
					for _, nf := range newer {
						f.Close()
						f, off = nf, 0
						drain()
					}
					continue
				}
			case st.Size() < off:
				off = 0
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// newerLogs opens the files of the log at path that are newer than old
// (renamed to a backup), oldest first, ending with the live one. They are
// opened newest first: a rotation meanwhile moves files to higher numbers,
// so one may be met twice (and is skipped) but none is missed.
func newerLogs(path string, old os.FileInfo) []*os.File {
	var out []*os.File
	var infos []os.FileInfo
	for i := 0; ; i++ {
		p := path
		if i > 0 {
			p = fmt.Sprintf("%s.%d", path, i)
		}
		nf, err := os.Open(p)
		if err != nil {
			break // past the last backup: old was dropped, all are newer
		}
		st, err := nf.Stat()
		if err != nil || os.SameFile(st, old) {
			nf.Close()
			break
		}
		if slices.ContainsFunc(infos, func(fi os.FileInfo) bool { return os.SameFile(fi, st) }) {
			nf.Close()
			continue
		}
		out, infos = append(out, nf), append(infos, st)
	}
	slices.Reverse(out)
	return out
}
