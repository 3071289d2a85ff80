// Package settings is the daemon's tunables: their defaults, the config
// file's per-server overrides, the environment variables that set them,
// and how a run's or ensure's request and the limits are filled from
// them. It is its own package so that what reads a config (config, the
// shim, demo) does not import the daemon.
package settings

import (
	"fmt"
	"strconv"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
	"github.com/seed-86a41135/supervisor/spawn"
)

// Daemon are the daemon's tunables. Defaults is the one place
// their defaults live; flags (and, later, the config file) override them.
type Daemon struct {
	Linger           time.Duration // a shared server outlives its last session by this; 30 s
	Interval         time.Duration // liveness check period of shared servers; 10 s
	CheckTimeout     time.Duration // one health check; 2 s
	FailureThreshold int           // failed liveness checks before a restart; 3
	ReadyTimeout     time.Duration // ensure's wait for readiness; 30 s
	RestartMin       time.Duration // first restart backoff; 1 s, doubling
	RestartMax       time.Duration // backoff ceiling; 30 s
	RestartReset     time.Duration // healthy this long resets the backoff; 5 min
	Breaker          spawn.BreakerConfig
	LogMaxMB         int // captured server logs rotate at this size; 10
	LogBackups       int // rotated logs kept; 3
	// Retention is how long ended sessions and exited, failed or lost
	// processes stay listed before they are compacted away; 7 days
	// (zero or less means the default).
	Retention time.Duration
	// MaxInstances is the live-instance cap per --name and session of a
	// run that sets none; nil means 1 (0: no cap).
	MaxInstances *int
	// Servers are the config file's per-server overrides, by --name.
	Servers map[string]Server
	// VolatileEnv adds to broker.Volatile: variables that differ between
	// sessions and are left out of a shared server's key.
	VolatileEnv []string
	// IdleTimeout closes a request connection (not a server's lifeline)
	// that sends nothing for this long after its hello or its last
	// request; 2 min. Idle connections would otherwise hold the daemon's
	// file descriptors.
	IdleTimeout time.Duration
	// Limits are memory_max, cpu_max and pids_max for every server that
	// sets none of its own (a shared one's broker and upstream together).
	Limits api.Limits
	// Sandbox is every server's policy (sandbox, allow_read, allow_write,
	// allow_env, network at the top of the config).
	Sandbox sandbox.Spec
}

// Server is what a run or ensure of one --name gets where its
// request leaves the value unset (the config file's [servers.NAME]).
type Server struct {
	Grace        time.Duration // 0: the daemon's
	Health       string        // ensure's check (none, tcp, http://...); "": tcp
	MaxInstances *int          // nil: Daemon.MaxInstances
	// Share runs the server shared (run --share) whether or not the host
	// config asks for it.
	Share bool
	// NoShare (share = false) keeps it direct even where it would be
	// shared automatically (it speaks the stateless revision).
	NoShare bool
	// Lazy and Idle (lazy = true, idle = "10m"): run --lazy and --idle.
	Lazy bool
	Idle time.Duration
	// NoFlatten (flatten = false) runs an npx command as given, the runner
	// resident, instead of as the program it would run (package launcher).
	NoFlatten bool
	// Limits (memory_max, cpu_max, pids_max) bound the server's tree.
	Limits api.Limits
	// Sandbox adds to the top-level policy for this server; NoSandbox
	// (sandbox = false) runs it unconfined where the top level would not.
	Sandbox   sandbox.Spec
	NoSandbox bool
}

// ApplyRun fills what a run request of server name left unset from the
// per-server overrides and the defaults.
func (s *Daemon) ApplyRun(name string, req *api.RunRequest) {
	o := s.Servers[name]
	if req.GraceMS <= 0 && o.Grace > 0 {
		req.GraceMS = api.Millis(o.Grace)
	}
	if o.Share && !req.NoShare { // run --share=false beats the config
		req.Share = true
	}
	if o.Lazy {
		req.Lazy = true
	}
	if o.NoFlatten {
		req.NoFlatten = true
	}
	req.Limits = MergeLimits(req.Limits, o.Limits)
	req.Sandbox = MergeSandbox(req.Sandbox, req.NoSandbox, o, s.Sandbox)
	if req.IdleMS <= 0 && o.Idle > 0 {
		req.IdleMS = api.Millis(o.Idle)
	}
	if req.MaxInstances == nil {
		if o.MaxInstances != nil {
			req.MaxInstances = o.MaxInstances
		} else {
			req.MaxInstances = s.MaxInstances
		}
	}
}

// ApplyEnsure does the same for an ensure request; a health check left
// unset is the server's override, else tcp.
func (s *Daemon) ApplyEnsure(name string, req *api.EnsureRequest) {
	o := s.Servers[name]
	if req.GraceMS <= 0 && o.Grace > 0 {
		req.GraceMS = api.Millis(o.Grace)
	}
	if req.Health == "" {
		req.Health = o.Health
		if req.Health == "" {
			req.Health = "tcp"
		}
	}
	req.Limits = MergeLimits(req.Limits, o.Limits)
	req.Sandbox = MergeSandbox(req.Sandbox, req.NoSandbox, o, s.Sandbox)
}

// Defaults returns the defaults of design §5.
func Defaults() Daemon {
	return Daemon{
		Linger:           30 * time.Second,
		Interval:         10 * time.Second,
		CheckTimeout:     2 * time.Second,
		FailureThreshold: 3,
		ReadyTimeout:     30 * time.Second,
		RestartMin:       time.Second,
		RestartMax:       30 * time.Second,
		RestartReset:     5 * time.Minute,
		Breaker:          spawn.BreakerConfig{}.WithDefaults(),
		LogMaxMB:         10,
		LogBackups:       3,
		Retention:        7 * 24 * time.Hour,
		IdleTimeout:      2 * time.Minute,
	}
}

// Environment overrides, for an auto-started daemon (and for tests that
// cannot wait out a 60 s cooldown).
const (
	EnvBreakerCooldown = "SUPERVISOR_BREAKER_COOLDOWN"
	EnvLogMaxMB        = "SUPERVISOR_LOG_MAX_MB"
	EnvRetention       = "SUPERVISOR_RETENTION"
	EnvIdleTimeout     = "SUPERVISOR_IDLE_TIMEOUT"
)

// EnvCgroups set to "off" turns cgroups off for an auto-started daemon
// (the default is auto).
const EnvCgroups = "SUPERVISOR_CGROUPS"

// EnvInPlace is api.EnvInPlace.
const EnvInPlace = api.EnvInPlace

// EnvLazyFront set to "off" keeps a lazy client from answering its host
// from the cache itself: a broker serves it from the start, as before
// fronts (for comparison).
const EnvLazyFront = "SUPERVISOR_LAZY_FRONT"

// EnvMetricsAddr is --metrics-addr for an auto-started daemon.
const EnvMetricsAddr = "SUPERVISOR_METRICS_ADDR"

// EnvPprof set to 1 is --pprof for an auto-started daemon.
const EnvPprof = "SUPERVISOR_PPROF"

// EnvMetricsNames set to 1 is --metrics-names for an auto-started daemon.
const EnvMetricsNames = "SUPERVISOR_METRICS_NAMES"

// EnvSandboxNetns set to "off" keeps a daemon that could make network
// namespaces from making them: a server with a network list then reaches
// its egress proxy on the daemon's loopback, enforced by port only, as
// where the daemon is not root (for comparison, and tests of that path).
const EnvSandboxNetns = "SUPERVISOR_SANDBOX_NETNS"

// EnvLocalAfter is api.EnvLocalAfter.
const EnvLocalAfter = api.EnvLocalAfter

// ApplyEnv overrides settings from the environment, naming the variable of
// a value it cannot use.
func (s *Daemon) ApplyEnv(getenv func(string) string) error {
	if v := getenv(EnvBreakerCooldown); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q: want a positive duration such as 60s", EnvBreakerCooldown, v)
		}
		s.Breaker.Cooldown = d
	}
	if v := getenv(EnvLogMaxMB); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("%s=%q: want a positive number of megabytes", EnvLogMaxMB, v)
		}
		s.LogMaxMB = n
	}
	if v := getenv(EnvRetention); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q: want a positive duration such as 168h (days are not a unit)", EnvRetention, v)
		}
		s.Retention = d
	}
	if v := getenv(EnvIdleTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q: want a positive duration such as 2m", EnvIdleTimeout, v)
		}
		s.IdleTimeout = d
	}
	return nil
}

// MergeSandbox is the policy a server runs under, nil for none: the
// top-level default, its [servers.NAME] and its request's flags, each
// adding paths and names to the one before and naming the network where
// it does. The request's --sandbox turns it on whatever the config says;
// its --sandbox=false, or the server's sandbox = false, turns off a
// default.
func MergeSandbox(req *sandbox.Spec, off bool, o Server, def sandbox.Spec) *sandbox.Spec {
	asked := req != nil && req.Enabled
	if off || o.NoSandbox && !asked {
		return nil
	}
	var out sandbox.Spec
	for _, sp := range []*sandbox.Spec{&def, &o.Sandbox, req} {
		if sp == nil {
			continue
		}
		out.Enabled = out.Enabled || sp.Enabled
		out.Read = append(out.Read, sp.Read...)
		out.Write = append(out.Write, sp.Write...)
		out.Env = append(out.Env, sp.Env...)
		if sp.Network != "" {
			out.Network = sp.Network
		}
		if sp.OpenFiles != 0 {
			out.OpenFiles = sp.OpenFiles
		}
	}
	if !out.Enabled {
		return nil
	}
	return &out
}

// MergeLimits fills the limits l leaves unset from def; nil when neither
// sets any. A limit set to none (cgroup.MemoryNone, ...) stays set: it
// lifts def's.
func MergeLimits(l *api.Limits, def api.Limits) *api.Limits {
	var out api.Limits
	if l != nil {
		out = *l
	}
	if out.MemoryMax == 0 {
		out.MemoryMax = def.MemoryMax
	}
	if out.CPUMax == 0 {
		out.CPUMax = def.CPUMax
	}
	if out.PidsMax == 0 {
		out.PidsMax = def.PidsMax
	}
	if out == (api.Limits{}) {
		return nil
	}
	return &out
}

// EffectiveLimits are the limits a server runs with: its own (l, from its
// run flags and [servers.NAME]) over def (the config's for all), a none
// lifting def's; nil when nothing is bounded.
func EffectiveLimits(l *api.Limits, def api.Limits) *api.Limits {
	m := MergeLimits(l, def)
	if m == nil {
		return nil
	}
	if m.MemoryMax == cgroup.MemoryNone {
		m.MemoryMax = 0
	}
	if m.CPUMax == cgroup.CPUNone {
		m.CPUMax = 0
	}
	if m.PidsMax == cgroup.PidsNone {
		m.PidsMax = 0
	}
	if *m == (api.Limits{}) {
		return nil
	}
	return m
}
