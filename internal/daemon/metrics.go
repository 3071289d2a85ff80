package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/promtext"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// metrics owns every Prometheus metric of a daemon (no global state).
// Counters and the histogram are bumped where things happen; the gauges
// (sessions, processes, breakers, recovery) are read from the daemon's own
// state at scrape time, so they cannot drift from it. Every method is
// nil-safe: a daemon without metrics pays nothing.
//
// Labels are bounded sets (states, outcomes, results), never server names
// or commands: the cardinality stays fixed and a scrape reveals no names.
type metrics struct {
	d       *Daemon
	spawns  *promtext.CounterVec
	stops   *promtext.CounterVec
	cascade *promtext.HistogramVec
	health  *promtext.CounterVec
	lazy    *promtext.CounterVec
	limits  *promtext.CounterVec
	refuses *promtext.CounterVec
}

func newMetrics(d *Daemon) *metrics {
	var outcomes []string
	for _, r := range []shutdown.Result{shutdown.ExitedOnEOF, shutdown.ExitedOnSIGTERM, shutdown.Killed,
		shutdown.AlreadyGone, shutdown.Unkillable, shutdown.Interrupted, shutdown.Failed} {
		outcomes = append(outcomes, outcomeLabel(r))
	}
	return &metrics{
		d: d,
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

// spawn counts one spawn.Start: err nil is a started server.
func (m *metrics) spawn(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.spawns.Inc("failed")
		return
	}
	m.spawns.Inc("ok")
}

// limitHit counts a limit the kernel enforced on a server.
func (m *metrics) limitHit(limit string) {
	if m == nil {
		return
	}
	m.limits.Inc(limit)
}

// lazyEvents adds what a broker's lazy counters grew by.
func (m *metrics) lazyEvents(starts, idleStops, hits, misses uint64) {
	if m == nil {
		return
	}
	for label, n := range map[string]uint64{"start": starts, "idle_stop": idleStops, "cache_hit": hits, "cache_miss": misses} {
		if n > 0 {
			m.lazy.Add(label, float64(n))
		}
	}
}

// refused adds messages brokers refused as ambiguous.
func (m *metrics) refused(n uint64) {
	if m == nil {
		return
	}
	m.refuses.Add("ambiguous", float64(n))
}

// stopped counts one stopped server by its outcome.
func (m *metrics) stopped(o shutdown.Outcome) {
	if m == nil {
		return
	}
	m.stops.Inc(outcomeLabel(o.Result))
}

// healthCheck counts one periodic health check.
func (m *metrics) healthCheck(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.health.Inc("fail")
		return
	}
	m.health.Inc("pass")
}

// stopCascade is d.cascade.Stop, timed into the cascade histogram under
// reason (stop or exited).
func (d *Daemon) stopCascade(ctx context.Context, reason string, targets []shutdown.Target, opt shutdown.Options) []shutdown.Outcome {
	began := time.Now()
	out := d.cascade.Stop(ctx, targets, opt)
	if d.metrics != nil {
		d.metrics.cascade.Observe(reason, time.Since(began).Seconds())
	}
	return out
}

// gather renders every metric in the Prometheus text format.
func (m *metrics) gather() (string, error) {
	if m == nil {
		return "", errors.New("this daemon keeps no metrics")
	}
	return promtext.Write(append([]promtext.Family{m.spawns, m.stops, m.cascade, m.health, m.lazy, m.limits, m.refuses}, m.d.gauges()...)...), nil
}

// serveMetrics answers `supervisor metrics` on the socket: the same
// exposition as /metrics, with or without --metrics-addr.
func (d *Daemon) serveMetrics(conn *api.Conn) error {
	text, err := d.metrics.gather()
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

// metricsServer serves /metrics over HTTP: an actor of the daemon's run
// group, so it stops with the daemon.
type metricsServer struct {
	srv  *http.Server
	ln   net.Listener
	log  hclog.Logger
	quit chan struct{}
}

// listenMetrics binds addr for the metrics endpoint. An address that is
// not loopback is served, with a loud warning: the metrics carry no names,
// but they say how busy this user's agents are to anyone who can reach it.
func (d *Daemon) listenMetrics(addr string) (*metricsServer, error) {
	log := d.log.Named("metrics")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		log.Warn("METRICS ARE SERVED BEYOND THIS MACHINE: the address is not loopback; anyone who can reach it sees this user's session and process counts (use 127.0.0.1:PORT)",
			"addr", ln.Addr().String())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		text, err := d.metrics.gather()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", promtext.ContentType)
		_, _ = io.WriteString(w, text) // fails only once the scraper has gone
	})
	log.Info("serving Prometheus metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	if d.cfg.Pprof {
		// Opt-in: profiles show the daemon's internals (and cost CPU while
		// taken); the handlers go on this mux, never on http's default one.
		mux.HandleFunc("/debug/pprof/", servePprof)
		log.Info("serving pprof profiles", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	}
	return &metricsServer{
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug})},
		ln: ln, log: log, quit: make(chan struct{}),
	}, nil
}

// run serves until stop. The endpoint failing does not take the daemon and
// its servers down: it is logged, and the actor waits for the others.
func (s *metricsServer) run() error {
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("metrics endpoint failed; the daemon goes on without it", "err", err)
		<-s.quit
	}
	return nil
}

func (s *metricsServer) stop(error) {
	close(s.quit)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
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
