package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/session"
)

type eventsOptions struct {
	follow  bool
	json    bool
	session string
	lines   int
	wide    bool
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
			if !o.follow && o.json {
				return writeJSON(out, resp.Events)
			}
			pr := &eventPrinter{w: out, asJSON: o.json, wide: o.wide, header: !o.json}
			if err := pr.print(resp.Events); err != nil || !o.follow {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return followEvents(ctx, c, pr, o.session, resp.Last)
		},
	}
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing new events until interrupted (with --json: one object per line)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	cmd.Flags().StringVar(&o.session, "session", "", "only this session's events")
	cmd.Flags().IntVar(&o.lines, "lines", 100, "how many of the newest events to print first (0: all the log keeps)")
	addWideFlags(cmd, &o.wide)
	cmd.Flags().Lookup("wide").Usage = "print names in full, and each event's time as well as how long ago it was"
	return cmd
}

// followEvents asks for the events after last every eventsPoll until ctx is
// done (an interrupt: a normal end) or the daemon goes away (an error).
func followEvents(ctx context.Context, c *api.Client, pr *eventPrinter, session string, last uint64) error {
	tick := time.NewTicker(eventsPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		var resp api.EventList
		if err := c.Call(api.TypeEvents, &api.EventsRequest{Session: session, After: last}, &resp); err != nil {
			var refused *api.Error
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.As(err, &refused):
				return fmt.Errorf("follow events: %w", err)
			}
			return fmt.Errorf("follow events: the daemon went away: %w", err)
		}
		if err := pr.print(resp.Events); err != nil {
			return err
		}
		last = resp.Last
	}
}

// eventPrinter prints events as aligned lines, or as JSON lines. Its
// columns are as wide as the widest cell printed so far: -f prints events
// as they come, so a wider cell later widens its column from there on.
type eventPrinter struct {
	w      io.Writer
	asJSON bool
	wide   bool
	header bool // the header line is still to be printed
	widths [4]int
}

func (p *eventPrinter) print(evs []api.Event) error {
	if p.asJSON {
		enc := json.NewEncoder(p.w)
		for _, ev := range evs {
			if err := enc.Encode(ev); err != nil {
				return fmt.Errorf("print events: %w", err)
			}
		}
		return nil
	}
	rows := make([][5]string, 0, len(evs)+1)
	if p.header {
		rows = append(rows, [5]string{"TIME", "KIND", "SESSION", "PROCESS", "DETAIL"})
		p.header = false
	}
	now := time.Now()
	for _, ev := range evs {
		when := ago(ev.Time, now)
		if p.wide {
			when = ev.Time.Local().Format(time.RFC3339) + " (" + when + ")"
		}
		rows = append(rows, [5]string{when, clean(ev.Kind), nameCell(ev.Session, p.wide), nameCell(ev.Process, p.wide), clean(ev.Detail)})
	}
	for _, r := range rows {
		for i := range p.widths {
			p.widths[i] = max(p.widths[i], cellWidth(r[i]))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, wd := range p.widths {
			b.WriteString(r[i])
			b.WriteString(strings.Repeat(" ", wd-cellWidth(r[i])+2))
		}
		b.WriteString(r[4])
		b.WriteByte('\n')
	}
	if _, err := io.WriteString(p.w, b.String()); err != nil {
		return fmt.Errorf("print events: %w", err)
	}
	return nil
}
