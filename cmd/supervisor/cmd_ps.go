package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/session"
	"github.com/seed-86a41135/supervisor/usage"
)

type psOptions struct {
	all     bool
	session string
	json    bool
	wide    bool
}

func newPsCommand() *cobra.Command {
	var o psOptions
	cmd := &cobra.Command{
		Use:   "ps [--all] [--session ID] [--json]",
		Short: "List supervised processes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			req := api.PsRequest{All: o.all, Session: o.session}
			if o.json {
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
			var resp api.Processes
			if resp.Processes, err = c.Processes(req); err != nil {
				return err
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "ID\tSESSION\tNAME\tPID\tSTATE\tMEM\tCPU\tPROCS\tSTARTED\tHEALTH\tRESTARTS\tPORT\tCOMMAND")
			now := time.Now()
			for _, p := range resp.Processes {
				port := "-"
				if p.Port > 0 {
					port = fmt.Sprint(p.Port)
				}
				mem, cpu, procs := usageCells(p.Usage)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", p.ID, orDash(p.Session), nameCell(p.Name, o.wide),
					pidOrDash(p.PID), stateCell(p), mem, cpu, procs, ago(p.StartedAt, now), healthCell(p), p.Restarts, port, shortCommand(p.Argv, o.wide))
				// A shared server's clients, under it: one per session.
				for _, cl := range p.Clients {
					fmt.Fprintf(tw, "  %s\t%s\t%s\t-\tattached\t-\t-\t-\t%s\t-\t-\t-\tclient of %s\n", cl.ID, orDash(clean(cl.Session)),
						nameCell(p.Name, o.wide), ago(cl.Since, now), p.ID)
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&o.all, "all", false, "include exited, failed and lost processes")
	cmd.Flags().StringVar(&o.session, "session", "", "only this session's processes")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	addWideFlags(cmd, &o.wide)
	return cmd
}

// usageCells are the MEM, CPU and PROCS columns: what a running server
// or a session costs now, dashes when it was not measured.
func usageCells(u *registry.Usage) (mem, cpu, procs string) {
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
func stateCell(p registry.Process) string {
	if len(p.LimitHit) == 0 {
		return string(p.State)
	}
	return string(p.State) + "(" + strings.Join(p.LimitHit, ",") + ")"
}

// healthCell is the HEALTH column: a shared server that is not safely
// shareable says so there.
func healthCell(p registry.Process) string {
	if p.Unsafe != "" {
		return "unsafe: " + clean(p.Unsafe)
	}
	return orDash(p.Health)
}
