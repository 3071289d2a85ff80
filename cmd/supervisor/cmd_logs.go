package main

import (
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
	cmd := &cobra.Command{
		Use:   "logs ID|NAME [-f] [--lines N]",
		Short: "Show the captured output of a daemon-owned (shared) server",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if lines < 0 {
				return fmt.Errorf("--lines %d: must not be negative", lines)
			}
			p, err := paths()
			if err != nil {
				return err
			}
			// The registry knows a shared server's name and port (its
			// log's name); without a daemon, the log files themselves do.
			var paths []string
			if c, err := dial(); err == nil {
				if procs, err := c.Processes(api.PsRequest{All: true}); err == nil {
					for _, pr := range procs {
						if pr.Shared && (pr.ID == args[0] || pr.Name == args[0]) && !slices.Contains(paths, daemon.LogPath(p, pr.Name, pr.Port)) {
							paths = append(paths, daemon.LogPath(p, pr.Name, pr.Port))
						}
					}
				}
				c.Close()
			}
			if len(paths) == 0 {
				paths = daemon.LogPathsByName(p, args[0])
			}
			switch {
			case len(paths) == 0:
				return &hintError{err: fmt.Errorf("no captured output for %q in %s", args[0], clean(filepath.Join(p.StateDir, "logs"))),
					hint: "only shared servers started with `supervisor ensure` have logs; stdio servers write to their host"}
			case len(paths) > 1:
				return fmt.Errorf("%q names logs of several servers (%s); use a process id from `supervisor ps --all`",
					args[0], clean(strings.Join(paths, ", ")))
			}
			path := paths[0]
			f, err := os.Open(path)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("no captured output yet for %q (%s)", args[0], clean(path))
				}
				return err
			}
			defer f.Close()
			off, err := printTail(cmd.OutOrStdout(), f, lines)
			if err != nil || !follow {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return followLog(ctx, cmd.OutOrStdout(), path, f, off)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing what is appended (across rotations)")
	cmd.Flags().IntVar(&lines, "lines", 50, "how many of the last lines to print first (0: all)")
	return cmd
}

// printTail prints the last n lines of f (all when n is 0) and returns the
// offset it read to.
func printTail(w io.Writer, f *os.File, n int) (int64, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, err
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
	return int64(len(data)), err
}

// followLog prints what is appended to path, starting over when the log
// rotates: the daemon copies a shared server's log to NAME.log.1 and
// truncates it (the server keeps writing the same file), so a file shorter
// than what was read is read again from its start; a file at path that is
// another one (replaced) is reopened.
// A log file gives no event on append that works across rotation and every
// filesystem, so it is checked every 200 ms.
func followLog(ctx context.Context, w io.Writer, path string, f *os.File, off int64) error {
	defer func() { f.Close() }() // the file reopened last (Close twice is harmless)
	buf := make([]byte, 64<<10)
	for {
		for {
			n, err := f.ReadAt(buf, off)
			if n > 0 {
				w.Write(buf[:n])
				off += int64(n)
			}
			if err != nil || n == 0 {
				break
			}
		}
		if st, err := os.Stat(path); err == nil {
			cur, _ := f.Stat()
			if !os.SameFile(st, cur) || st.Size() < off {
				if nf, err := os.Open(path); err == nil {
					f.Close()
					f, off = nf, 0
					continue
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
