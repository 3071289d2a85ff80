package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/launcher"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/session"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// live is a process the daemon is supervising right now: spawned by this
// daemon (its exit status comes from the reaper) or re-adopted after a
// restart (its exit comes from a pidfd; the status is unknown).
type live struct {
	id     string
	target shutdown.Target
	grace  time.Duration // the process's own --grace; 0 = the daemon's
	done   chan struct{} // closed once the final state is committed
	status spawn.Status  // valid after done

	// shimCancel ends the watch on an adopted process's shim.
	shimCancel func()
	startTimer *time.Timer // judges a spawned process's start (breaker)
	shared     *shared     // the shared server this is an incarnation of, if any
	started    time.Time   // when it was spawned (zero for adopted)
	breaker    breakerRef  // its circuit breaker

	// stopMu guards the stop fields below. Lock order: stopMu, then d.mu
	// (stopIDsSince claims a process in d.claimed while holding stopMu);
	// never d.mu, then a stopMu.
	stopMu   sync.Mutex
	stopDone chan struct{} // non-nil while a stop is under way
	force    chan struct{} // closed to cut the running stop's grace short
	outcome  shutdown.Outcome
	// exitedFirst: the process exited on its own before any stop claimed
	// it, and outcome is its leftovers' cascade, not a stop's.
	exitedFirst bool
	// retrying: a stop failed (the tree could not be seen) and is being
	// retried until the process is gone.
	retrying bool
	// execDone, for a server exec'd in its shim's place, closes when the
	// shim's connection has (execLine); execErr is why its exec failed,
	// if it said so (under stopMu).
	execDone chan struct{}
	execErr  string
}

// breakerRef names the breaker a process's start counts for.
type breakerRef struct {
	key, cwd, name string
	argv           []string
	// startPeriod is the start period in force at the spawn: the timer
	// and the exit judge one start by the same rule, across a reload.
	startPeriod time.Duration
}

// forceStop ends the grace of the stop under way: SIGKILL now.
func (l *live) forceStop() {
	l.stopMu.Lock()
	defer l.stopMu.Unlock()
	if l.force != nil {
		select {
		case <-l.force:
		default:
			close(l.force)
		}
	}
}

// serveRun starts req's server on the three fds and then stays on the
// connection: the shim's end closing means the host no longer has it.
func (d *Daemon) serveRun(conn *api.Conn, req api.RunRequest, fds []int) {
	log := d.log.With("session", req.Session, "name", req.Name)
	release, why := d.reserveServer()
	if release == nil {
		api.CloseFds(fds)
		// A shim retries every 50 ms: one warning in five seconds says it.
		if now := time.Now().UnixNano(); now-d.capWarned.Load() > int64(5*time.Second) {
			d.capWarned.Store(now)
			log.Warn("runs refused: at the server limit", "why", why)
		}
		d.send(conn, api.TypeError, &api.Error{Code: 125, Retry: true, Message: why})
		return
	}
	defer release() // a failed start; a live server releases it at once
	r, ok := d.acceptRun(conn, req, fds, log)
	if !ok {
		return
	}
	r.release = release
	r.id = newID()
	r.name = r.req.Name
	if r.name == "" {
		r.name = baseName(r.req.Argv[0])
	}
	st := d.settings()          // one snapshot: a reload meanwhile mixes no two configs
	st.ApplyRun(r.name, &r.req) // the config file's [servers.NAME]
	r.req.Limits = settings.EffectiveLimits(r.req.Limits, st.Limits)
	if r.req.Sandbox != nil {
		if why := d.sandboxRefusal(r); why != "" {
			r.closeFiles()
			if w, ok := strings.CutPrefix(why, inPlaceDeclined); ok {
				d.declineInPlace(conn, w)
				return
			}
			d.metrics.SandboxDenied("run")
			d.send(conn, api.TypeError, &api.Error{Code: 125, Message: "run: " + why})
			return
		}
	}
	// Decided once: a broker that becomes ready (or a reload) between two
	// looks would hand an in-place-only run to a broker after all.
	mode, shared, auto := d.runMode(&r.req, r.name)
	if !shared && (len(r.req.Replay) > 0 || len(r.req.Rest) > 0) {
		// A front answered this run's host (the server was lazy when it
		// asked, a reload may have changed that): only a broker can read
		// the host's handshake to the server.
		r.req.Lazy, shared, mode = true, true, "run --lazy"
	}
	if shared && d.frontFor(conn, r.req, r.name) {
		r.closeFiles()
		return
	}
	if shared && r.req.InPlaceOnly {
		r.closeFiles()
		d.declineInPlace(conn, "the server runs through a broker ("+mode+")")
		return
	}
	// The session once the run is taken: a front, or a decline, opens
	// none (nothing of the host's runs here yet).
	if err := d.openSession(&r.req); err != nil {
		r.closeFiles()
		d.send(conn, api.TypeError, &api.Error{Code: 125, Message: "run: " + err.Error(),
			Retry: errors.Is(err, registry.ErrBadTransition)})
		return
	}
	if auto {
		d.event("shared.auto", r.req.Session, "", r.name+" speaks the stateless MCP revision: shared automatically")
	}
	if shared {
		r.dropShim()
		// A broker and its upstream are one tree in one cgroup: the limits
		// bound both.
		d.serveShare(conn, r.req, r.files, r.name, mode)
		return
	}
	// A server that keeps dying on start is refused fast: this is what
	// stops a host's retry storm.
	var err error
	r.bkey, err = d.breakers.allow(r.req.Argv, string(r.req.Cwd), r.name)
	if d.awaitEndedTrial(r.bkey, err) {
		r.bkey, err = d.breakers.allow(r.req.Argv, string(r.req.Cwd), r.name)
	}
	if err != nil {
		r.closeFiles()
		d.event("breaker.refused", r.req.Session, "", err.Error())
		d.sendError(conn, 125, "%v", err)
		return
	}
	d.startDirect(r)
}

// trialSettle bounds the wait for the record of a half-open trial that
// has exited already (awaitEndedTrial).
const trialSettle = 2 * time.Second

// awaitEndedTrial waits, at most trialSettle, for the monitor of key's
// half-open trial to judge an exit that has already happened, when err is
// the refusal of that trial's breaker, and says whether it did. In place,
// the server is the host's own child: the host sees it exit before the
// daemon reads the exit from its pidfd, and a host that starts the server
// again at once must not be refused for a trial that is over.
func (d *Daemon) awaitEndedTrial(key string, err error) bool {
	var open *spawn.OpenError
	if !errors.As(err, &open) || open.B.State != spawn.BreakerHalfOpen {
		return false
	}
	var ended []*live
	d.mu.Lock()
	for _, l := range d.live {
		if l.breaker.key == key && proc.Verify(l.target.PID, l.target.Token) != nil {
			ended = append(ended, l) // gone, or a zombie its host has not reaped
		}
	}
	d.mu.Unlock()
	if len(ended) == 0 {
		return false
	}
	deadline := time.NewTimer(trialSettle)
	defer deadline.Stop()
	for _, l := range ended {
		select {
		case <-l.done:
		case <-deadline.C:
			return false
		}
	}
	return true
}

// directRun is one run being started as a direct server (neither shared
// nor lazy nor idle), from its accepted request to its lifeline.
type directRun struct {
	conn    *api.Conn
	req     api.RunRequest
	log     hclog.Logger
	release func() // the server slot: released once the server counts as live
	files   [3]*os.File
	stdio   []registry.StdioInode
	shim    *proc.Handle // the shim, where its offer to exec in place is taken
	shimTok proc.Token
	id      string
	name    string
	bkey    string // its breaker's key
}

// closeFiles lets go of the host's fds and the shim: a run refused.
func (r *directRun) closeFiles() {
	for _, f := range r.files {
		f.Close()
	}
	r.dropShim()
}

// dropShim declines the shim's offer to exec in place, if taken.
func (r *directRun) dropShim() {
	if r.shim != nil {
		r.shim.Close()
		r.shim = nil
	}
}

// acceptRun takes a run request's fds (stdin, stdout, stderr and, with an
// offer to exec in place, the shim's pidfd) and checks what the daemon
// can check before anything is made for it. A run it refuses is answered
// and its fds are closed.
func (d *Daemon) acceptRun(conn *api.Conn, req api.RunRequest, fds []int, log hclog.Logger) (*directRun, bool) {
	want := 3
	if req.InPlace {
		want = 4 // and the shim's pidfd
	}
	if len(fds) != want {
		api.CloseFds(fds)
		d.sendError(conn, 125, "run needs exactly %d file descriptors (stdin, stdout, stderr%s), got %d",
			want, map[bool]string{true: ", the shim's pidfd"}[req.InPlace], len(fds))
		return nil, false
	}
	// The lean run entry asks for exec in place or nothing: where this
	// daemon would not take the offer, it is told so before anything is
	// made for the run, and hands the run to `supervisor run`.
	if req.InPlaceOnly {
		why := ""
		switch {
		case !req.InPlace || !d.feat["in_place"]:
			why = "this daemon does not exec servers in their shims' places here"
		case d.cgroups != nil:
			if err := d.cgroups.MayEnter(req.ShimPID); err != nil {
				why = err.Error()
			}
		}
		if why != "" {
			api.CloseFds(fds)
			d.declineInPlace(conn, why)
			return nil, false
		}
	}
	r := &directRun{conn: conn, req: req, log: log}
	// An offer to exec in the shim's place is taken where this daemon
	// can watch such a server (inplace_linux.go).
	if req.InPlace {
		pidfd := fds[3]
		fds = fds[:3]
		if d.feat["in_place"] {
			var err error
			if r.shim, r.shimTok, err = shimHandle(pidfd, req); err != nil {
				api.CloseFds(fds)
				api.CloseFds([]int{pidfd})
				d.sendError(conn, 125, "run: the shim's pidfd: %v", err)
				return nil, false
			}
		} else {
			api.CloseFds([]int{pidfd})
		}
	}
	r.stdio = make([]registry.StdioInode, 3)
	for i, fd := range fds {
		r.files[i] = os.NewFile(uintptr(fd), fmt.Sprintf("stdio%d", i))
		kind, ino, _ := proc.FdKind(fd)
		r.stdio[i] = registry.StdioInode{Fd: i, Kind: kind, Inode: ino}
	}
	refuse := func(e api.Error) (*directRun, bool) {
		r.closeFiles()
		d.send(conn, api.TypeError, &e)
		return nil, false
	}
	if len(req.Argv) == 0 {
		return refuse(api.Error{Code: 125, Message: "run: no command given"})
	}
	if err := session.ValidateID(req.Session); err != nil {
		return refuse(api.Error{Code: 125, Message: "run: " + err.Error()})
	}
	if _, err := api.GraceOf(req.GraceMS); err != nil {
		return refuse(api.Error{Code: 125, Message: "run: " + err.Error()})
	}
	if d.isStopping() {
		return refuse(api.Error{Code: 125, Retry: true, Message: "the daemon is stopping"})
	}
	return r, true
}

// runMode says whether req's server is shared through a broker (run
// --share, automatic sharing, --lazy or --idle), which of them, for the
// messages, and whether the sharing is automatic (the caller says so).
func (d *Daemon) runMode(req *api.RunRequest, name string) (mode string, shared, auto bool) {
	mode = "run --share"
	switch {
	case !req.Share && req.Sandbox == nil && d.autoShare(*req, name):
		req.Share, auto = true, true
		mode = "automatic sharing (run --share=false or share = false in [servers." + name + "] runs it unshared)"
	case !req.Share && req.Lazy:
		mode = "run --lazy"
	case !req.Share:
		mode = "run --idle"
	}
	return mode, req.Share || req.Lazy || req.IdleMS > 0, auto
}

// startDirect starts r's server: its cgroup, limits and intent record,
// its stderr captured, its command flattened, then exec'd in its shim's
// place where the shim offered that, else forked here.
func (d *Daemon) startDirect(r *directRun) {
	req, id, name := r.req, r.id, r.name
	launch := flattened(req)
	if req.Sandbox != nil {
		err := d.planSandbox(&launch, req, id)
		if err == nil {
			launch.egress, err = d.openEgress(req.Session, id, &launch, "")
		}
		if err != nil {
			r.closeFiles()
			d.breakers.release(r.bkey)
			d.event("sandbox.refused", req.Session, "", name+": "+err.Error())
			d.metrics.SandboxDenied("run")
			d.sendError(r.conn, 125, "run: %v", err)
			return
		}
	}
	// Its cgroup, its limits and the intent record, committed before the
	// fork or the exec in place (start.go, design §7).
	srv, err := d.prepareServer(req.Session, id, id, storedLimits(req.Limits), func(cgroupPath string, v1 []string) error {
		_, err := d.reg.AddProcess(registry.Process{
			ID: id, Session: req.Session, Name: name, Argv: req.Argv, Cwd: string(req.Cwd),
			ShimPID: req.ShimPID, ShimToken: req.ShimToken, Stdio: r.stdio, GraceMS: req.GraceMS, Cgroup: cgroupPath,
			Limits: storedLimits(req.Limits), LimitCgroups: v1, Sandboxed: launch.sandbox != nil,
			Egress: launch.egress.record(),
		})
		return err
	})
	if err != nil {
		launch.egress.close()
		r.closeFiles()
		d.breakers.release(r.bkey)
		d.sendError(r.conn, 125, "run: %v", err)
		return
	}
	fault("run.intent")
	host := fmt.Sprintf("%d-%d", req.HostPID, req.HostToken.StartTicks)
	// Its stderr is captured for `supervisor logs` (logpipe.go): the log
	// writer holds the host's stderr instead of the server and copies
	// every byte to it. stdin and stdout stay the host's own fds.
	logged := false
	if w, err := d.startLogWriter(RunLogPath(d.cfg.Paths, name, id), r.files[2], id); err == nil {
		r.files[2].Close()
		r.files[2] = w
		logged = true
	} else if !errors.Is(err, errLogWriterUnsupported) {
		r.log.Warn("stderr not captured: the server writes to the host's stderr itself", "id", id, "err", err)
	}
	if r.shim != nil {
		ip := inPlaceRun{req: req, launch: launch, id: id, name: name, bkey: r.bkey, cg: srv.cg, limited: srv.limited, host: host, shim: r.shim, tok: r.shimTok, log: r.log}
		if logged {
			ip.stderr = r.files[2]
		}
		if l := d.execInPlace(r.conn, ip); l != nil {
			r.release() // it counts as live now
			r.dropShim()
			srv.closeFd()
			for i, f := range r.files {
				if ip.stderr == nil || i != 2 {
					f.Close()
				}
			}
			// The stop these may start waits for the monitor, which
			// waits for execLine: they go beside it.
			req.Env, r.req.Env = nil, nil
			d.tasks.Go("stop if ending", func() {
				d.stopIfSessionEnding(req.Session, id)
				d.enforceCap(req, id)
			})
			d.execLine(r.conn, l, r.log)
			return
		}
		r.dropShim()
		if req.InPlaceOnly {
			// Its intent record says why it never ran; the run goes on
			// through `supervisor run`, under an id of its own.
			d.transition(id, registry.StateFailed, func(p *registry.Process) {
				p.Error = "not exec'd in its shim's place (the shim cannot enter its cgroup): handed to `supervisor run`"
				t := d.reg.Now().UTC()
				p.ExitedAt = &t
			})
			d.undoStart(srv)
			r.closeFiles()
			d.breakers.release(r.bkey)
			d.declineInPlace(r.conn, "the shim cannot enter the server's cgroup")
			return
		}
	}
	d.startForked(r, srv, launch, host)
}

// declineInPlace answers a run that asked for exec in place or nothing
// (the lean run entry) that it is not exec'd in place, and why.
func (d *Daemon) declineInPlace(conn *api.Conn, why string) {
	d.send(conn, api.TypeNotInPlace, &api.Error{Code: 125, Message: "not exec'd in place: " + why})
}

// flattened is the command req's server runs as: an npx command as the
// program npx would run, where that is known offline (package launcher),
// so that npm does not stay resident.
func flattened(req api.RunRequest) launched {
	launch := launched{argv: req.Argv, env: req.Env}
	if fl, ok, why := launcher.Flatten(req.Argv, string(req.Cwd), req.Env); ok && !req.NoFlatten {
		launch = launched{argv: fl.Argv, env: fl.Env, note: " (flattened, " + fl.Via + ")"}
	} else if ok {
		launch.note = " (not flattened: flatten = false)"
	} else if why != launcher.NotARunner {
		launch.note = " (not flattened: " + why + ")"
	}
	return launch
}

// startForked forks r's server on the host's fds, records it running,
// tells the shim, and keeps the shim's connection as the server's
// lifeline.
func (d *Daemon) startForked(r *directRun, srv *serverStart, launch launched, host string) {
	req, id, name, log := r.req, r.id, r.name, r.log
	started, err := d.forkServer(srv, spawn.Request{
		Argv: launch.argv, Env: launch.env, Dir: string(req.Cwd), Stdio: r.files, Host: host, Sandbox: launch.sandbox,
		Netns: launch.egress.netns(),
	})
	launch.egress.forked()
	if err != nil {
		launch.egress.close()
		code := 125
		var se *spawn.StartError
		if errors.As(err, &se) {
			code = se.Code
		}
		d.transition(id, registry.StateFailed, func(p *registry.Process) {
			p.Error = err.Error()
			t := d.reg.Now().UTC()
			p.ExitedAt = &t
		})
		d.event("process.failed", req.Session, id, err.Error())
		d.breakers.result(r.bkey, req.Argv, string(req.Cwd), name, err.Error())
		log.Info("spawn failed", "id", id, "err", err)
		d.sendError(r.conn, code, "%v", err)
		return
	}
	// The environment is the bulk of a request and holds the host's
	// secrets: the daemon keeps none of it for the server's lifetime.
	req.Env, r.req.Env = nil, nil
	// Where the session's processes live in a kill-on-close job
	// (Windows), the shim holds a handle to it too, so a daemon crash does
	// not take them along (design §2) while the host still runs.
	if _, err := d.reaper.ShareJob(req.Session, req.ShimPID); err != nil {
		log.Warn("session job not shared with the shim: the server dies if the daemon does", "id", id, "err", err)
	}
	fault("run.forked")
	// PID and token are recorded whatever a concurrent stop did to the
	// state meanwhile: a stopping record without them could not be found
	// again after a crash.
	startEvent := registry.Logged{Kind: "process.start", Detail: fmt.Sprintf("pid %d %q%s", started.PID, req.Argv, launch.note)}
	rec, err := d.reg.UpdateLogged(id, startEvent, func(p *registry.Process) error {
		p.PID, p.PGID, p.Token, p.Path = started.PID, started.PGID, started.Token, started.Path
		if p.State == registry.StateStarting {
			p.State = registry.StateRunning
		}
		return nil
	})
	if err != nil {
		log.Error("record running process", "id", id, "err", err)
		rec.PID, rec.PGID, rec.Token = started.PID, started.PGID, started.Token
		d.event(startEvent.Kind, req.Session, id, startEvent.Detail)
	}
	startPeriod := d.settings().Breaker.StartPeriod
	l := &live{id: id, done: make(chan struct{}), grace: time.Duration(req.GraceMS) * time.Millisecond,
		target: d.targetOf(rec), started: time.Now(),
		breaker: breakerRef{key: r.bkey, argv: req.Argv, cwd: string(req.Cwd), name: name, startPeriod: startPeriod}}
	// Alive past the start period: a good start, whatever comes later.
	bkey := r.bkey // not r: the timer would keep the run alive
	l.startTimer = time.AfterFunc(startPeriod, func() {
		if d.isLive(id) {
			d.breakers.result(bkey, req.Argv, string(req.Cwd), name, "")
		}
	})
	d.mu.Lock()
	d.live[id] = l
	d.mu.Unlock()
	r.release() // it counts as live now
	d.tasks.Go("monitor", func() { d.monitor(l, started.Exit) })
	d.watchEgress(launch.egress, l)

	d.stopIfSessionEnding(req.Session, id)
	if err := r.conn.Send(api.TypeStarted, &api.Started{ID: id, PID: started.PID, Token: started.Token, Session: req.Session}); err != nil {
		log.Info("shim gone before start was confirmed", "id", id, "err", err)
	}
	log.Info("started", "id", id, "pid", started.PID, "argv", req.Argv)
	d.enforceCap(req, id)

	d.lifeline(r.conn, l, req.Session, req.ShimPID, d.graceFor(req))
}

// launched is the command a run's server is started as: the request's, or
// the program a package runner in it would run (launcher.Flatten). note
// tells which, for the start event.
type launched struct {
	argv, env []string
	note      string
	sandbox   *sandbox.Rules // nil: unconfined
	egress    *egressRun     // its egress proxy: a network list's (egress.go)
}

// inPlaceRun is one run being exec'd in its shim's place: what serveRun
// has set up for it.
type inPlaceRun struct {
	req    api.RunRequest
	launch launched // what to exec: req's command, or flattened
	id     string
	name   string
	bkey   string
	cg     cgroup.Server
	// limited are the cgroup v1 directories of its limits, which the shim
	// enters beside cg before its exec, and the limits written then.
	limited cgroup.Limited
	host    string // the EnvHost marker
	shim    *proc.Handle
	tok     proc.Token // the shim's full token
	stderr  *os.File   // the log writer's pipe, or nil: the shim keeps its own
	log     hclog.Logger
}

// stopIfSessionEnding stops server id, just started, when its session
// began ending while it was being started: it must not keep it.
func (d *Daemon) stopIfSessionEnding(session, id string) {
	if s, err := d.reg.Session(session); err == nil && s.State != registry.SessionActive {
		var opt shutdown.Options
		if proc.Verify(s.HostPID, s.HostToken) != nil {
			// Its host is dead: the pipes are closed, and the server
			// gets the EOF grace its session's other servers got.
			opt.EOFGrace = d.eofGrace()
		}
		d.stopIDs(context.Background(), []string{id}, opt)
	}
}

// lifeline keeps a run (or attach) connection for server l: the server's
// exit status goes back to the shim, the shim's stop requests come in, and
// the connection closing means the shim, and so the host, no longer has
// the server.
func (d *Daemon) lifeline(conn *api.Conn, l *live, sessionID string, shimPID int, defGrace time.Duration) {
	log := d.log.With("session", sessionID, "id", l.id)
	shimGone := make(chan struct{})
	type stopAsk struct {
		grace     time.Duration
		interrupt bool
	}
	stopReq := make(chan stopAsk, 1)
	go func() { // ends when the connection is closed (below or by the peer)
		defer close(shimGone)
		for {
			m, fds, err := conn.Recv()
			api.CloseFds(fds)
			if err != nil {
				return
			}
			if m.Type == api.TypeStopSelf {
				var s api.StopSelf
				if err := api.Decode(m, &s); err != nil {
					// Still a stop request: with the default grace.
					log.Warn("stop request does not decode: stopping with the default grace", "err", err)
				}
				select {
				case stopReq <- stopAsk{grace(s.GraceMS, defGrace), s.Interrupt}:
				default:
				}
				continue
			}
			d.refuse(conn, log, fmt.Errorf("%w: %q on a run connection", api.ErrMalformed, m.Type))
			return
		}
	}()
	for {
		select {
		case <-l.done:
			st := l.status
			ex := api.Exited{ExitCode: st.ExitCode(), Code: st.Code, Unknown: st.Unknown}
			if st.Signal != 0 {
				ex.Signal = proc.SignalName(st.Signal)
			}
			d.send(conn, api.TypeExited, &ex)
			return
		case ask := <-stopReq:
			log.Info("shim asked to stop", "interrupt", ask.interrupt)
			if ask.interrupt && interruptServer(l.target) == nil {
				// Its own SIGINT first; the cascade only if that did not
				// end it within the grace (its exit cascades its leftovers).
				d.tasks.Go("stop after interrupt", func() {
					select {
					case <-l.done:
					case <-d.life.Done():
					case <-time.After(ask.grace):
						d.stopIDs(context.Background(), []string{l.id}, shutdown.Options{Grace: ask.grace})
					}
				})
				continue
			}
			d.tasks.Go("stop", func() { d.stopIDs(context.Background(), []string{l.id}, shutdown.Options{Grace: ask.grace}) })
		case <-shimGone:
			if d.isStopping() {
				return
			}
			select {
			case <-l.done:
				return
			default:
			}
			log.Info("shim gone: stopping its server", "shim", shimPID)
			d.event("shim.gone", sessionID, l.id, fmt.Sprintf("shim %d", shimPID))
			d.stopIDs(context.Background(), []string{l.id}, shutdown.Options{Grace: defGrace})
			return
		}
	}
}

// serveAttach re-attaches a shim to its server after the daemon it started
// with went away. The server must be live here under the same id, PID and
// creation token; a record rebuilt from markers learns its shim here.
func (d *Daemon) serveAttach(conn *api.Conn, a api.Attach) {
	if strings.HasPrefix(a.ID, clientPrefix) {
		d.serveShareAttach(conn, a)
		return
	}
	d.mu.Lock()
	l := d.live[a.ID]
	d.mu.Unlock()
	p, err := d.reg.Process(a.ID)
	if l == nil || err != nil || p.PID != a.PID || !p.Token.Matches(a.Token) {
		d.sendError(conn, 125, "attach %s: no such live server (pid %d) here; it is no longer supervised", a.ID, a.PID)
		return
	}
	if p.ShimPID != a.ShimPID || !p.ShimToken.Matches(a.ShimToken) {
		if np, err := d.reg.Update(a.ID, func(r *registry.Process) error {
			r.ShimPID, r.ShimToken = a.ShimPID, a.ShimToken
			return nil
		}); err == nil {
			p = np
		} else {
			// Recovery would watch the old shim: the new one still gets
			// its lifeline below.
			d.log.Warn("re-attached shim not recorded", "id", a.ID, "shim", a.ShimPID, "err", err)
		}
	}
	// The connection is the shim's lifeline from here (its EOF stops the
	// server): the watch recovery put on the shim would stop it a second
	// time.
	l.stopMu.Lock()
	if l.shimCancel != nil {
		l.shimCancel()
		l.shimCancel = nil
	}
	l.stopMu.Unlock()
	if s, err := d.reg.Session(p.Session); err == nil && s.State == registry.SessionActive {
		if err := d.watchHost(s); err != nil {
			d.log.Info("attach: host gone", "session", s.ID, "err", err)
		}
	}
	if err := conn.Send(api.TypeStarted, &api.Started{ID: p.ID, PID: p.PID, Token: p.Token, Session: p.Session}); err != nil {
		return
	}
	d.event("shim.attached", p.Session, p.ID, fmt.Sprintf("shim %d", a.ShimPID))
	d.log.Info("shim re-attached", "id", p.ID, "pid", p.PID, "shim", a.ShimPID)
	d.lifeline(conn, l, p.Session, a.ShimPID, grace(a.GraceMS, d.defaultGrace()))
}

func (d *Daemon) graceFor(req api.RunRequest) time.Duration {
	return grace(req.GraceMS, d.defaultGrace())
}

func (d *Daemon) isStopping() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stopping
}

// openSession makes sure the request's session exists and its host is
// watched. A session id the shim derived from its host (session.Identify)
// names one of that host's sessions: once it has ended, the host's next
// server opens the next one (req.Session is set to its id), never the
// ended one again. An id the user chose is reopened as asked.
func (d *Daemon) openSession(req *api.RunRequest) error {
	want := registry.Session{
		ID: req.Session, Label: req.Label, HostPID: req.HostPID, HostToken: req.HostToken, HostCommand: req.HostCommand,
	}
	open := d.reg.OpenSession
	if req.Session == session.DerivedID(req.HostPID, req.HostToken) {
		open = d.reg.OpenGeneration
	}
	s, _, err := open(want)
	if err != nil {
		return err
	}
	req.Session = s.ID
	return d.watchHost(s)
}

// endWithHost ends a session whose host died, together with the others
// whose hosts die within the same moment (a terminal closed, a machine
// sleeping, a crash taking many hosts): one cascade, so one snapshot of
// /proc serves them all instead of one per session.
func (d *Daemon) endWithHost(id, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dying == nil {
		d.dying = map[string]string{}
		noticed := time.Now()
		time.AfterFunc(hostBatchWindow, func() {
			d.mu.Lock()
			batch := d.dying
			d.dying = nil
			d.mu.Unlock()
			ids := make([]string, 0, len(batch))
			reasons := make([]string, 0, len(batch))
			for id, why := range batch {
				ids = append(ids, id)
				reasons = append(reasons, why)
			}
			d.endSessionsSince(ids, reasons, shutdown.Options{EOFGrace: d.eofGrace()}, noticed)
		})
	}
	d.dying[id] = reason
}

// hostBatchWindow is how long a host death waits for others to join its
// cascade: short beside the EOF grace every such stop starts with.
const hostBatchWindow = 2 * time.Millisecond

// watchHost arranges for the session to end when its host dies. A host
// that is already gone ends the session at once.
func (d *Daemon) watchHost(s registry.Session) error {
	d.mu.Lock()
	_, watched := d.hosts[s.ID]
	d.mu.Unlock()
	if watched {
		return nil
	}
	cancel, err := d.watcher.Watch(s.HostPID, s.HostToken, func() {
		d.log.Info("host exited: ending its session", "session", s.ID, "host", s.HostPID)
		d.endWithHost(s.ID, fmt.Sprintf("host %d exited", s.HostPID))
	})
	if err != nil {
		if errors.Is(err, proc.ErrGone) || errors.Is(err, proc.ErrTokenMismatch) {
			d.endWithHost(s.ID, fmt.Sprintf("host %d is gone", s.HostPID))
			return fmt.Errorf("host process %d of session %s is gone", s.HostPID, s.ID)
		}
		return fmt.Errorf("watch host %d: %w", s.HostPID, err)
	}
	d.mu.Lock()
	if _, dup := d.hosts[s.ID]; dup {
		d.mu.Unlock()
		cancel()
		return nil
	}
	d.hosts[s.ID] = cancel
	d.mu.Unlock()
	return nil
}

// monitor commits the final state of l once it exits and releases its
// waiters. A spawned process's status is real (reaped by us); an adopted
// one's is unknown.
func (d *Daemon) monitor(l *live, exit <-chan spawn.Status) {
	var st spawn.Status
	select {
	case st = <-exit:
	case <-d.life.Done():
		select {
		case st = <-exit: // an exit already told is recorded all the same
		default:
			// The daemon exits and leaves l running: the next daemon
			// re-adopts it and watches it again.
			return
		}
	}
	execErr := l.afterExit()
	l.status = st
	restarting := l.shared != nil && l.shared.life.Usable()
	kind, detail := exitDetail(st, execErr)
	rec, _ := d.reg.Process(l.id)
	if hits := d.noteLimitHits(rec); slices.Contains(hits, cgroup.HitMemory) && st.Signal == syscall.SIGKILL {
		detail += " (out of memory: " + cgroup.HitMemory + " " + cgroup.FormatMemory(rec.Limits.MemoryMax) + ")"
	}
	d.recordExit(l, st, execErr, restarting, registry.Logged{Kind: kind, Detail: detail})

	// Exited on its own (no stop under way): whatever it left behind in its
	// group, under its marker or holding the host's pipes goes through the
	// cascade, so the host sees EOF — the npx leftovers hosts hit today.
	l.stopMu.Lock()
	leftovers := l.stopDone == nil
	d.judgeStartLocked(l, st, execErr, leftovers)
	if leftovers {
		l.stopDone, l.force = make(chan struct{}), make(chan struct{})
	}
	l.stopMu.Unlock()
	if leftovers {
		d.cascadeLeftovers(l)
	}
	if l.target.Cgroup != "" {
		if err := cgroup.Remove(l.target.Cgroup); err != nil {
			d.log.Warn("remove cgroup", "err", err)
		}
	}
	cgroup.RemoveV1(rec.LimitCgroups)
	d.mu.Lock()
	delete(d.live, l.id)
	d.mu.Unlock()
	close(l.done)
}

// afterExit ends what watched l while it ran (its start timer, its
// shim's watch) once it has exited, and returns why its exec failed, if
// its shim said so.
func (l *live) afterExit() (execErr string) {
	if l.execDone != nil {
		// A server exec'd in its shim's place: the shim's connection
		// closes at its exit at the latest, and says first why an exec
		// failed.
		select {
		case <-l.execDone:
		case <-time.After(2 * time.Second):
		}
	}
	l.stopMu.Lock()
	execErr = l.execErr
	l.stopMu.Unlock()
	if l.startTimer != nil {
		l.startTimer.Stop() // it holds the request's argv until it fires
	}
	l.stopMu.Lock()
	if l.shimCancel != nil {
		l.shimCancel() // its watch on the shim ends with it
	}
	l.stopMu.Unlock()
	return execErr
}

// exitDetail is the kind and detail of the event that tells how a
// process ended: st, or its failed exec.
func exitDetail(st spawn.Status, execErr string) (kind, detail string) {
	detail = fmt.Sprintf("pid %d exit code %d", st.PID, st.Code)
	switch {
	case st.Unknown:
		detail = fmt.Sprintf("pid %d exited; status unknown (re-adopted)", st.PID)
	case st.Signal != 0:
		detail = fmt.Sprintf("pid %d killed by %s", st.PID, proc.SignalName(st.Signal))
	}
	kind = "process.exit"
	if execErr != "" {
		kind, detail = "process.failed", execErr
	}
	return kind, detail
}

// recordExit commits how l ended, with the event ev: a failed spawn
// when its exec failed, an incarnation's end when its shared server
// restarts it, its final state otherwise.
func (d *Daemon) recordExit(l *live, st spawn.Status, execErr string, restarting bool, ev registry.Logged) {
	_, err := d.reg.UpdateLogged(l.id, ev, func(p *registry.Process) error {
		if p.State.Final() {
			return nil
		}
		if execErr != "" {
			// As a spawn that failed: the command never ran.
			p.State, p.Error = registry.StateFailed, execErr
			t := d.reg.Now().UTC()
			p.ExitedAt = &t
			return nil
		}
		if restarting {
			// A shared server keeps its record across restarts: note how
			// this incarnation ended; its supervisor starts the next.
			if st.Signal != 0 {
				p.Signal = proc.SignalName(st.Signal)
			} else {
				c := st.Code
				p.ExitCode = &c
			}
			p.Health = "exited"
			return nil
		}
		p.State = registry.StateExited
		t := d.reg.Now().UTC()
		p.ExitedAt = &t
		if l.shared != nil {
			p.Health = "stopped" // stopped for good, not between restarts
		}
		if !st.Unknown {
			if st.Signal != 0 {
				p.Signal = proc.SignalName(st.Signal)
			} else {
				c := st.Code
				p.ExitCode = &c
			}
		} else {
			p.Error = "exit status unknown: re-adopted after a daemon restart"
		}
		return nil
	})
	if err != nil {
		d.log.Error("record exit", "id", l.id, "err", err)
	}
}

// judgeStartLocked tells l's breaker how its start went when it exited
// within its start period; leftovers says no stop was under way. Called
// with l.stopMu held.
func (d *Daemon) judgeStartLocked(l *live, st spawn.Status, execErr string, leftovers bool) {
	startPeriod := l.breaker.startPeriod
	// Only processes spawned here have a breaker (and a start time).
	early := l.breaker.key != "" && time.Since(l.started) < startPeriod
	// A server exec'd in its shim's place gets its host's stop signals
	// itself (the shim turned them into stop requests): a host that closes
	// a server at once is no crash loop.
	// (Not SIGKILL: the OOM killer's too, which a crash loop may be.)
	hostStopped := l.execDone != nil && execErr == "" &&
		(st.Signal == syscall.SIGTERM || st.Signal == syscall.SIGINT || st.Signal == syscall.SIGHUP)
	switch {
	case early && (!leftovers || hostStopped):
		// Stopped by us (or its host) before it could prove anything
		// either way.
		d.breakers.release(l.breaker.key)
	case early && st.ExitCode() == 0:
		// A clean exit is no crash loop: a host that opens and closes a
		// server at once.
		d.breakers.result(l.breaker.key, l.breaker.argv, l.breaker.cwd, l.breaker.name, "")
	}
	if early && leftovers && !hostStopped && st.ExitCode() != 0 {
		// Failed on its own within the start period: a failed start.
		why := fmt.Sprintf("exited with code %d within %v of its start", st.Code, startPeriod)
		switch {
		case execErr != "":
			why = execErr
		case st.Signal != 0:
			why = fmt.Sprintf("killed by %s within %v of its start", proc.SignalName(st.Signal), startPeriod)
		}
		d.breakers.result(l.breaker.key, l.breaker.argv, l.breaker.cwd, l.breaker.name, why)
	}
}

// cascadeLeftovers stops what l, which exited on its own, left behind,
// and ends the stop the monitor opened for it (l.stopDone): a stop request
// that came meanwhile gets this outcome.
func (d *Daemon) cascadeLeftovers(l *live) {
	g := l.grace
	if g <= 0 {
		g = d.defaultGrace()
	}
	t := l.target
	t.LeaderJustExited = true
	out := d.stopCascade(context.Background(), "exited", []shutdown.Target{t},
		shutdown.Options{Grace: g, Force: l.force, Instance: d.instance})
	switch {
	case len(out[0].Procs) > 0:
		d.log.Info("stopped what an exited server left behind", "id", l.id, "outcome", out[0].String())
		d.recordStopLogged("process.leftovers", t.Session, out[0])
	case len(out[0].Unproven) > 0:
		// Nothing stopped: kept in the record, no event (a wrapper
		// shell's later commands hold the pipe on every run).
		d.log.Info("an exited server's stdout is held by processes not proven its own; left alone", "id", l.id, "pids", out[0].Unproven)
		rec := stopRecordOf(out[0])
		if _, err := d.reg.Update(l.id, func(p *registry.Process) error { p.Stop = rec; return nil }); err != nil {
			d.log.Error("record stop outcome", "id", l.id, "err", err)
		}
	}
	l.forceStop() // idempotent: a stop request may have closed it already
	l.stopMu.Lock()
	l.outcome = out[0]
	l.exitedFirst = true
	close(l.stopDone)
	l.stopDone, l.force = nil, nil
	l.stopMu.Unlock()
}

// recordStop keeps a cascade's outcome in the process record.
func (d *Daemon) recordStop(id string, o shutdown.Outcome) {
	rec := stopRecordOf(o)
	if _, err := d.reg.Update(id, func(p *registry.Process) error { p.Stop = rec; return nil }); err != nil {
		d.log.Error("record stop outcome", "id", id, "err", err)
	}
}

// recordStopLogged is recordStop with an event of kind telling the
// outcome in the same commit. Without a record to keep the outcome in,
// the event is still logged.
func (d *Daemon) recordStopLogged(kind, session string, o shutdown.Outcome) {
	rec := stopRecordOf(o)
	_, err := d.reg.UpdateLogged(o.ID, registry.Logged{Kind: kind, Detail: o.String()},
		func(p *registry.Process) error { p.Stop = rec; return nil })
	if err != nil {
		d.log.Error("record stop outcome", "id", o.ID, "err", err)
		d.event(kind, session, o.ID, o.String())
	}
}

// targetOf builds the cascade's view of a process record: its tree is
// found by group, marker, cgroup and the inodes of the host channels it
// was given; its shim and its host are never signalled.
func (d *Daemon) targetOf(p registry.Process) shutdown.Target {
	t := shutdown.Target{ID: p.ID, PID: p.PID, PGID: p.PGID, Token: p.Token, Session: p.Session, Cgroup: p.Cgroup, LimitCgroups: p.LimitCgroups,
		// A shared server restarts under its record: its earlier runs'
		// leftovers carry its id and are older than this run.
		RunsBefore: p.Port > 0 || p.Restarts > 0}
	for _, s := range p.Stdio {
		t.Stdio = append(t.Stdio, shutdown.Channel{Fd: s.Fd, Kind: s.Kind, Inode: s.Inode})
	}
	if p.ShimPID > 0 {
		t.Spared = append(t.Spared, shutdown.Proc{PID: p.ShimPID, Token: p.ShimToken})
	}
	if s, err := d.reg.Session(p.Session); err == nil && s.HostPID > 0 {
		t.Spared = append(t.Spared, shutdown.Proc{PID: s.HostPID, Token: s.HostToken})
	}
	return t
}

// stopIDs runs the cascade for the live processes among ids and returns one
// outcome per id. A process already being stopped by another caller is
// waited for, not stopped twice.
func (d *Daemon) stopIDs(ctx context.Context, ids []string, opt shutdown.Options) []shutdown.Outcome {
	return d.stopIDsSince(ctx, ids, opt, time.Now())
}

// stopIDsSince is stopIDs for a stop whose cause (a host's death) was
// noticed at since: a process that exited on its own about then exited
// because of it.
func (d *Daemon) stopIDsSince(ctx context.Context, ids []string, opt shutdown.Options, since time.Time) []shutdown.Outcome {
	var mine, theirs []*live
	out := make([]shutdown.Outcome, len(ids))
	idx := map[string]int{}
	for i, id := range ids {
		idx[id] = i
		d.mu.Lock()
		l, joined := d.live[id], false
		if l == nil {
			// Exited while another stop of it runs: that stop publishes
			// how it ended, and this one joins it rather than settling
			// the exit itself (two process.stop events for one exit, seen
			// in CI when a host died as its server was being started).
			l, joined = d.claimed[id], true
		}
		d.mu.Unlock()
		if l == nil {
			out[i] = d.settleExited(id, opt, since)
			continue
		}
		l.stopMu.Lock()
		ended := false
		switch {
		case l.stopDone != nil:
			theirs = append(theirs, l)
		case joined:
			ended = true // that stop has ended: its outcome is in the record
		default:
			l.stopDone = make(chan struct{})
			l.force = make(chan struct{})
			mine = append(mine, l)
			d.mu.Lock()
			d.claimed[id] = l
			d.mu.Unlock()
		}
		l.stopMu.Unlock()
		if ended {
			out[i] = d.settleExited(id, opt, since)
		}
	}
	// A later request shortens a stop under way to its own grace, counted
	// from now (never lengthens it): once that is over, the running
	// cascade is forced. Without a grace of its own it asks for the
	// process's, else the daemon's: a stop under way with a long grace
	// cannot wedge a later stop, a session end or `daemon stop`.
	longest := time.Duration(0)
	for _, l := range theirs {
		g := opt.Grace
		if g <= 0 {
			g = l.grace
		}
		if g <= 0 {
			g = d.defaultGrace()
		}
		longest = max(longest, g)
		t := time.AfterFunc(g, l.forceStop)
		defer t.Stop()
	}
	if len(theirs) > 0 && opt.Progress != nil {
		opt.Progress(shutdown.Progress{Joined: true, Processes: len(theirs), Wait: longest})
	}
	if len(mine) > 0 {
		d.cascadeLive(ctx, mine, opt)
		d.mu.Lock()
		for _, l := range mine {
			if d.claimed[l.id] == l {
				delete(d.claimed, l.id)
			}
		}
		d.mu.Unlock()
	}
	for _, l := range theirs {
		l.stopMu.Lock()
		done := l.stopDone
		l.stopMu.Unlock()
		if done != nil {
			<-done
		}
	}
	for _, l := range append(mine, theirs...) {
		l.stopMu.Lock()
		o, exitedFirst := l.outcome, l.exitedFirst
		l.stopMu.Unlock()
		if exitedFirst {
			// Joined the cascade of what it left behind: the exit itself
			// is settled by its record.
			o = d.settleExited(l.id, opt, since)
		}
		out[idx[l.id]] = o
	}
	for i := range out {
		d.describe(&out[i])
	}
	return out
}

// describe names an outcome's target and its leader by the record: the
// cascade knows processes by PID and short name only.
func (d *Daemon) describe(o *shutdown.Outcome) {
	p, err := d.reg.Process(o.ID)
	if err != nil {
		return
	}
	o.Name, o.Command = p.Name, strings.Join(p.Argv, " ")
	for i := range o.Procs {
		if o.Procs[i].PID == o.PID {
			o.Procs[i].Command = o.Command
		}
	}
}

// cascadeLive stops ls through one cascade and publishes the outcomes. An
// explicit opt.Grace applies to all; otherwise each process keeps the grace
// it was started with.
func (d *Daemon) cascadeLive(ctx context.Context, ls []*live, opt shutdown.Options) {
	// Commit before acting: a crash mid-stop leaves "stopping", which the
	// next daemon resumes.
	registry.Each(len(ls), func(i int) {
		if _, err := d.reg.Transition(ls[i].id, registry.StateStopping, nil); err != nil &&
			!errors.Is(err, registry.ErrBadTransition) {
			d.log.Error("record stopping", "id", ls[i].id, "err", err)
		}
	})
	targets := make([]shutdown.Target, 0, len(ls))
	for _, l := range ls {
		t := l.target
		t.Grace = opt.Grace
		if t.Grace <= 0 {
			t.Grace = l.grace
		}
		l.stopMu.Lock()
		t.Force = l.force
		l.stopMu.Unlock()
		targets = append(targets, t)
	}
	eofStop := opt.EOFGrace > 0
	opt.Grace = d.defaultGrace()
	// Marker holders of processes someone else is stopping are theirs.
	opt.SkipProc = d.isLive
	opt.OtherServer = d.otherServers(ls)
	opt.Instance = d.instance
	outs := d.stopCascade(ctx, "stop", targets, opt)
	registry.Each(len(ls), func(i int) {
		l := ls[i]
		o := outs[i]
		// The cascade saw the process exit; its status follows from the
		// reaper (or the pidfd watch) within moments, and says how it
		// really ended.
		failed := o.Result == shutdown.Failed
		if !failed {
			select {
			case <-l.done:
				o = settle(o, l.status, eofStop)
			case <-time.After(5 * time.Second):
				d.log.Warn("exit not collected after stop", "id", l.id, "pid", l.target.PID)
			}
		}
		p, _ := d.reg.Process(l.id)
		d.publishStop(p.Session, o)
		l.stopMu.Lock()
		if failed && !l.retrying {
			// Nothing was signalled: the record stays "stopping" and the
			// stop is retried until the process is gone.
			l.retrying = true
			d.log.Warn("stop failed; retrying until the process is gone", "id", l.id, "pid", l.target.PID, "err", o.Error)
			d.tasks.Go("retry stop", func() { d.retryStop(l, opt) })
		}
		l.outcome = o
		close(l.stopDone)
		// A stop that left something alive can be asked for again.
		l.stopDone, l.force = nil, nil
		l.stopMu.Unlock()
	})
}

// otherServers is the cascade's OtherServer for a stop of ls: the live
// servers it does not stop, as of now.
func (d *Daemon) otherServers(ls []*live) func(int, proc.Token) bool {
	stopping := make(map[*live]bool, len(ls))
	for _, l := range ls {
		stopping[l] = true
	}
	d.mu.Lock()
	others := make(map[int]proc.Token, len(d.live))
	for _, l := range d.live {
		// Not a foreign listener adopted with its own environment, nor a
		// shim that has not exec'd its server yet (it still carries its
		// host's): either may carry a target's markers.
		if stopping[l] || l.target.PID <= 0 || l.shared != nil && l.shared.adopted || l.execDone != nil && !closed(l.execDone) {
			continue
		}
		others[l.target.PID] = l.target.Token
	}
	d.mu.Unlock()
	return func(pid int, tok proc.Token) bool {
		t, ok := others[pid]
		return ok && t.Matches(tok)
	}
}

// closed says whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (d *Daemon) isLive(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.live[id] != nil
}

// endSessions ends sessions together: their processes go through one
// cascade, so one snapshot of /proc serves them all (a cascade per session
// would scan /proc once per session).
func (d *Daemon) endSessions(ids, reasons []string, grace, eofGrace time.Duration) []shutdown.Outcome {
	return d.endSessionsWith(ids, reasons, shutdown.Options{Grace: grace, EOFGrace: eofGrace})
}

// endSessionsWith is endSessions with the cascade's options (its grace,
// EOF grace and progress).
func (d *Daemon) endSessionsWith(ids, reasons []string, opt shutdown.Options) []shutdown.Outcome {
	return d.endSessionsSince(ids, reasons, opt, time.Now())
}

// endSessionsSince is endSessionsWith for sessions whose end was caused at
// since (their hosts' deaths were noticed then).
func (d *Daemon) endSessionsSince(ids, reasons []string, opt shutdown.Options, since time.Time) []shutdown.Outcome {
	registry.Each(len(ids), func(i int) {
		if _, err := d.reg.SetSessionState(ids[i], registry.SessionEnding, reasons[i]); err != nil &&
			!errors.Is(err, registry.ErrBadTransition) {
			d.log.Error("mark session ending", "session", ids[i], "err", err)
		}
	})
	var procs []string
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
		d.mu.Lock()
		if cancel, ok := d.hosts[id]; ok {
			cancel()
			delete(d.hosts, id)
		}
		d.mu.Unlock()
	}
	// Exited records too only for a host's death (there can be many,
	// kept for the retention); any other end stops the live ones.
	for _, p := range d.reg.Processes(registry.Filter{All: opt.EOFGrace > 0}) {
		// A server that exited on EOF as its host died, before we got
		// here, is part of this stop: its outcome is settled with it.
		justExited := opt.EOFGrace > 0 && p.Stop == nil && p.ExitedAt != nil && !p.ExitedAt.Before(since.Add(-eofLead))
		if want[p.Session] && (!p.State.Final() || justExited) {
			procs = append(procs, p.ID)
		}
	}
	opt.WholeSession = true
	out := d.stopIDsSince(context.Background(), procs, opt, since)
	registry.Each(len(ids), func(i int) {
		d.releaseSession(ids[i])
		if _, err := d.reg.SetSessionState(ids[i], registry.SessionEnded, reasons[i]); err != nil &&
			!errors.Is(err, registry.ErrBadTransition) {
			d.log.Error("mark session ended", "session", ids[i], "err", err)
		}
	})
	d.log.Info("sessions ended", "sessions", ids, "reasons", reasons, "processes", len(procs))
	if out == nil {
		out = []shutdown.Outcome{}
	}
	return out
}

// stopAll ends every session (in one cascade: graces overlap) and refuses
// new runs from here on.
func (d *Daemon) stopAll(ctx context.Context) []shutdown.Outcome {
	return d.stopAllWith(ctx, shutdown.Options{})
}

// stopAllWith is stopAll with the cascade's options: opt.Grace (0: each
// process's own) is also the most a stop already under way still gets.
func (d *Daemon) stopAllWith(ctx context.Context, opt shutdown.Options) []shutdown.Outcome {
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	var ids, reasons []string
	for _, s := range d.reg.Sessions(false) {
		ids = append(ids, s.ID)
		reasons = append(reasons, "daemon stopped")
	}
	all := d.endSessionsWith(ids, reasons, shutdown.Options{Grace: opt.Grace, Progress: opt.Progress})
	d.stopShared(opt.Grace)
	d.stopBrokers(opt.Grace)
	return all
}

func newID() string {
	var b [5]byte
	rand.Read(b[:])
	return "p-" + hex.EncodeToString(b[:])
}

func baseName(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return s[i+1:]
		}
	}
	return s
}

// enforceCap stops the oldest live instances of a named server in the
// session beyond its cap (design §5: default 1, newest wins). Hosts that
// reconnect often abandon the old server with its stdin still open; no
// parent watchdog can see that.
func (d *Daemon) enforceCap(req api.RunRequest, newID string) {
	if req.Name == "" {
		return
	}
	limit := 1
	if req.MaxInstances != nil {
		limit = *req.MaxInstances
	}
	if limit <= 0 {
		return
	}
	// Every live instance, this one included, oldest first; the oldest
	// beyond the cap go. Whichever of two instances started at once
	// becomes live second sees the other and makes the same choice, so
	// none is missed (the first may not have seen the second yet).
	var all []registry.Process
	for _, p := range d.reg.Processes(registry.Filter{Session: req.Session}) {
		if p.Name == req.Name && (p.ID == newID || d.isLive(p.ID)) {
			all = append(all, p)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].StartedAt.Equal(all[j].StartedAt) {
			return all[i].StartedAt.Before(all[j].StartedAt)
		}
		return all[i].ID < all[j].ID
	})
	if excess := len(all) - limit; excess > 0 {
		var victims []string
		for _, p := range all[:excess] {
			// One that has exited on its own, its exit not yet read
			// (in place, its host can see it first and start the next),
			// is not stopped: its own exit stands, for its breaker too.
			if p.PID > 0 && exitedOnItsOwn(p) {
				continue
			}
			victims = append(victims, p.ID)
		}
		if len(victims) == 0 {
			return
		}
		d.log.Info("instance cap: stopping older instances", "session", req.Session, "name", req.Name,
			"cap", limit, "stopping", victims, "newest", all[len(all)-1].ID)
		d.event("instance.cap", req.Session, newID, fmt.Sprintf("stopping %v", victims))
		d.tasks.Go("stop over the cap", func() { d.stopIDs(context.Background(), victims, shutdown.Options{}) })
	}
}

// exitedOnItsOwn says p's process has exited, by its pidfd (a zombie's
// or a reaped one's), not by its /proc state: a process that execs from
// a thread other than its leader (a shim exec'ing its server in place)
// shows that leader as a zombie for a moment, and was taken for gone.
func exitedOnItsOwn(p registry.Process) bool {
	h, err := proc.OpenHandle(p.PID, p.Token)
	if err != nil {
		return errors.Is(err, proc.ErrGone) || errors.Is(err, proc.ErrTokenMismatch)
	}
	defer h.Close()
	return h.Wait(0)
}

// retryStop retries a stop that failed (out of file descriptors, /proc
// unreadable: the cascade signalled nothing) with backoff, until it goes
// through or the process is gone some other way, or the daemon exits. A
// stop asked for is never abandoned: no record stays "stopping" while its
// process lives.
func (d *Daemon) retryStop(l *live, opt shutdown.Options) {
	defer func() {
		l.stopMu.Lock()
		l.retrying = false
		l.stopMu.Unlock()
	}()
	opt.Progress, opt.Force = nil, nil // whoever asked has had its answer
	delay := 100 * time.Millisecond
	for {
		t := time.NewTimer(delay)
		select {
		case <-l.done:
			t.Stop()
			return
		case <-d.life.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if d.stopIDs(d.life, []string{l.id}, opt)[0].Result != shutdown.Failed {
			return
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// interruptServer sends SIGINT to the server of t, through a handle checked
// against its creation token: the very process, never a PID reused since.
func interruptServer(t shutdown.Target) error {
	h, err := proc.OpenHandle(t.PID, t.Token)
	if err != nil {
		return err
	}
	defer h.Close()
	return h.Signal(syscall.SIGINT)
}
