package daemon

import (
	"errors"
	"fmt"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// Tunables are what a config reload swaps: the settings and the two
// default graces. Config.Reload produces them.
type Tunables struct {
	Settings settings.Daemon
	Grace    time.Duration // default SIGTERM grace of the stop cascade
	EOFGrace time.Duration // a server whose host died gets this to exit on EOF
	File     string        // the config file read
	Loaded   bool          // it exists (false: built-in defaults)
}

// tunables is the daemon's current snapshot; never modified once stored.
type tunables struct {
	settings *settings.Daemon
	grace    time.Duration
	eofGrace time.Duration
}

// errNoReload is a reload of a daemon started without a config to reload
// (supervisor init, tests).
var errNoReload = errors.New("this daemon was started without a config file to reload")

// settings returns the current settings snapshot: read it once per piece
// of work and never modify it (a reload stores a new one).
func (d *Daemon) settings() *settings.Daemon { return d.tun.Load().settings }

// defaultGrace is the cascade's default SIGTERM grace as of now.
func (d *Daemon) defaultGrace() time.Duration { return d.tun.Load().grace }

// eofGrace is the host-death EOF grace as of now.
func (d *Daemon) eofGrace() time.Duration { return d.tun.Load().eofGrace }

// setTunables stores a new snapshot, filling unset values with defaults,
// and hands the breaker thresholds to the breakers.
func (d *Daemon) setTunables(s settings.Daemon, grace, eofGrace time.Duration) {
	if grace <= 0 {
		grace = shutdown.DefaultGrace
	}
	if eofGrace <= 0 {
		eofGrace = shutdown.DefaultEOFGrace
	}
	d.tun.Store(&tunables{settings: &s, grace: grace, eofGrace: eofGrace})
	if d.breakers != nil {
		d.breakers.setConfig(s.Breaker)
	}
}

// reload re-reads the config file through Config.Reload (SIGHUP, or
// `supervisor daemon reload`). On success the new values apply to new
// work from now on: runs, ensures and their per-server overrides, breaker
// thresholds and cooldowns (from the next failure recorded), health check
// timeouts, the default and EOF graces of stops begun from now on, log
// rotation size and retention. What is already running keeps what it
// started with: a server's grace, a shared server's linger, health
// interval and restart backoff. On failure nothing changes.
func (d *Daemon) reload() (*Tunables, error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	if d.cfg.Reload == nil {
		return nil, errNoReload
	}
	t, err := d.cfg.Reload()
	if err != nil {
		d.log.Error(fmt.Sprintf("config reload failed: %v; keeping the old config", err))
		d.event("daemon.reload", "", "", fmt.Sprintf("failed: %v; keeping the old config", err))
		return nil, err
	}
	d.setTunables(t.Settings, t.Grace, t.EOFGrace)
	d.log.Info("config reloaded", "file", t.File, "loaded", t.Loaded)
	d.event("daemon.reload", "", "", "config reloaded from "+t.File)
	return t, nil
}

// serveReload answers `supervisor daemon reload`.
func (d *Daemon) serveReload(conn *api.Conn) error {
	t, err := d.reload()
	if err != nil {
		return conn.SendError(1, "%v", err)
	}
	return conn.Send(api.TypeReloaded, &api.Reloaded{File: t.File, Loaded: t.Loaded})
}

// setConfig changes the thresholds and cooldowns of failures recorded from
// now on; a breaker already open keeps the retry time it was given.
func (b *breakers) setConfig(cfg spawn.BreakerConfig) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfg = cfg.WithDefaults()
}
