package daemon

import (
	"strings"
	"testing"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/spawn"
)

// TestMetricsGauges: the gauges are read from the registry, the breakers
// and the recovery summary at scrape time, and written with the counters
// (internal/daemon/metrics tests those).
func TestMetricsGauges(t *testing.T) {
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
	d.metrics.Spawn(nil)
	text, err := d.metrics.Gather()
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
		`supervisor_spawns_total{result="ok"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	// A second scrape reads the state as it is then.
	d.reg = registry.New(nil, nil, nil, nil)
	if text, _ := d.metrics.Gather(); !strings.Contains(text, `supervisor_processes{state="running"} 0`+"\n") {
		t.Errorf("the gauges did not follow the registry:\n%s", text)
	}
}
