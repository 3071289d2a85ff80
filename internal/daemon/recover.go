package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/lockfile"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/session"
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
// accepts anything (design §7):
//   - a record whose process is alive with its creation token is re-adopted;
//     one that crashed between the intent record and the recorded PID is
//     found again by its marker;
//   - one that is gone, or whose PID a stranger now has, is closed as lost
//     (the stranger is never signalled), and what it left behind is
//     stopped;
//   - a server whose shim died while the daemon was down is stopped: its
//     host considers it gone;
//   - marker-bearing processes of this instance missing from the store (a
//     crash before the record, or a rebuilt store) are adopted when their
//     session's host lives and stopped when it does not;
//   - sessions are watched again, or ended when their host is gone;
//   - port lock files nobody holds are removed.
func (d *Daemon) reconcile() api.Recovery {
	began := time.Now()
	sum := api.Recovery{At: began.UTC().Format(time.RFC3339)}
	held := d.markerHolders()
	recs := d.reg.Processes(registry.Filter{})
	holders := make([][]proc.Info, len(recs))
	for i, p := range recs {
		holders[i] = held[p.ID]
		delete(held, p.ID)
	}
	// Records are settled side by side, so their commits share bbolt
	// transactions.
	// Whatever is to be stopped is collected and stopped in one cascade per
	// kind below: one snapshot of /proc serves all of them.
	var (
		mu     sync.Mutex
		lost   []shutdown.Target // leftovers of records closed as lost, and strays
		resume []string          // adopted mid-stop: the stop goes on
	)
	each(len(recs), func(i int) {
		adopted, stopped, t := d.settle(recs[i], holders[i])
		mu.Lock()
		defer mu.Unlock()
		switch {
		case adopted && recs[i].State == registry.StateStopping:
			sum.Adopted++
			sum.Stopped++
			resume = append(resume, recs[i].ID)
		case adopted:
			sum.Adopted++
			if stopped {
				sum.Stopped++
			}
		default:
			sum.Lost++
			lost = append(lost, t)
		}
	})
	for id, holders := range held {
		if t, adopted := d.adoptStray(id, holders); adopted {
			sum.Adopted++
		} else {
			sum.Stopped++
			lost = append(lost, t)
		}
	}
	if len(resume) > 0 {
		// The previous daemon died mid-stop: finish the job.
		d.tasks.Go("resume stop", func() { d.stopIDs(context.Background(), resume, shutdown.Options{}) })
	}
	if len(lost) > 0 {
		// What they left behind (escaped descendants with their marker,
		// their cgroups, holders of their hosts' pipes) is stopped all
		// the same. A stranger on a recorded PID fails the token check
		// and is never signalled.
		d.tasks.Go("stop leftovers", func() { d.stopLeftovers(lost...) })
	}
	var ending, reasons []string
	for _, s := range d.reg.Sessions(false) {
		if s.State == registry.SessionActive {
			// watchHost ends the session itself when the host is gone.
			if err := d.watchHost(s); err != nil {
				sum.SessionsEnded++
			}
			continue
		}
		ending = append(ending, s.ID)
		reasons = append(reasons, "was ending when the daemon stopped")
	}
	if len(ending) > 0 {
		sum.SessionsEnded += len(ending)
		d.tasks.Go("end sessions", func() { d.endSessions(ending, reasons, 0, 0) })
	}
	sum.FilesRemoved = d.removeStaleLocks()
	sum.DurationMS = float64(time.Since(began).Microseconds()) / 1000
	d.log.Info("reconciled registry", "adopted", sum.Adopted, "lost", sum.Lost, "stopped", sum.Stopped,
		"sessions_ended", sum.SessionsEnded, "files_removed", sum.FilesRemoved, "took", time.Since(began))
	d.event("daemon.recovery", "", "", fmt.Sprintf("adopted %d, lost %d, stopped %d, sessions ended %d, files removed %d in %.1f ms",
		sum.Adopted, sum.Lost, sum.Stopped, sum.SessionsEnded, sum.FilesRemoved, sum.DurationMS))
	return sum
}

// settle re-adopts one non-final record, or closes it as lost and returns
// the target whose leftovers are to be stopped.
func (d *Daemon) settle(p registry.Process, holders []proc.Info) (adopted, stopped bool, lost shutdown.Target) {
	if p.PID == 0 {
		// Forked, but the PID never made it to the store: the marker
		// names the process.
		if leader, ok := leaderOf(holders); ok {
			if rec, err := d.reg.Update(p.ID, func(r *registry.Process) error {
				r.PID, r.PGID, r.Token = leader.PID, leader.PGID, leader.Token
				if r.ShimPID == leader.PID && r.ShimToken.Matches(leader.Token) {
					// Its shim exec'd it in place before the running
					// record was committed: the shim is the server.
					r.ShimPID, r.ShimToken, r.InPlace = 0, proc.Token{}, true
				}
				return nil
			}); err == nil {
				p = rec
			}
		}
	}
	verr := errors.New("no pid recorded")
	if p.PID > 0 {
		verr = proc.Verify(p.PID, p.Token)
	}
	if verr == nil {
		stopped, err := d.adopt(p)
		if err == nil {
			return true, stopped, shutdown.Target{}
		}
		d.log.Warn("cannot re-adopt a live process; closing its record", "id", p.ID, "pid", p.PID, "err", err)
	}
	why := "gone while the daemon was down"
	switch {
	case errors.Is(verr, proc.ErrTokenMismatch):
		why = fmt.Sprintf("gone while the daemon was down; pid %d now belongs to another process", p.PID)
	case p.PID == 0:
		why = "the daemon stopped before the process was started"
	}
	d.transition(p.ID, registry.StateLost, func(r *registry.Process) {
		r.Error = why
		t := d.reg.Now().UTC()
		r.ExitedAt = &t
	})
	d.event("process.lost", p.Session, p.ID, why)
	return false, false, d.targetOf(p)
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

// adoptStray handles processes that carry this instance's marker for a
// process id the store does not know as live: adopted (with a record
// rebuilt from /proc) when its session's host lives; otherwise it returns
// the target to stop them by.
func (d *Daemon) adoptStray(id string, holders []proc.Info) (shutdown.Target, bool) {
	leader, _ := leaderOf(holders)
	env, _ := proc.Environ(leader.PID)
	sess, _ := proc.EnvValue(env, spawn.EnvSessionID)
	known, recErr := d.reg.Process(id)
	if recErr == nil && known.State.Final() {
		// Left behind by a process whose record is closed.
		d.log.Info("stopping processes left by a closed record", "id", id, "pids", pidsOf(holders))
		return d.targetOf(known), false
	}
	host, _ := proc.EnvValue(env, spawn.EnvHost)
	if d.hostAlive(sess, host) || strings.HasPrefix(sess, "shared-") {
		argv, _ := proc.Cmdline(leader.PID)
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", leader.PID))
		rec := registry.Process{ID: id, Session: sess, Name: baseName(first(argv)), Argv: argv, Cwd: cwd,
			Error: "rebuilt from its marker after the daemon restarted"}
		for fd := 0; fd < 3; fd++ {
			if kind, ino, err := proc.FdKindOf(leader.PID, fd); err == nil {
				rec.Stdio = append(rec.Stdio, registry.StdioInode{Fd: fd, Kind: kind, Inode: ino})
			}
		}
		if port, ok := strings.CutPrefix(sess, "shared-"); ok {
			rec.Shared = true
			rec.Port, _ = strconv.Atoi(port)
			rec.Health = "unknown"
		}
		if _, err := d.reg.AddProcess(rec); err == nil {
			p, err := d.reg.Update(id, func(r *registry.Process) error {
				r.PID, r.PGID, r.Token, r.State = leader.PID, leader.PGID, leader.Token, registry.StateRunning
				return nil
			})
			if err == nil {
				if _, err := d.adopt(p); err == nil {
					return shutdown.Target{}, true
				}
			}
		}
	}
	d.log.Info("stopping unrecorded processes with our marker", "id", id, "session", sess, "pids", pidsOf(holders))
	d.event("process.stray", sess, id, fmt.Sprintf("no live record; host gone: stopping pids %v", pidsOf(holders)))
	return shutdown.Target{ID: id, PID: leader.PID, PGID: leader.PGID, Token: leader.Token, Session: sess}, false
}

// hostAlive reports whether session sess is open with a live host: a
// session in the store, or one whose host is named by the process's
// SUPERVISOR_HOST marker (PID-TICKS) or by the session id itself
// (host-PID-TICKS), which is then reopened.
func (d *Daemon) hostAlive(sess, hostMarker string) bool {
	if s, err := d.reg.Session(sess); err == nil && s.State == registry.SessionActive {
		return proc.Verify(s.HostPID, s.HostToken) == nil
	}
	pid, ticks, ok := session.ParseHostID("host-" + hostMarker)
	if !ok {
		pid, ticks, ok = session.ParseHostID(sess)
	}
	if !ok {
		return false
	}
	tok, err := proc.TokenOf(pid)
	if err != nil || tok.StartTicks != ticks {
		return false
	}
	cmd, _ := proc.Cmdline(pid)
	_, _, err = d.reg.OpenSession(registry.Session{ID: sess, HostPID: pid, HostToken: tok, HostCommand: strings.Join(cmd, " ")})
	return err == nil
}

// markerHolders finds the processes of this uid carrying this instance's
// marker, by process id.
func (d *Daemon) markerHolders() map[string][]proc.Info {
	out := map[string][]proc.Info{}
	infos, err := proc.Scan()
	if err != nil {
		d.log.Warn("scan /proc for markers", "err", err)
		return out
	}
	uid := os.Getuid()
	for _, info := range infos {
		if info.UID != uid || info.PID == os.Getpid() || info.State == 'Z' {
			continue
		}
		env, err := proc.Environ(info.PID)
		if err != nil {
			continue
		}
		if inst, _ := proc.EnvValue(env, spawn.EnvInstance); inst != d.instance {
			continue
		}
		if w, _ := proc.EnvValue(env, spawn.EnvLogWriter); w == "1" {
			continue // a log writer is never the server, and ends by itself
		}
		if id, ok := proc.EnvValue(env, spawn.EnvProcID); ok && id != "" {
			out[id] = append(out[id], info)
		}
	}
	return out
}

// leaderOf picks the server among the holders of one marker: the oldest
// (its descendants started after it).
func leaderOf(holders []proc.Info) (proc.Info, bool) {
	if len(holders) == 0 {
		return proc.Info{}, false
	}
	best := holders[0]
	for _, h := range holders[1:] {
		if h.Token.StartTicks < best.Token.StartTicks {
			best = h
		}
	}
	return best, true
}

func pidsOf(infos []proc.Info) []int {
	out := make([]int, len(infos))
	for i, p := range infos {
		out[i] = p.PID
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// removeStaleLocks removes port lock files nobody holds. Only this daemon
// takes them, and it holds the singleton lock, so an unheld one is stale:
// removing it cannot race a taker.
func (d *Daemon) removeStaleLocks() int {
	paths, _ := filepath.Glob(filepath.Join(d.cfg.Paths.StateDir, "ports", "*.lock"))
	removed := 0
	for _, path := range paths {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if lockfile.TryLock(f) == nil {
			if os.Remove(path) == nil {
				removed++
				d.log.Info("removed stale port lock", "path", path)
			}
		}
		f.Close()
	}
	return removed
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
