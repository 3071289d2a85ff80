// Package recovery brings a daemon's registry in line with the machine when
// the daemon starts (design §7). It decides, for every record left by the
// daemon before, and for every process carrying this instance's marker,
// whether it is re-adopted, closed as lost, or stopped; it re-opens the
// sessions of live hosts and removes port lock files nobody holds.
//
// It decides; the daemon acts. Adopting a process (watching its exit,
// supervising it again), closing a record and watching a host go through
// Core, and what is to be stopped comes back in the Result for the daemon
// to stop in its own tasks: recovery holds no process and starts no
// goroutine that outlives Reconcile.
package recovery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/lockfile"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/session"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// Core is what recovery asks of the daemon: the acts its decisions need.
type Core interface {
	// Adopt supervises a live recorded process again (its exit watched,
	// its shared server or broker taken back, its shim watched). stopped
	// says it was adopted only to be stopped: its shim died while the
	// daemon was down, and the stop has begun. A record found stopping is
	// the caller's to stop again (Result.Resume).
	Adopt(p registry.Process) (stopped bool, err error)
	// Lose closes p's record as lost, saying why.
	Lose(p registry.Process, why string)
	// Target is what stopping p acts on: its process, group, cgroup and
	// the host pipes it held.
	Target(p registry.Process) shutdown.Target
	// WatchHost ends session s when its host exits. An error says the host
	// is gone (the session is being ended) or cannot be watched.
	WatchHost(s registry.Session) error
	// Event records what recovery did, for `supervisor events`.
	Event(kind, session, process, detail string)
}

// Config is what Reconcile reads.
type Config struct {
	Registry *registry.Registry
	// Instance is the SUPERVISOR_INSTANCE marker of this state directory:
	// only processes carrying it are this daemon's.
	Instance string
	// StateDir holds the port lock files (ports/*.lock).
	StateDir string
	Log      hclog.Logger
}

// Result is what Reconcile found, and what is left for the daemon to do.
type Result struct {
	Summary api.Recovery
	// Resume names the processes adopted mid-stop: the previous daemon
	// died stopping them, and the stop goes on.
	Resume []string
	// Leftovers are the targets of records closed as lost and of strays
	// whose host is gone: whatever they left behind (escaped descendants
	// with their marker, their cgroups, holders of their hosts' pipes) is
	// stopped all the same. A stranger on a recorded PID fails the token
	// check and is never signalled.
	Leftovers []shutdown.Target
	// Ending names the sessions that were ending when the daemon stopped,
	// with Reasons beside them: their end goes on.
	Ending, Reasons []string
}

// Reconcile settles every record and marker holder; it returns before any
// stop it asks for has begun:
//   - a record whose process is alive with its creation token is
//     re-adopted; one that crashed between the intent record and the
//     recorded PID is found again by its marker;
//   - one that is gone, or whose PID a stranger now has, is closed as lost
//     (the stranger is never signalled), and what it left behind is
//     stopped;
//   - a server whose shim died while the daemon was down is stopped: its
//     host considers it gone (Core.Adopt);
//   - marker-bearing processes of this instance missing from the store (a
//     crash before the record, or a rebuilt store) are adopted when their
//     session's host lives and stopped when it does not;
//   - sessions are watched again, or ended when their host is gone;
//   - port lock files nobody holds are removed.
func Reconcile(cfg Config, core Core) Result {
	r := &reconciler{cfg: cfg, core: core, log: cfg.Log}
	if r.log == nil {
		r.log = hclog.NewNullLogger()
	}
	began := time.Now()
	res := Result{Summary: api.Recovery{At: began.UTC().Format(time.RFC3339)}}
	sum := &res.Summary
	held := r.markerHolders()
	recs := cfg.Registry.Processes(registry.Filter{})
	holders := make([][]proc.Info, len(recs))
	for i, p := range recs {
		holders[i] = held[p.ID]
		delete(held, p.ID)
	}
	// Records are settled side by side, so their commits share bbolt
	// transactions. What is to be stopped is gathered and stopped by the
	// daemon in one cascade per kind: one snapshot of /proc serves all.
	var mu sync.Mutex
	registry.Each(len(recs), func(i int) {
		adopted, stopped, t := r.settle(recs[i], holders[i])
		mu.Lock()
		defer mu.Unlock()
		switch {
		case adopted && recs[i].State == registry.StateStopping:
			sum.Adopted++
			sum.Stopped++
			res.Resume = append(res.Resume, recs[i].ID)
		case adopted:
			sum.Adopted++
			if stopped {
				sum.Stopped++
			}
		default:
			sum.Lost++
			res.Leftovers = append(res.Leftovers, t)
		}
	})
	for id, holders := range held {
		if t, adopted := r.adoptStray(id, holders); adopted {
			sum.Adopted++
		} else {
			sum.Stopped++
			res.Leftovers = append(res.Leftovers, t)
		}
	}
	for _, s := range cfg.Registry.Sessions(false) {
		if s.State == registry.SessionActive {
			// WatchHost ends the session itself when the host is gone.
			if err := core.WatchHost(s); err != nil {
				sum.SessionsEnded++
			}
			continue
		}
		res.Ending = append(res.Ending, s.ID)
		res.Reasons = append(res.Reasons, "was ending when the daemon stopped")
	}
	sum.SessionsEnded += len(res.Ending)
	sum.FilesRemoved = r.removeStaleLocks()
	sum.DurationMS = float64(time.Since(began).Microseconds()) / 1000
	return res
}

type reconciler struct {
	cfg  Config
	core Core
	log  hclog.Logger
}

// settle re-adopts one non-final record, or closes it as lost and returns
// the target whose leftovers are to be stopped.
func (r *reconciler) settle(p registry.Process, holders []proc.Info) (adopted, stopped bool, lost shutdown.Target) {
	if p.PID == 0 {
		// Forked, but the PID never made it to the store: the marker
		// names the process.
		if leader, ok := leaderOf(holders); ok {
			rec, err := r.cfg.Registry.Update(p.ID, func(rec *registry.Process) error {
				rec.PID, rec.PGID, rec.Token = leader.PID, leader.PGID, leader.Token
				if rec.ShimPID == leader.PID && rec.ShimToken.Matches(leader.Token) {
					// Its shim exec'd it in place before the running
					// record was committed: the shim is the server.
					rec.ShimPID, rec.ShimToken, rec.InPlace = 0, proc.Token{}, true
				}
				return nil
			})
			if err == nil {
				p = rec
			} else {
				r.log.Warn("cannot record the pid its marker names", "id", p.ID, "pid", leader.PID, "err", err)
			}
		}
	}
	verr := errors.New("no pid recorded")
	if p.PID > 0 {
		verr = proc.Verify(p.PID, p.Token)
	}
	if verr == nil {
		stopped, err := r.core.Adopt(p)
		if err == nil {
			return true, stopped, shutdown.Target{}
		}
		r.log.Warn("cannot re-adopt a live process; closing its record", "id", p.ID, "pid", p.PID, "err", err)
	}
	why := "gone while the daemon was down"
	switch {
	case errors.Is(verr, proc.ErrTokenMismatch):
		why = fmt.Sprintf("gone while the daemon was down; pid %d now belongs to another process", p.PID)
	case p.PID == 0:
		why = "the daemon stopped before the process was started"
	}
	r.core.Lose(p, why)
	return false, false, r.core.Target(p)
}

// adoptStray handles processes that carry this instance's marker for a
// process id the store does not know as live: adopted (with a record
// rebuilt from /proc) when its session's host lives; otherwise it returns
// the target to stop them by.
func (r *reconciler) adoptStray(id string, holders []proc.Info) (shutdown.Target, bool) {
	leader, _ := leaderOf(holders)
	env, _ := proc.Environ(leader.PID)
	sess, _ := proc.EnvValue(env, spawn.EnvSessionID)
	known, recErr := r.cfg.Registry.Process(id)
	if recErr == nil && known.State.Final() {
		// Left behind by a process whose record is closed.
		r.log.Info("stopping processes left by a closed record", "id", id, "pids", pidsOf(holders))
		return r.core.Target(known), false
	}
	host, _ := proc.EnvValue(env, spawn.EnvHost)
	if r.hostAlive(sess, host) || strings.HasPrefix(sess, "shared-") {
		err := r.rebuild(id, sess, leader)
		if err == nil {
			return shutdown.Target{}, true
		}
		r.log.Warn("cannot adopt an unrecorded process with our marker; stopping it", "id", id, "pid", leader.PID, "err", err)
	}
	r.log.Info("stopping unrecorded processes with our marker", "id", id, "session", sess, "pids", pidsOf(holders))
	r.core.Event("process.stray", sess, id, fmt.Sprintf("no live record; host gone: stopping pids %v", pidsOf(holders)))
	return shutdown.Target{ID: id, PID: leader.PID, PGID: leader.PGID, Token: leader.Token, Session: sess}, false
}

// rebuild records the stray whose leader is leader from what /proc says of
// it, and adopts it.
func (r *reconciler) rebuild(id, sess string, leader proc.Info) error {
	argv, _ := proc.Cmdline(leader.PID)
	cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", leader.PID))
	name := ""
	if len(argv) > 0 {
		name = argv[0][strings.LastIndexByte(argv[0], '/')+1:]
	}
	rec := registry.Process{ID: id, Session: sess, Name: name, Argv: argv, Cwd: cwd,
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
	if _, err := r.cfg.Registry.AddProcess(rec); err != nil {
		return fmt.Errorf("record it: %w", err)
	}
	p, err := r.cfg.Registry.Update(id, func(rec *registry.Process) error {
		rec.PID, rec.PGID, rec.Token, rec.State = leader.PID, leader.PGID, leader.Token, registry.StateRunning
		return nil
	})
	if err != nil {
		return fmt.Errorf("record its pid: %w", err)
	}
	if _, err := r.core.Adopt(p); err != nil {
		return fmt.Errorf("adopt it: %w", err)
	}
	return nil
}

// hostAlive reports whether session sess is open with a live host: a
// session in the store, or one whose host is named by the process's
// SUPERVISOR_HOST marker (PID-TICKS) or by the session id itself
// (host-PID-TICKS), which is then reopened.
func (r *reconciler) hostAlive(sess, hostMarker string) bool {
	reg := r.cfg.Registry
	if s, err := reg.Session(sess); err == nil && s.State == registry.SessionActive {
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
	_, _, err = reg.OpenSession(registry.Session{ID: sess, HostPID: pid, HostToken: tok, HostCommand: strings.Join(cmd, " ")})
	return err == nil
}

// markerHolders finds the processes of this uid carrying this instance's
// marker, by process id.
func (r *reconciler) markerHolders() map[string][]proc.Info {
	out := map[string][]proc.Info{}
	infos, err := proc.Scan()
	if err != nil {
		r.log.Warn("scan /proc for markers", "err", err)
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
		if inst, _ := proc.EnvValue(env, spawn.EnvInstance); inst != r.cfg.Instance {
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

// removeStaleLocks removes port lock files nobody holds. Only the daemon
// takes them, and it holds the singleton lock, so an unheld one is stale:
// removing it cannot race a taker.
func (r *reconciler) removeStaleLocks() int {
	paths, _ := filepath.Glob(filepath.Join(r.cfg.StateDir, "ports", "*.lock"))
	removed := 0
	for _, path := range paths {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if lockfile.TryLock(f) == nil {
			if os.Remove(path) == nil {
				removed++
				r.log.Info("removed stale port lock", "path", path)
			}
		}
		f.Close()
	}
	return removed
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
