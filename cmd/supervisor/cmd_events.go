package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/session"
)

type eventsOptions struct {
	follow  bool
	json    bool
	session string
	lines   int
}

// eventsPoll is how often -f asks for new events: the daemon answers
// requests, it does not push, and a fifth of a second is as live as a
// person watching needs.
const eventsPoll = 200 * time.Millisecond

func newEventsCommand() *cobra.Command {
	var o eventsOptions
	cmd := &cobra.Command{
		Use:   "events [-f] [--json] [--session ID] [--lines N]",
		Short: "Show the lifecycle log: sessions, processes, health, breakers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.lines < 0 {
				return fmt.Errorf("--lines %d: must not be negative", o.lines)
			}
			if o.session != "" {
				if err := session.ValidateID(o.session); err != nil {
					return fmt.Errorf("--session: %w", err)
				}
			}
			c, err := dial()
			if err != nil {
				return err
			}
			defer c.Close()
			var resp api.EventList
			if err := c.Call(api.TypeEvents, &api.EventsRequest{Session: o.session, Limit: o.lines}, &resp); err != nil {
				return fmt.Errorf("read events: %w", err)
			}
			out := cmd.OutOrStdout()
			if !o.follow {
				if o.json {
					return writeJSON(out, resp.Events)
				}
				printEventHeader(out)
				return printEvents(out, resp.Events, false)
			}
			if !o.json {
				printEventHeader(out)
			}
			if err := printEvents(out, resp.Events, o.json); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return followEvents(ctx, c, out, o, resp.Last)
		},
	}
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing new events until interrupted (with --json: one object per line)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	cmd.Flags().StringVar(&o.session, "session", "", "only this session's events")
	cmd.Flags().IntVar(&o.lines, "lines", 100, "how many of the newest events to print first (0: all the log keeps)")
	return cmd
}

// followEvents asks for the events after last every eventsPoll until ctx is
// done (an interrupt: a normal end) or the daemon goes away (an error).
func followEvents(ctx context.Context, c *api.Client, out io.Writer, o eventsOptions, last uint64) error {
	tick := time.NewTicker(eventsPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		var resp api.EventList
		if err := c.Call(api.TypeEvents, &api.EventsRequest{Session: o.session, After: last}, &resp); err != nil {
			var refused *api.Error
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.As(err, &refused):
				return fmt.Errorf("follow events: %w", err)
			}
			return fmt.Errorf("follow events: the daemon went away: %w", err)
		}
		if err := printEvents(out, resp.Events, o.json); err != nil {
			return err
		}
		last = resp.Last
	}
}

func printEventHeader(w io.Writer) {
	fmt.Fprintf(w, "%-25s  %-18s  %-14s  %-12s  %s\n", "TIME", "KIND", "SESSION", "PROCESS", "DETAIL")
}

// printEvents prints one line per event: a fixed-width line, or with
// asJSON one JSON object (JSON lines, for -f --json).
func printEvents(w io.Writer, evs []registry.Event, asJSON bool) error {
	enc := json.NewEncoder(w)
	for _, ev := range evs {
		var err error
		if asJSON {
			err = enc.Encode(ev)
		} else {
			_, err = fmt.Fprintf(w, "%-25s  %-18s  %-14s  %-12s  %s\n", ev.Time.Local().Format(time.RFC3339),
				ev.Kind, orDash(ev.Session), orDash(ev.Process), clean(ev.Detail))
		}
		if err != nil {
			return fmt.Errorf("print events: %w", err)
		}
	}
	return nil
}
