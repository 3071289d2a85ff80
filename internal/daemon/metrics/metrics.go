// Package metrics is the daemon's Prometheus metrics: the counters and the
// histogram, bumped where things happen; the exposition, written with
// promtext; and the HTTP endpoint that serves it (with Go's profiles beside
// it when asked).
//
// It never reads the daemon's state itself: the daemon hands its gauges
// (sessions, processes, breakers, brokers, recovery, usage) over through
// Source at scrape time, so they cannot drift from that state and this
// package needs none of the daemon's types. It must not import
// internal/daemon, which builds on it.
//
// Labels are bounded sets (states, outcomes, results), never server names
// or commands: the cardinality stays fixed and a scrape reveals no names.
// (The per-name usage families of --metrics-names are the daemon's
// gauges, opt-in there.)
package metrics

import (
	"errors"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/promtext"
	"github.com/seed-86a41135/supervisor/shutdown"
)

// Source is all a Set asks of the daemon: the gauge families, computed
// from its state when a scrape asks.
type Source interface {
	Gauges() []promtext.Family
}

// SourceFunc lets a plain function be a Source, so the daemon hands over
// a method of its own rather than growing an exported one.
type SourceFunc func() []promtext.Family

// Gauges calls f.
func (f SourceFunc) Gauges() []promtext.Family { return f() }

// Set owns every Prometheus metric of one daemon (no global state: two
// daemons in one test binary count apart). Every method is nil-safe: a
// daemon without metrics pays nothing.
type Set struct {
	src     Source
	spawns  *promtext.CounterVec
	stops   *promtext.CounterVec
	cascade *promtext.HistogramVec
	health  *promtext.CounterVec
	lazy    *promtext.CounterVec
	limits  *promtext.CounterVec
	refuses *promtext.CounterVec
	sandbox *promtext.CounterVec
}

// New is a Set whose counters are all zero and whose gauges come from
// src (nil: none).
func New(src Source) *Set {
	var outcomes []string
	for _, r := range []shutdown.Result{shutdown.ExitedOnEOF, shutdown.ExitedOnSIGTERM, shutdown.Killed,
		shutdown.AlreadyGone, shutdown.Unkillable, shutdown.Interrupted, shutdown.Failed} {
		outcomes = append(outcomes, outcomeLabel(r))
	}
	return &Set{
		src: src,
		spawns: promtext.NewCounterVec("supervisor_spawns_total",
			"Servers started (result ok) or that could not be started (result failed).", "result", "ok", "failed"),
		stops: promtext.NewCounterVec("supervisor_stops_total",
			"Servers stopped through the stop cascade, by how each ended.", "outcome", outcomes...),
		cascade: promtext.NewHistogramVec("supervisor_cascade_duration_seconds",
			"How long one stop cascade took, graces included: reason stop for stopping live servers "+
				"(a request, a session ending, an instance cap), exited for sweeping what an exited server left behind.",
			"reason",
			// From an EOF exit in milliseconds to a grace run out and SIGKILL.
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "stop", "exited"),
		health: promtext.NewCounterVec("supervisor_health_checks_total",
			"Periodic health checks of shared servers, by result (pass or fail).", "result", "pass", "fail"),
		lazy: promtext.NewCounterVec("supervisor_lazy_total",
			"Lazy and idle servers (design §11): upstreams started on demand (start), stopped for idleness (idle_stop), "+
				"requests answered from the cache (cache_hit) and not (cache_miss).", "event", "start", "idle_stop", "cache_hit", "cache_miss"),
		refuses: promtext.NewCounterVec("supervisor_broker_refused_total",
			"Messages a broker refused to relay because peers could read them differently (a JSON-RPC key written twice, "+
				"in another case or escaped; see jsonrpc's package doc).", "kind", "ambiguous"),
		sandbox: promtext.NewCounterVec("supervisor_sandbox_denied_total",
			"What a sandbox refused: runs whose sandbox could not be had here (run), "+
				"connections to the daemon from sandboxed servers' processes (daemon), "+
				"hosts a sandboxed server's egress proxy refused (network), and what the kernel's audit says Landlock denied "+
				"a server (file, network, signal, socket, process).", "what", "run", "daemon", "network", "file", "signal", "socket", "process"),
		limits: promtext.NewCounterVec("supervisor_limit_hits_total",
			"Servers on which the kernel enforced a limit: memory_max (the OOM killer killed a process of it), "+
				"pids_max (a fork failed at the cap); once per server and limit.", "limit", cgroup.HitMemory, cgroup.HitPids),
	}
}

// outcomeLabel turns a cascade result into a label value: "exited on
// SIGTERM" → "exited_on_sigterm".
func outcomeLabel(r shutdown.Result) string {
	if r == "" {
		return "unknown"
	}
	return strings.ReplaceAll(strings.ToLower(string(r)), " ", "_")
}

// Spawn counts one spawn.Start: err nil is a started server.
func (m *Set) Spawn(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.spawns.Inc("failed")
		return
	}
	m.spawns.Inc("ok")
}

// LimitHit counts a limit the kernel enforced on a server (cgroup.HitMemory
// or cgroup.HitPids).
func (m *Set) LimitHit(limit string) {
	if m == nil {
		return
	}
	m.limits.Inc(limit)
}

// LazyEvents adds what a broker's lazy counters grew by.
func (m *Set) LazyEvents(starts, idleStops, hits, misses uint64) {
	if m == nil {
		return
	}
	for label, n := range map[string]uint64{"start": starts, "idle_stop": idleStops, "cache_hit": hits, "cache_miss": misses} {
		if n > 0 {
			m.lazy.Add(label, float64(n))
		}
	}
}

// SandboxDenied counts a refusal of the sandbox's: what is "run",
// "daemon", "network", or a kind of Landlock denial (denials.Denial.What).
func (m *Set) SandboxDenied(what string) {
	if m == nil {
		return
	}
	m.sandbox.Inc(what)
}

// Refused adds messages brokers refused as ambiguous.
func (m *Set) Refused(n uint64) {
	if m == nil {
		return
	}
	m.refuses.Add("ambiguous", float64(n))
}

// Stopped counts one stopped server by its outcome.
func (m *Set) Stopped(o shutdown.Outcome) {
	if m == nil {
		return
	}
	m.stops.Inc(outcomeLabel(o.Result))
}

// HealthCheck counts one periodic health check.
func (m *Set) HealthCheck(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.health.Inc("fail")
		return
	}
	m.health.Inc("pass")
}

// CascadeTook puts one stop cascade's duration into the histogram under
// reason: stop (live servers) or exited (what an exited server left).
func (m *Set) CascadeTook(reason string, took time.Duration) {
	if m == nil {
		return
	}
	m.cascade.Observe(reason, took.Seconds())
}

// Gather renders every metric in the Prometheus text format: the counters
// and the histogram, and the Source's gauges as they are now, all sorted
// by name (promtext.Write).
func (m *Set) Gather() (string, error) {
	if m == nil {
		return "", errors.New("this daemon keeps no metrics")
	}
	fams := []promtext.Family{m.spawns, m.stops, m.cascade, m.health, m.lazy, m.limits, m.refuses, m.sandbox}
	if m.src != nil {
		fams = append(fams, m.src.Gauges()...)
	}
	return promtext.Write(fams...), nil
}
