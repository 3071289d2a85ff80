package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/daemon/recovery"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// adoptRunner watches pid (verified against tok), a process found alive
// after a restart: it is nobody's child we can wait for, so its status
// comes from the zombie or the pidfd where the kernel keeps it
// (watchExit), and stays unknown (Status.Unknown) elsewhere. Spawned
// processes get theirs from the reaper.
func (d *Daemon) adoptRunner(pid int, tok proc.Token) (<-chan spawn.Status, error) {
	return d.watchExit(pid, tok)
}

// reconcile brings the registry in line with the machine before the socket
// accepts anything (design §7): internal/daemon/recovery decides, through
// recoveryCore, and the stops it asks for run as the daemon's tasks.
func (d *Daemon) reconcile() api.Recovery {
	res := recovery.Reconcile(recovery.Config{Registry: d.reg, Instance: d.instance,
		StateDir: d.cfg.Paths.StateDir, Log: d.log}, recoveryCore{d})
	if len(res.Resume) > 0 {
		// The previous daemon died mid-stop: finish the job.
		d.tasks.Go("resume stop", func() { d.stopIDs(context.Background(), res.Resume, shutdown.Options{}) })
	}
	if len(res.Leftovers) > 0 {
		d.tasks.Go("stop leftovers", func() { d.stopLeftovers(res.Leftovers...) })
	}
	if len(res.Ending) > 0 {
		d.tasks.Go("end sessions", func() { d.endSessions(res.Ending, res.Reasons, 0, 0) })
	}
	sum := res.Summary
	d.log.Info("reconciled registry", "adopted", sum.Adopted, "lost", sum.Lost, "stopped", sum.Stopped,
		"sessions_ended", sum.SessionsEnded, "files_removed", sum.FilesRemoved, "took_ms", sum.DurationMS)
	d.event("daemon.recovery", "", "", fmt.Sprintf("adopted %d, lost %d, stopped %d, sessions ended %d, files removed %d in %.1f ms",
		sum.Adopted, sum.Lost, sum.Stopped, sum.SessionsEnded, sum.FilesRemoved, sum.DurationMS))
	return sum
}

// recoveryCore is the daemon as recovery.Core: the acts recovery's
// decisions need.
type recoveryCore struct{ d *Daemon }

func (c recoveryCore) Adopt(p registry.Process) (bool, error) { return c.d.adopt(p) }

func (c recoveryCore) Lose(p registry.Process, why string) {
	c.d.transition(p.ID, registry.StateLost, func(r *registry.Process) {
		r.Error = why
		t := c.d.reg.Now().UTC()
		r.ExitedAt = &t
	})
	c.d.event("process.lost", p.Session, p.ID, why)
}

func (c recoveryCore) Target(p registry.Process) shutdown.Target { return c.d.targetOf(p) }

func (c recoveryCore) WatchHost(s registry.Session) error { return c.d.watchHost(s) }

func (c recoveryCore) Event(kind, session, process, detail string) {
	c.d.event(kind, session, process, detail)
}

// adopt re-adopts a live recorded process. stopped says it was adopted only
// to be stopped: its shim died while the daemon was down. A record found
// stopping is the caller's to stop again.
func (d *Daemon) adopt(p registry.Process) (stopped bool, err error) {
	r, err := d.adoptRunner(p.PID, p.Token)
	if err != nil {
		return false, err
	}
	if p.State == registry.StateStarting {
		d.transition(p.ID, registry.StateRunning, nil)
	}
	l := &live{id: p.ID, done: make(chan struct{}), grace: time.Duration(p.GraceMS) * time.Millisecond,
		target: d.targetOf(p)}
	if p.Shared && p.State != registry.StateStopping {
		d.readoptShared(p, l)
	}
	if p.Broker && p.State != registry.StateStopping {
		d.readoptBroker(p, l)
	}
	d.mu.Lock()
	d.live[p.ID] = l
	d.mu.Unlock()
	d.tasks.Go("monitor", func() { d.monitor(l, r) })
	if p.Egress != nil && p.State != registry.StateStopping {
		d.reopenEgress(p, l)
	}
	d.event("process.adopted", p.Session, p.ID, fmt.Sprintf("pid %d", p.PID))
	d.log.Info("re-adopted", "id", p.ID, "pid", p.PID, "session", p.Session)
	if p.ShimPID > 0 && p.State != registry.StateStopping {
		return !d.watchShim(p.ID, p.ShimPID, p.ShimToken), nil
	}
	return false, nil
}

// watchShim stops process id when its shim exits: the host no longer has
// the server. It reports false when the shim is gone already (the stop has
// begun). A spawned server's shim is watched through its connection; an
// adopted one's connection died with the old daemon.
func (d *Daemon) watchShim(id string, pid int, tok proc.Token) bool {
	stop := func(why string) {
		d.log.Info(why+": stopping its server", "id", id, "shim", pid)
		p, _ := d.reg.Process(id)
		d.event("shim.gone", p.Session, id, fmt.Sprintf("shim %d", pid))
		d.stopIDs(context.Background(), []string{id}, shutdown.Options{})
	}
	if proc.Verify(pid, tok) != nil { // gone, or a zombie its host has not reaped
		d.tasks.Go("stop for a gone shim", func() { stop("shim died while the daemon was down") })
		return false
	}
	cancel, err := d.watcher.Watch(pid, tok, func() {
		if !d.isStopping() {
			d.tasks.Go("stop for a gone shim", func() { stop("shim exited") })
		}
	})
	if err != nil {
		d.tasks.Go("stop for a gone shim", func() { stop("shim died while the daemon was down") })
		return false
	}
	d.mu.Lock()
	l := d.live[id]
	d.mu.Unlock()
	if l == nil {
		cancel()
		return true
	}
	l.stopMu.Lock()
	if l.shimCancel != nil {
		l.shimCancel() // a re-attached shim replaces the old one
	}
	l.shimCancel = cancel
	l.stopMu.Unlock()
	return true
}

// stopLeftovers runs one cascade for processes that are already gone, for
// whatever they left behind, and removes their cgroups.
func (d *Daemon) stopLeftovers(ts ...shutdown.Target) {
	out := d.cascade.Stop(context.Background(), ts, shutdown.Options{Instance: d.instance, SkipProc: d.isLive})
	for i, t := range ts {
		if _, err := d.reg.Process(t.ID); err == nil && len(out[i].Procs) > 0 {
			d.log.Info("stopped what a lost process left behind", "id", t.ID, "outcome", out[i].String())
			d.recordStop(t.ID, out[i])
		}
		if t.Cgroup != "" {
			if err := cgroup.Remove(t.Cgroup); err != nil {
				d.log.Warn("remove cgroup", "err", err)
			}
		}
		if p, err := d.reg.Process(t.ID); err == nil {
			cgroup.RemoveV1(p.LimitCgroups)
		}
	}
}
