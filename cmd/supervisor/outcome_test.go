//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/seed-86a41135/supervisor/api"
)

// TestHostKillOutcomeIsTheTrueOne: a server that exits on stdin EOF, run
// through a shim under a host that is SIGKILLed, is recorded as "exited on
// EOF" every time, alike in its stop event, its record (ps --all --json)
// and the stops counter. The exit on EOF races the daemon's own reaction to
// the host's death (the reaper may see the exit before the host watch
// fires, or while the cascade signals); whoever wins, the outcome comes
// from the real exit status, and the stop is recorded once.
func TestHostKillOutcomeIsTheTrueOne(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("events:\n%s", in.mustRun("events", "--lines", "0"))
		}
	})
	const n = 8
	const want = "exited on EOF"
	var ids []string
	for i := 0; i < n; i++ {
		h := in.startHost(t, 1, "--", bin, "_fixture", "echo", "--ready")
		h.cmd.Process.Kill() // SIGKILL: the host's pipes close with it
		waitGonePID(t, h.servers[0], h.tokens[0])
		p := waitRecord(t, in, h.servers[0], func(p api.Process) bool { return p.State.Final() && p.Stop != nil })
		if p.State != api.StateExited || p.ExitCode == nil || *p.ExitCode != 0 || p.Signal != "" {
			t.Errorf("run %d: record %s is %s (code %v, signal %q), want exited with code 0", i, p.ID, p.State, p.ExitCode, p.Signal)
		}
		if p.Stop.Result != want {
			t.Errorf("run %d: ps --all --json says %s %q, want %q", i, p.ID, p.Stop.Result, want)
		}
		ids = append(ids, p.ID)
	}
	// One stop event per server, each with the true outcome.
	evs := in.eventsJSON("--lines", "0")
	for _, id := range ids {
		var stops []string
		for _, ev := range evs {
			if ev.Process == id && ev.Kind == "process.stop" {
				stops = append(stops, ev.Detail)
			}
		}
		if len(stops) != 1 || !strings.Contains(stops[0], ": "+want) {
			t.Errorf("stop events of %s: %q, want one saying %q", id, stops, want)
		}
	}
	fams := parseMetrics(t, in.mustRun("metrics"))
	for outcome, count := range map[string]float64{"exited_on_eof": n, "exited_on_sigterm": 0, "already_gone": 0, "killed": 0} {
		if got := sample(fams, "supervisor_stops_total", map[string]string{"outcome": outcome}); got != count {
			t.Errorf("supervisor_stops_total{outcome=%q} = %v, want %v", outcome, got, count)
		}
	}
}
