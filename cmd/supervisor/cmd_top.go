package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/top"
)

func newTopCommand() *cobra.Command {
	var (
		interval time.Duration
		by       string
		plain    bool
		count    int
	)
	cmd := &cobra.Command{
		Use:   "top [--sort mem|cpu|name|age|state|restarts|host] [--interval D] [--plain] [--count N]",
		Short: "A live view of every running server: host, name, memory, CPU, age, state, restarts",
		Long: `top shows every running server with its session's host, what it costs
now (memory, CPU, processes), its age, state and restarts, refreshed every
--interval. In a terminal it is interactive: m, c, n, a, s, r, h sort by
memory, CPU, name, age, state, restarts, host; q quits. Not in a terminal
(or with --plain) it prints the table every interval, --count times
(0: until interrupted).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !top.ValidSort(by) {
				return fmt.Errorf("--sort %q: want one of %s", by, strings.Join(top.SortNames(), ", "))
			}
			if interval < 100*time.Millisecond {
				return fmt.Errorf("--interval %v: want 100ms or more", interval)
			}
			if count < 0 {
				return fmt.Errorf("--count %d: want 0 (until interrupted) or more", count)
			}
			// One snapshot first: no daemon is an error now, not a screen
			// of retries.
			first, err := topSnapshot()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			f, isFile := out.(*os.File)
			if !plain && isFile && term.IsTerminal(int(f.Fd())) && term.IsTerminal(int(os.Stdin.Fd())) {
				err := top.Interactive(os.Stdin, f, first, topSnapshot, interval, by)
				if !errors.Is(err, top.ErrNoInteractive) {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			snap := first
			for i := 1; ; i++ {
				fmt.Fprint(out, top.Render(snap, by, 0, 0))
				if count > 0 && i >= count {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
				if snap, err = topSnapshot(); err != nil {
					return err
				}
				fmt.Fprintln(out)
			}
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "refresh period")
	cmd.Flags().StringVar(&by, "sort", "mem", "first sort key: "+strings.Join(top.SortNames(), ", "))
	cmd.Flags().BoolVar(&plain, "plain", false, "print the table every interval instead of the interactive view")
	cmd.Flags().IntVar(&count, "count", 0, "with --plain or off a terminal: print this many tables, then exit (0: until interrupted)")
	return cmd
}

// topSnapshot asks the daemon for its servers and sessions.
func topSnapshot() (top.Snapshot, error) {
	c, err := dial()
	if err != nil {
		return top.Snapshot{}, err
	}
	defer c.Close()
	// A daemon that does not answer is an error to show, not a hang.
	c.SetDeadline(time.Now().Add(10 * time.Second))
	procs, err := c.Processes(api.PsRequest{})
	if err != nil {
		return top.Snapshot{}, err
	}
	var sessions api.SessionList
	if err := c.Call(api.TypeSessions, &api.SessionsRequest{}, &sessions); err != nil {
		return top.Snapshot{}, err
	}
	return top.Build(procs, sessions.Sessions, time.Now()), nil
}
