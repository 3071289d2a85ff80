package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/service"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/session"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// helloTimeout bounds how long a new connection may take to say hello.
const helloTimeout = 10 * time.Second

// handle serves one connection: peer check, hello, then requests until the
// peer closes. A run request turns the connection into that server's
// lifeline.
func (d *Daemon) handle(conn *api.Conn) {
	pid, err := conn.CheckPeer()
	if err != nil {
		d.log.Warn("refusing connection", "peer_pid", pid, "err", err)
		return
	}
	log := d.log.With("peer", pid)
	if why := d.sandboxedPeer(pid); why != "" {
		// Before anything it could ask: a sandboxed server asking the
		// daemon to start a command would have it run unconfined.
		log.Warn("refusing a sandboxed server's connection", "why", why)
		d.event("sandbox.denied", "", "", "the supervisor's socket: "+why)
		d.metrics.SandboxDenied("daemon")
		d.sendError(conn, 125, "refused: %s, and a sandboxed server may not use the supervisor", why)
		return
	}

	// A peer that connects and says nothing must not hold a connection
	// (and an fd) forever.
	conn.SetDeadline(time.Now().Add(helloTimeout))
	m, fds, err := conn.Recv()
	api.CloseFds(fds)
	if err != nil {
		if api.PeerGone(err) {
			log.Debug("peer closed before hello")
		} else {
			d.refuse(conn, log, err)
		}
		return
	}
	if m.Type != api.TypeHello {
		d.refuse(conn, log, fmt.Errorf("%w: expected hello first, got %q", api.ErrMalformed, m.Type))
		return
	}
	var h api.Hello
	if err := api.Decode(m, &h); err != nil {
		d.refuse(conn, log, err)
		return
	}
	if h.Protocol != api.Protocol {
		d.sendError(conn, 125, "client speaks protocol %d (version %s), daemon %d (version %s): restart the daemon with `supervisor daemon stop`",
			h.Protocol, h.Version, api.Protocol, api.Version)
		return
	}
	hello := api.NewHello()
	hello.InPlace = d.feat["in_place"]
	hello.InPlaceOnly = d.feat["in_place"]
	hello.Front = true
	if err := conn.Send(api.TypeHello, hello); err != nil {
		return
	}
	for {
		// A request connection that goes quiet is closed: idle ones would
		// hold the fds every stop needs. A lifeline never idles out.
		conn.SetDeadline(time.Now().Add(d.idleTimeout()))
		m, fds, err := conn.Recv()
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				log.Debug("closing an idle connection", "idle", d.idleTimeout())
			case !api.PeerGone(err):
				d.refuse(conn, log, err)
			}
			return
		}
		conn.SetDeadline(time.Time{})
		if m.Type == api.TypeRun || m.Type == api.TypeAttach {
			d.becomeLifeline(conn)
		}
		if m.Type == api.TypeLogHub {
			// A log hub of an earlier daemon: the connection is its own.
			api.CloseFds(fds)
			d.adoptLogHub(conn, m)
			return
		}
		if m.Type != api.TypeRun {
			api.CloseFds(fds)
			fds = nil
		}
		if err := d.dispatch(conn, m, fds); err != nil {
			d.refuse(conn, log, err)
			return
		}
		if m.Type == api.TypeRun || m.Type == api.TypeAttach || m.Type == api.TypeDaemonStop {
			return // the connection belonged to that request
		}
	}
}

// refuse answers a bad message with an error and lets the caller close.
func (d *Daemon) refuse(conn *api.Conn, log interface{ Warn(string, ...any) }, err error) {
	log.Warn("refusing message", "err", err)
	d.sendError(conn, 125, "refused: %v", err)
}

// dispatch answers one request by its type.
func (d *Daemon) dispatch(conn *api.Conn, m api.Msg, fds []int) error {
	switch m.Type {
	case api.TypeRun:
		var req api.RunRequest
		if err := api.Decode(m, &req); err != nil {
			api.CloseFds(fds)
			return err
		}
		d.serveRun(conn, req, fds)
		return nil
	case api.TypeAttach:
		var a api.Attach
		if err := api.Decode(m, &a); err != nil {
			return err
		}
		d.serveAttach(conn, a)
		return nil
	case api.TypePs:
		return d.servePs(conn, m)
	case api.TypeSessions:
		var req api.SessionsRequest
		if err := api.Decode(m, &req); err != nil {
			return err
		}
		return conn.Send(api.TypeSessionList, &api.SessionList{Sessions: d.sessionInfos(req.All)})
	case api.TypeSessionEnd:
		return d.serveSessionEnd(conn, m)
	case api.TypeStop:
		return d.serveStop(conn, m)
	case api.TypeRestart:
		return d.serveRestart(conn, m)
	case api.TypeEnsure:
		return d.serveEnsure(conn, m)
	case api.TypeBreakers:
		return conn.Send(api.TypeBreakerList, &api.BreakerList{Breakers: wireBreakers(d.breakers.list())})
	case api.TypeBreakerReset:
		return d.serveBreakerReset(conn, m)
	case api.TypeEvents:
		return d.serveEvents(conn, m)
	case api.TypeMetrics:
		return d.serveMetrics(conn)
	case api.TypeStatus:
		return conn.Send(api.TypeStatus, d.status())
	case api.TypeDaemonReload:
		return d.serveReload(conn)
	case api.TypeDaemonStop:
		return d.serveDaemonStop(conn, m)
	default:
		return fmt.Errorf("%w: unknown message type %q", api.ErrMalformed, m.Type)
	}
}

// servePs answers `ps`: the processes asked for, in pages.
func (d *Daemon) servePs(conn *api.Conn, m api.Msg) error {
	var req api.PsRequest
	if err := api.Decode(m, &req); err != nil {
		return err
	}
	d.brokerStats() // ps shows a shared server's figures as of now
	procs := d.reg.Processes(registry.Filter{All: req.All, Session: req.Session})
	if procs == nil {
		procs = []registry.Process{}
	}
	d.fillUsage(procs)
	pages := api.PsPages(wireProcesses(procs))
	for i, page := range pages {
		if err := conn.Send(api.TypeProcesses, &api.Processes{Processes: page, More: i < len(pages)-1}); err != nil {
			return err
		}
	}
	return nil
}

// serveEnsure answers `ensure`: the healthy shared server on the port
// asked for, started when none runs.
func (d *Daemon) serveEnsure(conn *api.Conn, m api.Msg) error {
	var req api.EnsureRequest
	if err := api.Decode(m, &req); err != nil {
		return err
	}
	if len(req.Argv) == 0 {
		return conn.SendError(125, "ensure: no command given")
	}
	if err := session.ValidateID(req.Session); err != nil {
		return conn.SendError(125, "ensure: %v", err)
	}
	res, err := d.ensure(context.Background(), req)
	var open *spawn.OpenError
	if errors.As(err, &open) {
		return conn.SendError(125, "%v", err) // the breaker's own words
	}
	if err != nil {
		return conn.SendError(125, "ensure: %v", err)
	}
	return conn.Send(api.TypeEnsured, &res)
}

// serveBreakerReset answers `breaker reset`: the breakers left after it.
func (d *Daemon) serveBreakerReset(conn *api.Conn, m api.Msg) error {
	var req api.BreakerResetRequest
	if err := api.Decode(m, &req); err != nil {
		return err
	}
	out, err := d.breakers.reset(req.Target)
	if err != nil {
		return conn.SendError(1, "breaker reset: %v", err)
	}
	return conn.Send(api.TypeBreakerList, &api.BreakerList{Breakers: wireBreakers(out)})
}

// serveDaemonStop answers `daemon stop`: it hands the stop to the stopper
// and relays its outcomes. The stopper waits for the answer to be sent
// (req.sent) before it closes the connections.
func (d *Daemon) serveDaemonStop(conn *api.Conn, m api.Msg) error {
	var ds api.DaemonStop
	if len(m.Body) > 0 && string(m.Body) != "null" {
		if err := api.Decode(m, &ds); err != nil {
			return err
		}
	}
	g, err := api.GraceOf(ds.GraceMS)
	if err != nil {
		return conn.SendError(1, "daemon stop: %v", err)
	}
	pr := relayProgress(conn, ds.Progress)
	req := stopRequest{reply: make(chan []shutdown.Outcome, 1), sent: make(chan struct{}), keep: ds.KeepProcesses,
		opt: shutdown.Options{Grace: g, Progress: pr.fn()}}
	select {
	case d.stopReq <- req:
	case <-time.After(time.Second):
		pr.stop()
		return conn.SendError(125, "daemon is already stopping")
	}
	defer close(req.sent)
	outcomes := <-req.reply
	pr.stop()
	if outcomes == nil {
		return conn.SendError(1, "daemon stop --keep-processes: this daemon is the init of `supervisor init`, which stops everything when its command ends; its processes cannot be handed to another daemon")
	}
	return conn.Send(api.TypeOutcomes, &api.Outcomes{Outcomes: outcomes})
}

func (d *Daemon) sessionInfos(all bool) []api.SessionInfo {
	counts, shared := map[string]int{}, map[string]int{}
	sums := map[string]*registry.Usage{}
	procs := d.reg.Processes(registry.Filter{All: all})
	d.fillUsage(procs)
	for _, p := range procs {
		counts[p.Session]++
		if p.Usage != nil && !p.Broker {
			sum := sums[p.Session]
			if sum == nil {
				sum = &registry.Usage{}
				sums[p.Session] = sum
			}
			*sum = sum.Add(*p.Usage)
		}
		if !p.State.Final() {
			for _, c := range p.Clients {
				shared[c.Session]++
			}
		}
	}
	out := []api.SessionInfo{}
	for _, s := range d.reg.Sessions(all) {
		out = append(out, api.SessionInfo{Session: wireSession(s), Processes: counts[s.ID], Shared: shared[s.ID], Usage: wireUsage(sums[s.ID])})
	}
	return out
}

func (d *Daemon) status() *api.Status {
	all := d.reg.Processes(registry.Filter{All: true})
	return &api.Status{
		PID:            os.Getpid(),
		Version:        api.Version,
		Protocol:       api.Protocol,
		StartedAt:      d.started.UTC().Format(time.RFC3339),
		Uptime:         time.Since(d.started).Round(time.Second).String(),
		StateDir:       d.cfg.Paths.StateDir,
		Socket:         d.cfg.Paths.Socket,
		Features:       d.features(),
		Limits:         d.limits,
		Sessions:       len(d.reg.Sessions(false)),
		Processes:      len(d.reg.Processes(registry.Filter{})),
		Records:        len(all),
		Recovery:       d.recovery,
		LogHubs:        d.hubs.Status(),
		ResourceLimits: d.resourceLimits(),
		Sandbox:        d.sandboxStatus(),
		Restarter:      d.restarter(),
	}
}

// restarter says what would start this daemon again after a crash.
func (d *Daemon) restarter() string {
	switch pid, watching := d.keeperNow(); {
	case pid > 0 && watching:
		return fmt.Sprintf("keeper pid %d, watching (restarts it at once; the first keeper died)", pid)
	case pid > 0:
		return fmt.Sprintf("keeper pid %d (restarts it at once)", pid)
	}
	switch {
	case os.Getenv("INVOCATION_ID") != "":
		return "systemd (its unit's Restart=)"
	case os.Getenv("XPC_SERVICE_NAME") == service.Label:
		return "launchd (its agent's KeepAlive)"
	}
	return "none: a crash is recovered only by the next supervisor command (a shim's or yours)"
}

func grace(ms int64, def time.Duration) time.Duration {
	if ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return def
}
