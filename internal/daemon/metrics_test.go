package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// TestMetricsNilSafe: a daemon without metrics pays nothing and panics
// nowhere.
func TestMetricsNilSafe(t *testing.T) {
	var m *metrics
	m.spawn(nil)
	m.spawn(errors.New("no such file"))
	m.stopped(shutdown.Outcome{Result: shutdown.Killed})
	m.healthCheck(nil)
	if _, err := m.gather(); err == nil {
		t.Error("gather on nil metrics: no error")
	}
}

// TestMetricsCollector: the gauges are read from the registry, the
// breakers and the recovery summary at scrape time; the counters count.
func TestMetricsCollector(t *testing.T) {
	d := &Daemon{
		reg: registry.New(nil, nil,
			[]registry.Session{{ID: "a", State: registry.SessionActive}, {ID: "b", State: registry.SessionEnded}},
			[]registry.Process{{ID: "p-1", Session: "a", State: registry.StateRunning},
				{ID: "p-2", Session: "a", State: registry.StateRunning}, {ID: "p-3", Session: "b", State: registry.StateExited}}),
		breakers: &breakers{m: map[string]*spawn.Breaker{
			"k1": {BreakerState: registry.BreakerState{Key: "k1", State: spawn.BreakerOpen}},
			"k2": {BreakerState: registry.BreakerState{Key: "k2", State: spawn.BreakerClosed}}}},
		recovery: &api.Recovery{Adopted: 3, Lost: 1, Stopped: 2, DurationMS: 1500},
	}
	d.metrics = newMetrics(d)
	d.metrics.spawn(nil)
	d.metrics.spawn(nil)
	d.metrics.spawn(errors.New("exec: not found"))
	d.metrics.stopped(shutdown.Outcome{Result: shutdown.ExitedOnSIGTERM})
	d.metrics.healthCheck(errors.New("refused"))
	text, err := d.metrics.gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`supervisor_sessions{state="active"} 1`,
		`supervisor_sessions{state="ended"} 1`,
		`supervisor_sessions{state="ending"} 0`,
		`supervisor_processes{state="running"} 2`,
		`supervisor_processes{state="exited"} 1`,
		`supervisor_processes{state="lost"} 0`,
		`supervisor_breakers{state="open"} 1`,
		`supervisor_breakers{state="closed"} 1`,
		`supervisor_breakers{state="half-open"} 0`,
		`supervisor_recovery_adopted 3`,
		`supervisor_recovery_lost 1`,
		`supervisor_recovery_stopped 2`,
		`supervisor_recovery_duration_seconds 1.5`,
		`supervisor_spawns_total{result="ok"} 2`,
		`supervisor_spawns_total{result="failed"} 1`,
		`supervisor_stops_total{outcome="exited_on_sigterm"} 1`,
		`supervisor_stops_total{outcome="killed"} 0`,
		`supervisor_health_checks_total{result="fail"} 1`,
		`supervisor_cascade_duration_seconds_count{reason="stop"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
}

func TestMetricsOutcomeLabel(t *testing.T) {
	for r, want := range map[shutdown.Result]string{
		shutdown.ExitedOnEOF: "exited_on_eof", shutdown.Unkillable: "could_not_be_killed", "": "unknown",
	} {
		if got := outcomeLabel(r); got != want {
			t.Errorf("outcomeLabel(%q) = %q, want %q", r, got, want)
		}
	}
}
