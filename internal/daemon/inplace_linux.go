package daemon

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/spawn"
)

// A server exec'd in its shim's place.
//
// A shim that only waits costs a Go process per server: ~2 MiB of private
// memory and 5-6 thread ids for the server's life. Where the kernel keeps a
// process's exit status on its pidfd after its parent reaped it
// (PIDFD_INFO_EXIT, 6.15), the shim need not stay: it hands the daemon a
// pidfd of itself with its stdio, the daemon records it, moves it into the
// server's cgroup and answers with the server's command and markers, and
// the shim execs the server. The host's child is then the server itself:
// the host's signals reach it as in a direct spawn, and the host reaps its
// real status. The daemon watches the pidfd and reads the status from the
// zombie or, once reaped, from the pidfd (session.Watcher.WatchStatus), so
// breakers, events and `ps` see what they see for a spawned server.
//
// What the daemon gives up: the server is not its child, so escaped
// descendants are re-parented to the host's subreaper or init instead of
// the daemon; markers and the cgroup still find them. Where the shim cannot
// be moved into the cgroup (the kernel allows it only to whoever may write
// the closest cgroup the two share) the daemon spawns the server itself,
// as it does where the kernel lacks the exit status or a terminal is on
// the shim's stdio (the shim does not offer then).

// inPlaceUnsupported says why servers cannot be exec'd in their shim's
// place here, or "".
func inPlaceUnsupported() string {
	if !proc.ExitInfoSupported() {
		return "the kernel keeps no exit status on pidfds (PIDFD_INFO_EXIT needs Linux 6.15)"
	}
	return ""
}

// shimHandle checks the pidfd a shim offered with an in-place run: it must
// be the shim's own, alive, with the shim's creation token.
func shimHandle(fd int, req api.RunRequest) (*proc.Handle, proc.Token, error) {
	return proc.HandleFromFd(fd, req.ShimPID, req.ShimToken)
}

// execInPlace hands run r to its shim to exec. It returns nil, having
// changed nothing, when the shim cannot enter the server's cgroup: the
// caller spawns the server itself then. Otherwise the process is the
// daemon's to watch from here, and the caller ends with execLine.
func (d *Daemon) execInPlace(conn *api.Conn, r inPlaceRun) *live {
	pid := r.req.ShimPID
	if r.cg.Fd > 0 && !d.enterServerCgroup(r) {
		return nil
	}
	path, _ := spawn.Resolve(r.launch.argv[0], spawn.PathOf(r.launch.env), string(r.req.Cwd))
	setRunning := func(p *registry.Process) {
		p.PID, p.PGID, p.Token, p.Path = pid, pid, r.tok, path
		p.ShimPID, p.ShimToken, p.InPlace = 0, proc.Token{}, true
		if p.State == registry.StateStarting {
			p.State = registry.StateRunning
		}
	}
	// The process is watched as the server from here: its record as it
	// will be committed below gives the stop target.
	rec, err := d.reg.Process(r.id)
	if err != nil {
		r.log.Error("read the intent record", "id", r.id, "err", err)
		rec = registry.Process{ID: r.id, Session: r.req.Session, Name: r.name, Argv: r.req.Argv, Cwd: string(r.req.Cwd), Cgroup: r.cg.Path}
	}
	setRunning(&rec)
	l := d.addInPlaceLive(r, rec)
	d.watchInPlace(r, l)
	d.sendExecAndRecord(conn, r, setRunning)
	if r.stderr != nil {
		r.stderr.Close()
	}
	r.log.Info("started in its shim's place", "id", r.id, "pid", pid, "argv", r.req.Argv)
	return l
}

// enterServerCgroup moves r's shim into the server's cgroup, and its
// cgroup v1 limits, before its exec. It returns false when the shim cannot
// enter, having moved it back where it was when it had entered.
func (d *Daemon) enterServerCgroup(r inPlaceRun) bool {
	pid := r.req.ShimPID
	// Where it is now, where something can fail after the move (its
	// cgroup v1 limits): a shim that entered but cannot go on goes
	// back, or it would hold the server's cgroup (and be in its
	// stop's reach) as the shim that stays. Read only then: it is
	// a /proc read on every start.
	var home string
	herr := errors.New("its cgroup was not read")
	if len(r.limited.V1) > 0 || faultAfterEnter {
		home, herr = d.cgroups.Of(pid)
	}
	entered := false
	err := enterFault()
	if err == nil {
		err = r.cg.Enter(pid)
		entered = err == nil
	}
	if entered {
		err = enteredFault()
	}
	if err == nil && len(r.limited.V1) > 0 {
		if err = cgroup.EnterV1(r.limited.V1, pid); err == nil {
			err = cgroup.Apply(r.limited)
		}
	}
	if err != nil {
		r.log.Info("shim cannot enter the server's cgroup: spawning the server instead", "id", r.id, "err", err)
		if entered {
			if herr == nil {
				herr = cgroup.MoveTo(home, pid)
			}
			if herr != nil {
				r.log.Warn("the shim stays in the server's cgroup", "id", r.id, "err", herr)
			}
		}
		return false
	}
	return true
}

// addInPlaceLive makes the live process of in-place run r, whose record
// as it will be committed is rec, with the timer that tells its breaker
// it outlived its start period, and adds it to the daemon's.
func (d *Daemon) addInPlaceLive(r inPlaceRun, rec registry.Process) *live {
	startPeriod := d.settings().Breaker.StartPeriod
	l := &live{id: r.id, done: make(chan struct{}), grace: time.Duration(r.req.GraceMS) * time.Millisecond,
		target: d.targetOf(rec), started: time.Now(), execDone: make(chan struct{}),
		breaker: breakerRef{key: r.bkey, argv: r.req.Argv, cwd: string(r.req.Cwd), name: r.name, startPeriod: startPeriod}}
	id, bkey, argv, cwd, name := r.id, r.bkey, r.req.Argv, string(r.req.Cwd), r.name // not r: its env holds the host's secrets
	l.startTimer = time.AfterFunc(startPeriod, func() {
		if d.isLive(id) {
			d.breakers.result(bkey, argv, cwd, name, "")
		}
	})
	d.mu.Lock()
	d.live[r.id] = l
	d.mu.Unlock()
	return l
}

// watchInPlace has l's monitor run when r's shim, or the server it
// becomes, exits.
func (d *Daemon) watchInPlace(r inPlaceRun, l *live) {
	pid := r.req.ShimPID
	// The monitor runs once the process has exited, on the watch's own
	// goroutine: no goroutine (and its stack) waits for each server. It
	// records the end only after execLine, so after the commit of the
	// running record (sendExecAndRecord).
	finish := func(st spawn.Status) {
		ch := make(chan spawn.Status, 1)
		ch <- st
		d.monitor(l, ch)
	}
	if err := d.onExit(pid, r.tok, finish); err != nil {
		// The shim died before we watched it: it never exec'd.
		r.log.Info("shim gone before its exec", "id", r.id, "err", err)
		d.tasks.Go("monitor", func() { finish(spawn.Status{PID: pid, Unknown: true}) })
	}
}

// sendExecAndRecord sends r's shim the command to exec and commits the
// running record, setRunning, with its start event.
func (d *Daemon) sendExecAndRecord(conn *api.Conn, r inPlaceRun, setRunning func(*registry.Process)) {
	// The exec goes out before the running record's commit, which only
	// adds the PID to the durable intent: the shim's exec and the fsync
	// overlap. A crash between the two leaves the intent, whose markers
	// the next daemon finds the server by (run.exec, recovery_test.go).
	sent := false
	send := func() {
		sent = true
		ex := api.Exec{ID: r.id, Argv: r.launch.argv, Cwd: r.req.Cwd, Env: r.launch.env, Session: r.req.Session,
			Instance: d.instance, Host: r.host, LogStderr: r.stderr != nil, Sandbox: r.launch.sandbox}
		var fds []int
		if r.stderr != nil {
			fds = append(fds, int(r.stderr.Fd()))
		}
		if err := conn.Send(api.TypeExec, &ex, fds...); err != nil {
			r.log.Info("shim gone before its exec", "id", r.id, "err", err)
		}
		fault("run.exec")
	}
	startEvent := registry.Logged{Kind: "process.start", Detail: fmt.Sprintf("pid %d %q (exec'd in its shim's place)%s", r.req.ShimPID, r.req.Argv, r.launch.note)}
	if _, err := d.reg.UpdateLoggedAfter(r.id, send, startEvent, func(p *registry.Process) error {
		setRunning(p)
		return nil
	}); err != nil {
		r.log.Error("record running process", "id", r.id, "err", err)
		if !sent {
			send()
		}
		d.event(startEvent.Kind, r.req.Session, r.id, startEvent.Detail)
	}
}

// execLine waits on an in-place run's connection until it closes, which
// it does with the exec (it is close-on-exec) or the shim's exit. Before
// that the shim may say why its exec failed; the monitor waits for this
// to end before it records how the process ended.
func (d *Daemon) execLine(conn *api.Conn, l *live, log hclog.Logger) {
	defer close(l.execDone)
	defer func() {
		l.stopMu.Lock()
		why := l.execErr
		l.stopMu.Unlock()
		if why != "" {
			d.metrics.Spawn(errors.New(why))
		} else {
			d.metrics.Spawn(nil)
		}
	}()
	for {
		m, fds, err := conn.Recv()
		api.CloseFds(fds)
		if err != nil {
			return
		}
		if m.Type != api.TypeExecFailed {
			d.refuse(conn, log, fmt.Errorf("%w: %q on an exec connection", api.ErrMalformed, m.Type))
			return
		}
		var f api.ExecFailed
		if api.Decode(m, &f) == nil {
			l.stopMu.Lock()
			l.execErr = f.Message
			l.stopMu.Unlock()
		}
	}
}

// watchExit watches pid (verified against tok), a process that is not our
// child: its status is read from the zombie or, once its parent reaped it,
// from its pidfd; Unknown where neither can be had.
func (d *Daemon) watchExit(pid int, tok proc.Token) (<-chan spawn.Status, error) {
	ch := make(chan spawn.Status, 1)
	if err := d.onExit(pid, tok, func(st spawn.Status) { ch <- st }); err != nil {
		return nil, err
	}
	return ch, nil
}

// onExit calls then with pid's status once it has exited (watchExit), on
// a goroutine of its own.
func (d *Daemon) onExit(pid int, tok proc.Token, then func(spawn.Status)) error {
	_, err := d.watcher.WatchStatus(pid, tok, func(ws syscall.WaitStatus, known bool) {
		st := spawn.Status{PID: pid, Unknown: !known}
		if known {
			st.Code = ws.ExitStatus()
			if ws.Signaled() {
				st.Signal = ws.Signal()
			}
		}
		then(st)
	})
	return err
}
