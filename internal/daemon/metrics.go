package daemon

import (
	"context"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/daemon/metrics"
	"github.com/seed-86a41135/supervisor/internal/promtext"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// The daemon's side of its metrics (internal/daemon/metrics owns the
// counters, the exposition and the HTTP endpoint): the gauges, read from
// the daemon's own state at scrape time so they cannot drift from it, and
// the wiring.

// newMetrics is d's metrics, whose gauges are d's at each scrape.
func newMetrics(d *Daemon) *metrics.Set {
	return metrics.New(metrics.SourceFunc(d.gauges))
}

// listenMetrics binds addr for the metrics endpoint (--metrics-addr), with
// Go's profiles beside it under --pprof.
func (d *Daemon) listenMetrics(addr string) (*metrics.Server, error) {
	return metrics.Listen(addr, d.metrics, d.cfg.Pprof, d.log.Named("metrics"))
}

// stopCascade is d.cascade.Stop, timed into the cascade histogram under
// reason (stop or exited).
func (d *Daemon) stopCascade(ctx context.Context, reason string, targets []shutdown.Target, opt shutdown.Options) []shutdown.Outcome {
	began := time.Now()
	out := d.cascade.Stop(ctx, targets, opt)
	d.metrics.CascadeTook(reason, time.Since(began))
	return out
}

// serveMetrics answers `supervisor metrics` on the socket: the same
// exposition as /metrics, with or without --metrics-addr.
func (d *Daemon) serveMetrics(conn *api.Conn) error {
	text, err := d.metrics.Gather()
	if err != nil {
		return conn.SendError(1, "metrics: %v", err)
	}
	return conn.Send(api.TypeMetrics, &api.Metrics{Text: text})
}

// gauges reads the gauge families from the daemon's state.
func (d *Daemon) gauges() []promtext.Family {
	var fams []promtext.Family
	gauge := func(name, help, label string, values map[string]float64) {
		fams = append(fams, promtext.Gauge{Metric: name, Help: help, Label: label, Values: values})
	}
	one := func(name, help string, x float64) { gauge(name, help, "", map[string]float64{"": x}) }
	if d.reg != nil {
		sessions := map[string]float64{string(registry.SessionActive): 0, string(registry.SessionEnding): 0, string(registry.SessionEnded): 0}
		for _, s := range d.reg.Sessions(true) {
			sessions[string(s.State)]++
		}
		gauge("supervisor_sessions", "Sessions in the registry, by state.", "state", sessions)
		procs := map[string]float64{}
		for _, s := range []registry.ProcState{registry.StateStarting, registry.StateRunning, registry.StateStopping,
			registry.StateExited, registry.StateFailed, registry.StateLost} {
			procs[string(s)] = 0
		}
		for _, p := range d.reg.Processes(registry.Filter{All: true}) {
			procs[string(p.State)]++
		}
		gauge("supervisor_processes", "Processes in the registry (exited ones until retention compacts them), by state.", "state", procs)
		fams = append(fams, d.usageGauges()...)
	}
	if d.breakers != nil {
		states := map[string]float64{spawn.BreakerClosed: 0, spawn.BreakerOpen: 0, spawn.BreakerHalfOpen: 0}
		for _, b := range d.breakers.list() {
			states[b.State]++
		}
		gauge("supervisor_breakers", "Circuit breakers, by state.", "state", states)
	}
	if d.brokers != nil {
		var clients int
		var relayed uint64
		stats := d.brokerStats()
		for _, st := range stats {
			clients += len(st.Clients)
			relayed += st.Relayed
		}
		one("supervisor_shared_upstreams", "Shared servers (brokers, run --share) running.", float64(len(stats)))
		one("supervisor_shared_clients", "Clients attached to shared servers, all brokers together.", float64(clients))
		one("supervisor_shared_messages_relayed", "Messages the running brokers relayed (both ways) since each started.", float64(relayed))
	}
	d.mu.Lock()
	rec := d.recovery
	d.mu.Unlock()
	if rec != nil {
		one("supervisor_recovery_adopted", "Processes re-adopted by this daemon's reconcile at start.", float64(rec.Adopted))
		one("supervisor_recovery_lost", "Records found gone (lost) by this daemon's reconcile at start.", float64(rec.Lost))
		one("supervisor_recovery_stopped", "Processes stopped by this daemon's reconcile at start (their host was gone).", float64(rec.Stopped))
		one("supervisor_recovery_sessions_ended", "Sessions ended by this daemon's reconcile at start.", float64(rec.SessionsEnded))
		one("supervisor_recovery_duration_seconds", "How long this daemon's reconcile at start took.", rec.DurationMS/1000)
	}
	return fams
}

// usageGauges sum what the running servers cost (the usage sample ps
// uses): in all, and by server name when the daemon runs with
// --metrics-names (a series per name: opt-in, as names can be many and
// may say what a user runs).
func (d *Daemon) usageGauges() []promtext.Family {
	procs := d.reg.Processes(registry.Filter{})
	d.fillUsage(procs)
	mem, cpu, n := map[string]float64{"": 0}, map[string]float64{"": 0}, map[string]float64{"": 0}
	byName := [3]map[string]float64{{}, {}, {}}
	for _, p := range procs {
		if p.Usage == nil {
			continue
		}
		mem[""] += float64(p.Usage.MemoryBytes)
		cpu[""] += p.Usage.CPUSeconds
		n[""] += float64(p.Usage.Procs)
		if d.cfg.MetricsNames {
			name := p.Name
			if name == "" {
				name = "(unnamed)"
			}
			byName[0][name] += float64(p.Usage.MemoryBytes)
			byName[1][name] += p.Usage.CPUSeconds
			byName[2][name] += float64(p.Usage.Procs)
		}
	}
	fams := []promtext.Family{
		promtext.Gauge{Metric: "supervisor_servers_memory_bytes", Help: "Memory of every running server's tree, summed: cgroup charges, " +
			"or resident memory where the cgroup does not account it (see ps).", Values: mem},
		promtext.Gauge{Metric: "supervisor_servers_cpu_seconds", Help: "CPU time used by the running servers, summed " +
			"(a gauge: it falls when a server ends).", Values: cpu},
		promtext.Gauge{Metric: "supervisor_servers_process_count", Help: "Processes of the running servers' trees.", Values: n},
	}
	if d.cfg.MetricsNames {
		fams = append(fams,
			promtext.Gauge{Metric: "supervisor_server_memory_bytes", Help: "Memory of the running servers of each name (--metrics-names).", Label: "name", Values: byName[0]},
			promtext.Gauge{Metric: "supervisor_server_cpu_seconds", Help: "CPU time of the running servers of each name (--metrics-names).", Label: "name", Values: byName[1]},
			promtext.Gauge{Metric: "supervisor_server_process_count", Help: "Processes of the running servers of each name (--metrics-names).", Label: "name", Values: byName[2]})
	}
	return fams
}
