package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/daemon/sharing"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
	"github.com/seed-86a41135/supervisor/spawn/health"
)

// shared is one port-bound server shared across sessions (design §5):
// reference-counted by the sessions that ensured it, restarted with
// backoff when it crashes or turns unhealthy, stopped through the cascade
// once its last session has ended and the linger has passed.
type shared struct {
	port     int
	id       string // its registry id, kept across restarts
	name     string
	argv     []string
	env      []string
	cwd      string
	health   health.Probe
	limits   *registry.Limits // each incarnation's, set by the ensure that started it
	linger   time.Duration
	interval time.Duration
	bkey     string
	logPath  string // its stdout and stderr, written by its log writer (logpipe.go); "" for none
	// directLog says the server writes logPath itself (no log writer
	// could be started): the daemon rotates it by copy and truncate.
	directLog atomic.Bool
	adopted   bool           // a foreign listener taken over with --adopt-foreign
	sandbox   *sandbox.Rules // what each incarnation is confined to; nil: unconfined
	egress    *egressRun     // its network list's proxy, for every incarnation (egress.go)

	// life is its sessions' references, its linger and its stop for
	// good (internal/daemon/sharing).
	life *sharing.Refs

	mu  sync.Mutex // guards cur
	cur *live
	// restartNow takes `supervisor restart`'s orders to its supervision
	// goroutine (nil for an adopted server: no environment to start it in).
	restartNow chan restartOrder
}

// restartOrder asks a shared server's supervision to restart it now; done
// gets the outcome: nil once the new process is healthy.
type restartOrder struct {
	grace time.Duration
	done  chan error
}

// Life is s's references, linger and stop for good: what a port's slot
// (sharing.Slots) waits on.
func (s *shared) Life() *sharing.Refs { return s.life }

// newLife gives s its references; a linger that passes unclaimed stops it
// for good.
func (d *Daemon) newLife(s *shared) {
	s.life = sharing.NewRefs(s.linger, func() { d.finishShared(s, "no session left after the linger") })
}

// ensure returns the healthy shared server on req.Port, starting it when
// none runs. Concurrent calls for one port make one spawn.
func (d *Daemon) ensure(ctx context.Context, req api.EnsureRequest) (api.Ensured, error) {
	if req.Port < 1 || req.Port > 65535 {
		return api.Ensured{}, fmt.Errorf("port %d: want 1 to 65535", req.Port)
	}
	if _, err := api.GraceOf(req.GraceMS); err != nil {
		return api.Ensured{}, err
	}
	if d.isStopping() {
		return api.Ensured{}, errors.New("the daemon is stopping")
	}
	if err := d.openSession(&req.RunRequest); err != nil {
		return api.Ensured{}, err
	}
	for {
		srv, started, err := d.shared.Get(ctx, req.Port, func() (*shared, error) { return d.startShared(ctx, req) })
		if err != nil {
			return api.Ensured{}, err
		}
		if started && d.isStopping() {
			// The daemon began stopping while this one started: stopShared
			// may have missed it, so it is stopped here.
			d.finishShared(srv, "daemon stopped")
			return api.Ensured{}, errors.New("the daemon is stopping")
		}
		if !d.takeRef(srv, req.Session) {
			continue // it began stopping meanwhile
		}
		if !started {
			// A server between restarts is not handed out as healthy.
			if err := d.waitHealthy(ctx, srv, req); err != nil {
				return api.Ensured{}, err
			}
		}
		return d.ensured(srv, started), nil
	}
}

// takeRef adds session's reference to s, unless s is stopping. A session
// that ended meanwhile (its end ran while this ensure was in flight) takes
// none: the server then lingers like any other without sessions.
func (d *Daemon) takeRef(s *shared, session string) bool {
	sess, err := d.reg.Session(session)
	ok, lingering := s.life.Take(session, err == nil && sess.State == registry.SessionActive)
	if lingering {
		d.log.Info("shared server has no session left: lingering", "id", s.id, "linger", s.linger)
	}
	return ok
}

// waitHealthy waits for a server that is restarting or unhealthy to be
// healthy again, within the request's readiness timeout.
func (d *Daemon) waitHealthy(ctx context.Context, s *shared, req api.EnsureRequest) error {
	timeout := orDefault(time.Duration(req.TimeoutMS)*time.Millisecond, d.settings().ReadyTimeout)
	deadline := time.Now().Add(timeout)
	for {
		p, err := d.reg.Process(s.id)
		if err == nil && p.Health == "healthy" {
			return nil
		}
		if !s.life.Usable() {
			return fmt.Errorf("%s on port %d stopped while waiting for it to be healthy", s.name, s.port)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s on port %d: %w (%v; it is %s)", s.name, s.port, health.ErrNotReady, timeout, p.Health)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (d *Daemon) ensured(s *shared, started bool) api.Ensured {
	p, _ := d.reg.Process(s.id)
	return api.Ensured{ID: s.id, PID: p.PID, Port: s.port, Name: s.name, Started: started, Health: p.Health}
}

// startShared takes the per-port lock file, refuses a foreign listener
// (or adopts it), checks the breaker, spawns and waits for readiness.
func (d *Daemon) startShared(ctx context.Context, req api.EnsureRequest) (*shared, error) {
	unlock, err := sharing.LockPort(d.cfg.Paths, req.Port)
	if err != nil {
		return nil, err
	}
	defer unlock()

	st := d.settings()
	name := req.Name
	if name == "" {
		name = baseName(req.Argv[0])
	}
	st.ApplyEnsure(name, &req) // the config file's [servers.NAME]
	probe, err := health.Parse(req.Health)
	if err != nil {
		return nil, err
	}
	launch := launched{argv: req.Argv, env: req.Env}
	id := newID()
	if req.Sandbox != nil {
		if why := d.sandboxUnenforceable(*req.Sandbox); why != "" {
			return nil, errors.New(why)
		}
		if err := d.planSandbox(&launch, req.RunRequest, id); err != nil {
			return nil, err
		}
		// Its port is what it is for: with no network, it may still
		// listen on it (and nothing else).
		launch.sandbox.BindPorts = []int{req.Port}
		d.log.Info("shared server sandboxed", "name", name, "port", req.Port, "how", strings.TrimSpace(launch.note))
	}
	s := &shared{
		port: req.Port, name: name, argv: req.Argv, env: launch.env, cwd: string(req.Cwd), health: probe, sandbox: launch.sandbox, limits: storedLimits(settings.EffectiveLimits(req.Limits, st.Limits)),
		linger:     orDefault(time.Duration(req.LingerMS)*time.Millisecond, st.Linger),
		interval:   orDefault(time.Duration(req.IntervalMS)*time.Millisecond, st.Interval),
		restartNow: make(chan restartOrder, 1),
	}
	d.newLife(s)
	if ls := proc.PortListeners(req.Port); len(ls) > 0 {
		if req.AdoptForeign {
			return d.adoptForeign(ctx, s, ls[0])
		}
		return nil, sharing.ForeignError(req.Port, ls[0])
	}
	s.bkey, err = d.breakers.allow(req.Argv, s.cwd, name)
	if err != nil {
		return nil, err
	}
	logPath := LogPath(d.cfg.Paths, name, req.Port)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	s.logPath = logPath
	s.id = id
	if s.sandbox != nil && s.sandbox.Hosts != nil {
		// Its proxy lives as long as it does, restarts included. By port
		// only: a namespace of its own would hide the port it serves.
		eg, err := d.openEgress(sharing.Session(req.Port), id, &launch, "a port-bound server listens on this machine's network, which a namespace of its own would hide")
		if err != nil {
			d.breakers.release(s.bkey)
			return nil, err
		}
		s.egress, s.env = eg, launch.env
	}
	if _, err := d.reg.AddProcess(registry.Process{
		ID: s.id, Session: sharing.Session(req.Port), Name: name, Argv: req.Argv, Cwd: s.cwd,
		Port: req.Port, Shared: true, Health: "starting", GraceMS: req.GraceMS, HealthCheck: probe.String(),
		Sandboxed: s.sandbox != nil, Egress: s.egress.record(),
	}); err != nil {
		d.breakers.release(s.bkey)
		s.egress.close()
		return nil, err
	}
	timeout := orDefault(time.Duration(req.TimeoutMS)*time.Millisecond, st.ReadyTimeout)
	if err := d.spawnShared(ctx, s, timeout); err != nil {
		d.breakers.result(s.bkey, s.argv, s.cwd, s.name, err.Error())
		d.finishShared(s, err.Error())
		return nil, fmt.Errorf("%s on port %d: %w", name, req.Port, err)
	}
	d.breakers.result(s.bkey, s.argv, s.cwd, s.name, "")
	d.tasks.Go("supervise shared", func() { d.superviseShared(s) })
	return s, nil
}

// spawnShared starts one incarnation of s (stdin /dev/null, output to its
// log) and waits until it is healthy.
func (d *Daemon) spawnShared(ctx context.Context, s *shared, timeout time.Duration) error {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	logf, errf, err := d.sharedOutput(s)
	if err != nil {
		null.Close()
		return err
	}
	// Fresh per incarnation: a killed cgroup kills what is cloned in. The
	// record exists (ensure committed it): there is no intent to commit.
	cgName := fmt.Sprintf("%s-%d", s.id, time.Now().UnixNano())
	srv, err := d.prepareServer(sharing.Session(s.port), s.id, cgName, s.limits, nil)
	if err != nil {
		null.Close()
		logf.Close()
		errf.Close()
		return err
	}
	started, err := d.forkServer(srv, spawn.Request{
		Argv: s.argv, Env: s.env, Dir: s.cwd,
		Stdio: [3]*os.File{null, logf, errf}, Sandbox: s.sandbox,
	})
	if err != nil {
		d.event("process.failed", sharing.Session(s.port), s.id, err.Error())
		return err
	}
	cg, limited := srv.cg, srv.limited
	fault("ensure.forked")
	rec, err := d.reg.Restart(s.id, func(p *registry.Process) {
		p.PID, p.PGID, p.Token, p.Path, p.Cgroup = started.PID, started.PGID, started.Token, started.Path, cg.Path
		p.Limits, p.LimitCgroups, p.LimitHit = s.limits, limited.V1, nil
		p.Health, p.ExitCode, p.Signal, p.ExitedAt = "starting", nil, "", nil
	})
	if err != nil {
		// Final already (stopped for good meanwhile): the stop below still
		// needs this incarnation's identity.
		d.log.Error("record shared server", "id", s.id, "err", err)
		if cur, perr := d.reg.Process(s.id); perr == nil {
			rec = cur
		} else { // compacted away meanwhile: what the stop needs
			rec = registry.Process{ID: s.id, Session: sharing.Session(s.port), Name: s.name, Argv: s.argv, Port: s.port, Shared: true}
		}
		rec.PID, rec.PGID, rec.Token, rec.Cgroup = started.PID, started.PGID, started.Token, cg.Path
	}
	l := &live{id: s.id, done: make(chan struct{}), grace: time.Duration(rec.GraceMS) * time.Millisecond,
		target: d.targetOf(rec), started: time.Now(), shared: s}
	d.mu.Lock()
	d.live[s.id] = l
	d.mu.Unlock()
	s.mu.Lock()
	s.cur = l
	s.mu.Unlock()
	// Asked after l is live: a stop for good decided before this finds
	// it here; one decided after finds l to stop.
	stopping := !s.life.Usable()
	d.tasks.Go("monitor", func() { d.monitor(l, started.Exit) })
	if stopping {
		// Stopped for good while this incarnation was forked: that stop
		// found no live process, so this one is stopped here.
		d.stopIDs(context.Background(), []string{s.id}, shutdown.Options{})
		return errStoppedForGood
	}
	d.event("process.start", sharing.Session(s.port), s.id, fmt.Sprintf("pid %d %q port %d", started.PID, s.argv, s.port))
	d.log.Info("shared server started", "id", s.id, "port", s.port, "pid", started.PID)

	err = s.health.WaitReady(ctx, s.port, timeout, func() error {
		select {
		case <-l.done:
			return fmt.Errorf("exited during start (exit status %d)", l.status.ExitCode())
		default:
			return nil
		}
	})
	if err == nil {
		// A health check passes for whoever listens: make sure it is ours
		// and not a stranger that took the port meanwhile.
		if l, foreign := sharing.Stranger(s.port, s.id); foreign {
			err = sharing.ForeignError(s.port, l)
		}
	}
	if err != nil {
		d.event("shared.unhealthy", sharing.Session(s.port), s.id, "not ready: "+err.Error())
		d.stopIDs(context.Background(), []string{s.id}, shutdown.Options{})
		return err
	}
	d.setHealth(s.id, "healthy")
	d.event("shared.ready", sharing.Session(s.port), s.id, fmt.Sprintf("healthy on port %d (%s)", s.port, s.health))
	return nil
}

// checkShared runs one health check of s and records its result. It says
// whether s passed, and why s must restart: "" while its failures in a
// row (fails) stay under the threshold.
func (d *Daemon) checkShared(s *shared, st *settings.Daemon, fails *int) (restart string, healthy bool) {
	ctx, cancel := context.WithTimeout(context.Background(), st.CheckTimeout)
	err := s.health.Check(ctx, s.port)
	cancel()
	d.metrics.HealthCheck(err)
	if err == nil {
		if *fails > 0 {
			d.event("shared.healthy", sharing.Session(s.port), s.id,
				fmt.Sprintf("health check passes again after %d failure(s)", *fails))
		}
		*fails = 0
		d.setHealth(s.id, "healthy")
		return "", true
	}
	*fails++
	d.setHealth(s.id, fmt.Sprintf("unhealthy (%d/%d)", *fails, st.FailureThreshold))
	d.event("shared.unhealthy", sharing.Session(s.port), s.id,
		fmt.Sprintf("health check failed (%d/%d): %v", *fails, st.FailureThreshold, err))
	if *fails < st.FailureThreshold {
		return "", false
	}
	return "unhealthy: " + err.Error(), false
}

// superviseShared checks liveness every interval and restarts a crashed or
// unhealthy server with exponential backoff (1 s doubling to 30 s, reset
// after 5 min healthy). It ends when the server is stopped for good.
func (d *Daemon) superviseShared(s *shared) {
	st := d.settings()
	backoff := st.RestartMin
	healthySince := time.Now()
	fails := 0
	ticker := time.NewTicker(s.interval)
	defer ticker.Stop()
	for {
		s.mu.Lock()
		l := s.cur
		s.mu.Unlock()
		restart := ""
		var order *restartOrder
		select {
		case <-s.life.Quit():
			return
		case <-d.life.Done():
			return
		case o := <-s.restartNow:
			order, restart = &o, "restarted by request"
		case <-l.done:
			restart = fmt.Sprintf("exited (status %d)", l.status.ExitCode())
		case <-ticker.C:
			var healthy bool
			if restart, healthy = d.checkShared(s, st, &fails); healthy && time.Since(healthySince) > st.RestartReset {
				backoff = st.RestartMin
			}
			if restart == "" {
				continue
			}
		}
		if !s.life.Usable() {
			order.answer(errStoppedForGood)
			return // stopped for good meanwhile: its exit is no crash
		}
		if s.adopted {
			d.finishShared(s, "adopted server "+restart)
			return
		}
		wait := backoff
		if order != nil {
			wait = 0 // asked for: no crash to back off from
		}
		d.log.Warn("restarting shared server", "id", s.id, "port", s.port, "why", restart, "in", wait)
		d.event("shared.restart", sharing.Session(s.port), s.id, restart)
		d.setHealth(s.id, "restarting")
		d.stopIDs(context.Background(), []string{s.id}, shutdown.Options{Grace: orderGrace(order)})
		select {
		case <-s.life.Quit():
			order.answer(errStoppedForGood)
			return
		case <-time.After(wait):
		}
		if order == nil {
			backoff = min(2*backoff, st.RestartMax)
		}
		fails = 0
		d.update(s.id, "restart counted", func(p *registry.Process) error { p.Restarts++; return nil })
		if l, foreign := sharing.Stranger(s.port, s.id); foreign {
			// Someone else took the port while ours was down: never fight.
			why := sharing.ForeignError(s.port, l).Error()
			d.breakers.result(s.bkey, s.argv, s.cwd, s.name, why)
			order.answer(errors.New(why))
			d.finishShared(s, why)
			return
		}
		if err := d.spawnShared(context.Background(), s, orDefault(0, st.ReadyTimeout)); err != nil {
			order.answer(err)
			if errors.Is(err, errStoppedForGood) {
				return
			}
			d.log.Error("restart of shared server failed", "id", s.id, "err", err)
			d.breakers.result(s.bkey, s.argv, s.cwd, s.name, err.Error())
			if _, berr := d.breakers.allow(s.argv, s.cwd, s.name); berr != nil {
				d.finishShared(s, berr.Error())
				return
			}
			continue
		}
		d.breakers.result(s.bkey, s.argv, s.cwd, s.name, "") // failures count in a row
		healthySince = time.Now()
		order.answer(nil)
	}
}

// answer tells a restart's requester how it ended; a nil order (a restart
// of the supervision's own) has no one to tell.
func (o *restartOrder) answer(err error) {
	if o != nil {
		o.done <- err
	}
}

// orderGrace is the SIGTERM grace a restart's stop takes: the order's, or
// the default.
func orderGrace(o *restartOrder) time.Duration {
	if o == nil {
		return 0
	}
	return o.grace
}

// releaseSession drops a session's reference from every shared server; a
// server left with none is stopped after its linger.
func (d *Daemon) releaseSession(id string) {
	for _, s := range d.shared.All() {
		if s.life.Release(id) {
			d.log.Info("shared server has no session left: lingering", "id", s.id, "linger", s.linger)
		}
	}
}

// finishShared stops s for good through the cascade and frees its port.
func (d *Daemon) finishShared(s *shared, why string) {
	d.finishSharedWith(context.Background(), s, why, shutdown.Options{}, false)
}

// finishSharedWith is finishShared with the stop's options, returning its
// outcome. With join, a finish already under way is joined (its stop
// waited for, shortened to opt's grace) instead of left alone: a user's
// stop must report how the server ended.
func (d *Daemon) finishSharedWith(ctx context.Context, s *shared, why string, opt shutdown.Options, join bool) shutdown.Outcome {
	first, done := s.life.Finish()
	if !first {
		if !join {
			return shutdown.Outcome{ID: s.id, Result: shutdown.AlreadyGone}
		}
		out := d.stopIDs(ctx, []string{s.id}, opt)[0]
		select {
		case <-s.life.Stopped():
		case <-ctx.Done():
		}
		return out
	}
	// Decided before the stop: the exit it causes is final (monitor), and
	// the supervision loop, in backoff or mid-restart, starts nothing more.
	defer done()
	d.log.Info("stopping shared server", "id", s.id, "port", s.port, "why", why)
	d.event("shared.stop", sharing.Session(s.port), s.id, why)
	out := d.stopIDs(ctx, []string{s.id}, opt)[0]
	// One commit after the stop: the final state if the exit's own commit
	// has not made it final, and why it stopped.
	d.update(s.id, "stopped for good", func(p *registry.Process) error {
		if !p.State.Final() {
			p.State = registry.StateExited
			t := d.reg.Now().UTC()
			p.ExitedAt = &t
		}
		p.Health = "stopped"
		p.Error = why
		return nil
	})
	d.shared.Forget(s.port, s)
	s.egress.close()
	return out
}

// sharedByID is the shared server whose record is id, nil if id is none:
// found by its slot, so one between a crash and its restart (no live
// process) is found too.
func (d *Daemon) sharedByID(id string) *shared {
	for _, s := range d.shared.All() {
		if s.id == id {
			return s
		}
	}
	return nil
}

// detachShared ends the supervision of every shared server without
// stopping any (daemon stop --keep-processes): no linger timer, health
// check or restart of this daemon may cascade a server the next daemon
// re-adopts.
func (d *Daemon) detachShared() {
	for _, s := range d.shared.All() {
		s.life.Detach()
	}
}

// stopShared stops every shared server (daemon stop) with grace (0: each
// server's own); one already being stopped for good is joined and its stop
// shortened to grace, so the daemon does not exit halfway through it.
func (d *Daemon) stopShared(grace time.Duration) {
	var wg sync.WaitGroup
	for _, s := range d.shared.All() {
		wg.Add(1)
		go func(s *shared) {
			defer wg.Done()
			d.finishSharedWith(context.Background(), s, "daemon stopped", shutdown.Options{Grace: grace}, true)
		}(s)
	}
	wg.Wait()
}

// adoptForeign takes over a foreign listener whose health check passes.
func (d *Daemon) adoptForeign(ctx context.Context, s *shared, l proc.Listener) (*shared, error) {
	if l.PID == 0 {
		return nil, sharing.ForeignError(s.port, l)
	}
	if s.health.Kind == "none" {
		return nil, fmt.Errorf("port %d is held by pid %d (%s): --adopt-foreign needs a real health check (--health tcp or http://...) to tell it works; not adopted",
			s.port, l.PID, strings.Join(l.Argv, " "))
	}
	// The token as of the scan, checked again after the health check: a
	// listener that died meanwhile must not be replaced by a recycled PID.
	tok, err := proc.TokenOf(l.PID)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, d.settings().CheckTimeout)
	err = s.health.Check(cctx, s.port)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("port %d is held by pid %d (%s) and its health check fails, so it is not adopted: %w",
			s.port, l.PID, strings.Join(l.Argv, " "), err)
	}
	if err := proc.Verify(l.PID, tok); err != nil {
		return nil, fmt.Errorf("the listener on port %d went away during its health check: %w", s.port, err)
	}
	// Only the listener itself is adopted, never its group: whatever else
	// shares that group (the shell that started it, other jobs) is not ours.
	const pgid = 0
	s.id, s.adopted = newID(), true
	rec, err := d.reg.AddProcess(registry.Process{
		ID: s.id, Session: sharing.Session(s.port), Name: s.name, Argv: l.Argv, Port: s.port, Shared: true,
		PID: l.PID, PGID: pgid, Token: tok, Health: "healthy",
	})
	if err != nil {
		return nil, err
	}
	// A failed transition keeps the record added above, whose PID and
	// token the stop target needs: never one built from an empty record.
	if running, err := d.reg.Transition(s.id, registry.StateRunning, nil); err == nil {
		rec = running
	} else {
		d.log.Warn("adopted listener's record not moved to running", "id", s.id, "err", err)
	}
	lv := &live{id: s.id, done: make(chan struct{}), target: d.targetOf(rec), shared: s}
	r, err := d.adoptRunner(l.PID, tok)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.live[s.id] = lv
	d.mu.Unlock()
	s.cur = lv
	d.tasks.Go("monitor", func() { d.monitor(lv, r) })
	d.tasks.Go("supervise shared", func() { d.superviseShared(s) })
	d.event("shared.adopt", sharing.Session(s.port), s.id, fmt.Sprintf("pid %d %q port %d", l.PID, l.Argv, s.port))
	d.log.Info("adopted a foreign listener", "id", s.id, "port", s.port, "pid", l.PID)
	return s, nil
}

func (d *Daemon) setHealth(id, h string) {
	d.update(id, "health", func(p *registry.Process) error {
		if p.Health == h {
			return errUnchanged
		}
		p.Health = h
		return nil
	})
}

var errUnchanged = errors.New("unchanged")

// errStoppedForGood: a restart found its server stopped for good meanwhile.
var errStoppedForGood = errors.New("stopped for good during its restart")

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// sharedOutput is the stdout and stderr of one incarnation of s: a new log
// writer's pipe (one per incarnation: the last one ends with its
// server's tree), else the log file itself.
func (d *Daemon) sharedOutput(s *shared) (stdout, stderr *os.File, err error) {
	w, werr := d.startLogWriter(s.logPath, nil, s.id)
	if werr == nil {
		s.directLog.Store(false)
		return w, w, nil
	}
	if !errors.Is(werr, errLogWriterUnsupported) {
		d.log.Warn("no log writer: the server writes its log itself, rotated by copy and truncate", "id", s.id, "err", werr)
	}
	s.directLog.Store(true)
	// The server writes its log itself: with no reader to lose, a daemon
	// that dies or restarts under it cannot kill it with SIGPIPE. Append
	// mode keeps its writes at the end across the daemon's copy-truncate
	// rotation.
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open log: %w", err)
	}
	// A second open for stderr: both append, so neither overwrites the
	// other's lines.
	errf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		logf.Close()
		return nil, nil, fmt.Errorf("open log: %w", err)
	}
	return logf, errf, nil
}

// LogPath is where a shared server's output is captured.
// Named by server name and port: many servers share a base name (npx,
// node), and two writers of one file would each keep their own size count.
func LogPath(p api.Paths, name string, port int) string {
	return filepath.Join(p.StateDir, "logs", fmt.Sprintf("%s-%d.log", safeName(name), port))
}

// LogPathsByName lists the current logs of servers named name, any port:
// NAME-PORT.log, never a backup (NAME-PORT.log.N) nor the log of a server
// whose name only starts with name- ("a" is not "a-1" on port 80).
func LogPathsByName(p api.Paths, name string) []string {
	prefix := safeName(name) + "-"
	m, _ := filepath.Glob(filepath.Join(p.StateDir, "logs", prefix+"[0-9]*.log"))
	out := m[:0]
	for _, path := range m {
		port := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), prefix), ".log")
		if strings.Trim(port, "0123456789") == "" {
			out = append(out, path)
		}
	}
	return out
}

// safeName makes a server name usable as a file name, injectively: any
// byte outside [A-Za-z0-9._-] (and a leading dot) is %XX-escaped, so "a/b"
// and "a_b" stay apart.
func safeName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' && i > 0
		if ok {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() == 0 {
		return "server"
	}
	return b.String()
}

// readoptShared puts a shared server found alive after a daemon restart
// back in its port's slot. Its command's environment was never recorded
// (it holds secrets), so it is not restarted when it dies; it has no
// session references until an ensure takes one, and so lingers out unless
// one does.
func (d *Daemon) readoptShared(p registry.Process, l *live) {
	probe, err := health.Parse(p.HealthCheck)
	if err != nil || p.HealthCheck == "" {
		probe = health.Probe{Kind: "tcp"}
	}
	s := &shared{
		port: p.Port, id: p.ID, name: p.Name, argv: p.Argv, cwd: p.Cwd, health: probe, limits: p.Limits,
		linger: d.settings().Linger, interval: d.settings().Interval, adopted: true,
		cur: l, logPath: LogPath(d.cfg.Paths, p.Name, p.Port),
	}
	l.shared = s
	// One that writes its log file itself (no log writer) kept writing
	// while no daemon watched the size: check now, then the rotation loop
	// keeps it in bounds. Where its output cannot be told, it is checked
	// too: copy and truncate leaves a file within the cap alone.
	if kind, _, err := proc.FdKindOf(p.PID, 1); err != nil || kind == "file" {
		s.directLog.Store(true)
		if err := d.rotateLog(s.logPath); err != nil {
			d.log.Warn("cannot rotate a shared server's log", "path", s.logPath, "err", err)
		}
	}
	d.newLife(s)
	d.shared.Put(p.Port, s)
	s.life.Linger()
	d.log.Info("shared server has no session left: lingering", "id", s.id, "linger", s.linger)
	d.tasks.Go("supervise shared", func() { d.superviseShared(s) })
	d.log.Info("re-adopted a shared server", "id", p.ID, "port", p.Port, "pid", p.PID)
}
