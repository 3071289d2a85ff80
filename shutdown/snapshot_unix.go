//go:build unix

package shutdown

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

type member struct {
	pid    int
	tok    proc.Token
	h      *proc.Handle // nil once exited
	target int          // index into targets
	role   Role
	result Result         // the phase in which it exited
	sent   syscall.Signal // the last signal sent to it
	comm   string         // its name at the snapshot
	gone   time.Time      // when its exit was seen
}

type run struct {
	state

	members map[int]*member
	leaders []bool       // per target: its leader was ours at the snapshot
	spared  [][]int      // per target: kept for SUPERVISOR_KEEP=1
	kept    map[int]bool // every spared pid, so it is logged once
	// unproven are per target the holders of its host channel whose
	// descent from it cannot be proven: never signalled, reported.
	unproven [][]int
	doubted  map[int]bool // every unproven pid, so it is logged once
	events   []*os.File   // per target: its cgroup.events, if any
	poke     *waker       // woken when a target is forced

	// sparedPIDs are the targets' Spared by PID: candidate asks of every
	// process, and a loop over every target's made a stop of thousands of
	// servers quadratic.
	sparedPIDs map[int][]proc.Token

	checked bool // leaders looked at
	scanned bool // the snapshot (first collect) is done
	uid     int
	// born, when set, is the start of the oldest target leader: see
	// markerCutoff.
	born proc.Token
}

func newRun(c *Cascade, targets []Target, opt Options, log hclog.Logger) *run {
	r := &run{members: map[int]*member{},
		leaders: make([]bool, len(targets)), spared: make([][]int, len(targets)),
		unproven: make([][]int, len(targets)), doubted: map[int]bool{},
		kept: map[int]bool{}, events: make([]*os.File, len(targets)), uid: os.Getuid()}
	r.state.init(c, targets, opt, log, os.Getpid())
	r.born = markerCutoff(targets, opt)
	r.sparedPIDs = map[int][]proc.Token{}
	for _, t := range targets {
		for _, sp := range t.Spared {
			r.sparedPIDs[sp.PID] = append(r.sparedPIDs[sp.PID], sp.Token)
		}
	}
	if w, err := newWaker(); err == nil {
		r.poke = w
	}
	for i, t := range targets {
		if t.Cgroup != "" {
			if f, err := cgroup.Events(t.Cgroup); err == nil {
				r.events[i] = f
			}
		}
	}
	return r
}

// collect adds every process that belongs to a target's tree and is not a
// member yet, and returns how many it added. The first call is the
// snapshot taken before any signal; later calls find what was forked since.
func (r *run) collect() int {
	infos, err := r.scan()
	if err != nil {
		// Out of fds, or /proc unreadable: the tree cannot be known, and
		// the first snapshot failing fails the stop (the caller retries);
		// a later rescan failing only misses what forked meanwhile.
		r.log.Warn("scan processes", "err", err)
		r.fail(fmt.Errorf("scan processes: %w", err))
		return 0
	}
	byPID := make(map[int]proc.Info, len(infos))
	children := map[int][]int{}
	for _, info := range infos {
		byPID[info.PID] = info
		children[info.PPID] = append(children[info.PPID], info.PID)
	}
	added := 0

	if !r.checked {
		r.checked = true
		for i, t := range r.targets {
			info, ok := byPID[t.PID]
			if !ok || !t.Token.Matches(info.Token) {
				continue // gone, or the pid is someone else's now
			}
			// The scan's token has no pidfs inode: check the recorded one
			// (inode included) through a pidfd, or a PID recycled within
			// one clock tick would pass for the leader.
			h, err := proc.OpenHandle(t.PID, t.Token)
			if err != nil {
				if !gone(err) {
					r.fail(fmt.Errorf("open a handle on process %d: %w", t.PID, err))
				}
				continue
			}
			h.Close()
			// A zombie leader still holds its group number, so the group
			// is ours; a live one is a member itself even if it left it.
			r.leaders[i] = true
			info.Token = t.Token
			if r.add(i, info, RoleLeader) {
				added++
			}
		}
	}

	// The process group. A group whose leader is gone could be a recycled
	// number: act on it only when the leader was ours at the snapshot or
	// the member carries our marker.
	// Only a group the target leads (PGID == PID: spawned with Setpgid) is
	// its own. A process that merely sits in someone else's group (an
	// adopted listener started from a shell) must not take that group —
	// the shell, its terminal's other jobs — down with it.
	groupOf := map[int]int{}
	for i, t := range r.targets {
		if _, dup := groupOf[t.PGID]; t.PGID > 1 && t.PGID == t.PID && !dup {
			groupOf[t.PGID] = i
		}
	}
	// Whether each group is still the target's: see groupIsOurs.
	ours := make([]bool, len(r.targets))
	for i := range r.targets {
		ours[i] = r.groupIsOurs(i, byPID)
	}
	for _, info := range infos {
		i, ok := groupOf[info.PGID]
		if !ok || r.members[info.PID] != nil {
			continue
		}
		if !ours[i] && !r.hasMarker(info.PID, envProcID, r.targets[i].ID) {
			continue
		}
		if r.add(i, info, RoleGroup) {
			added++
		}
	}
	r.scanned = true

	// The cgroup: nothing in it escaped.
	for i, t := range r.targets {
		if t.Cgroup == "" {
			continue
		}
		pids, _ := cgroup.Procs(t.Cgroup)
		for _, pid := range pids {
			info, ok := byPID[pid]
			if !ok || r.members[pid] != nil {
				continue
			}
			// Everything in a fresh per-server cgroup is ours; only the
			// leader cannot ask to be kept.
			if env, err := proc.Environ(pid); err == nil && pid != t.PID && r.keep(i, pid, env) {
				continue
			}
			if r.add(i, info, RoleCgroup) {
				added++
			}
		}
	}

	// Markers: escaped descendants prove themselves ours by environment.
	// Reading every environment is most of a stop's cost on a crowded
	// machine; one older than every leader cannot be a descendant's.
	for _, info := range infos {
		if r.members[info.PID] != nil || !r.candidate(info) || olderThan(info.Token, r.born) ||
			r.opt.OtherServer != nil && r.opt.OtherServer(info.PID, info.Token) {
			continue
		}
		env, err := proc.Environ(info.PID)
		if err != nil {
			continue
		}
		i, ok := r.markerTarget(env)
		if !ok || r.keep(i, info.PID, env) {
			continue
		}
		if r.add(i, info, RoleMarker) {
			added++
		}
	}

	// Descendants by PPID of every member, transitively: a setsid child
	// with its environment cleared is still found while its parent lives.
	queue := make([]*member, 0, len(r.members))
	for _, m := range r.members {
		if m.role != RoleHolder {
			queue = append(queue, m)
		}
	}
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		for _, child := range children[m.pid] {
			info := byPID[child]
			if r.members[child] != nil || !r.candidate(info) {
				continue
			}
			if env, err := proc.Environ(child); err == nil && r.keep(m.target, child, env) {
				continue
			}
			if r.add(m.target, info, RoleTree) {
				added++
				queue = append(queue, r.members[child])
			}
		}
	}

	added += r.collectHolders(infos)
	return added
}

// markerCutoff is the start of the oldest target leader when only
// targets' own process markers can claim a process, which then must
// descend from a leader and started no earlier (a child's start time is
// never before its parent's; a log writer, started just before its
// server, carries the markers but is never claimed by them). A whole
// session's stop also claims by the session marker, which servers of the
// session that ended earlier passed on to processes older than any target
// now: no cutoff then, nor for a target whose id earlier runs carried, nor
// when a leader's token is unknown or of another boot.
func markerCutoff(targets []Target, opt Options) proc.Token {
	// Only Linux counts start times from boot; macOS's are wall-clock
	// times, which a clock set back makes a child's earlier than its
	// parent's.
	if runtime.GOOS != "linux" || opt.WholeSession || len(targets) == 0 {
		return proc.Token{}
	}
	born := targets[0].Token
	for _, t := range targets {
		if t.Token.IsZero() || t.Token.BootID != born.BootID || t.RunsBefore {
			return proc.Token{}
		}
		if t.Token.StartTicks < born.StartTicks {
			born = t.Token
		}
	}
	return born
}

// olderThan reports whether tok started before born, on the same boot.
func olderThan(tok, born proc.Token) bool {
	return !born.IsZero() && tok.BootID == born.BootID && tok.StartTicks < born.StartTicks
}

// groupIsOurs says whether the number t.PGID still names the group the
// target's leader created. At the snapshot: when the leader was ours, or —
// the leader exited just now (its leftovers are being stopped) — when no
// live process has PID PGID: members of the old group hold the number, so
// it cannot have been reused under them. A leader that is simply gone (a
// record from before a daemon crash) proves nothing: the group may have
// emptied and its number gone to a stranger's group since. Later scans:
// only while a member found through the group (or the leader) is still
// alive, so a group that emptied and was recycled during the cascade is
// not swept.
func (r *run) groupIsOurs(i int, byPID map[int]proc.Info) bool {
	t := r.targets[i]
	if !r.scanned {
		if r.leaders[i] {
			return true
		}
		if !t.LeaderJustExited {
			return false
		}
		_, taken := byPID[t.PGID]
		return !taken
	}
	for _, m := range r.members {
		if m.target == i && m.h != nil && (m.role == RoleGroup || m.role == RoleLeader) {
			return true
		}
	}
	return false
}

// collectHolders finds processes outside the tree that hold the server's
// end of a host stdio channel (for a pipe its write end, fd 1 of the
// server; for a socket any fd on the server-side inode): they keep the
// host from seeing EOF. Holding the channel proves nothing, nor does a
// start time: a wrapper shell's later commands share the host's pipe too.
// A holder is added only when its descent is proven: an orphan the
// subreaper (Cascade.Reaper) adopted descends from a server the subreaper
// started (only its own children, which carry markers, are not orphans),
// and holding this server's channel names which; a process
// spared for SUPERVISOR_KEEP=1 carries the server's markers. Markers, the
// cgroup and the tree prove the others before this runs. Every other
// holder is reported (Outcome.Unproven) and never signalled.
func (r *run) collectHolders(infos []proc.Info) int {
	type want struct {
		target int
		pipe   bool
	}
	wanted := map[uint64]want{}
	inodes := map[uint64]bool{}
	for i, t := range r.targets {
		for _, ch := range t.Stdio {
			// stdout is what the host reads to EOF (a socketpair serves
			// stdin and stdout on one inode). stderr is left out: hosts
			// often hand every child their own stderr, and its other
			// holders are none of this server's business.
			switch {
			case ch.Kind == "socket" && ch.Fd <= 1:
				wanted[ch.Inode] = want{target: i}
			case ch.Kind == "pipe" && ch.Fd == 1:
				wanted[ch.Inode] = want{target: i, pipe: true}
			default:
				continue
			}
			inodes[ch.Inode] = true
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	// A process older than every server cannot descend from one: a start
	// time can rule a process out (never in), and sparing their fds a read
	// keeps a stop cheap on a crowded machine.
	var since uint64
	for _, t := range r.targets {
		if !t.Token.IsZero() && (since == 0 || t.Token.StartTicks < since) {
			since = t.Token.StartTicks
		}
	}
	var pids []int
	byPID := map[int]proc.Info{}
	for _, info := range infos {
		if r.members[info.PID] == nil && r.candidate(info) && since > 0 && info.Token.StartTicks >= since {
			pids = append(pids, info.PID)
			byPID[info.PID] = info
		}
	}
	added := 0
	for _, ref := range proc.FdHolders(pids, inodes) {
		w := wanted[ref.Inode]
		if w.pipe && ref.Access == unix.O_RDONLY {
			continue // a reader of the host's pipe does not keep EOF away
		}
		info := byPID[ref.PID]
		// A kept process carries the server's markers: proven, and not
		// spared while it holds the host's channel (the host would hang).
		proven := r.kept[ref.PID] || r.adopted(info)
		if !proven || r.members[ref.PID] != nil {
			if r.members[ref.PID] == nil && !r.doubted[ref.PID] {
				r.doubted[ref.PID] = true
				r.unproven[w.target] = append(r.unproven[w.target], ref.PID)
				r.log.Warn("a process holds the server's stdout but is not proven the server's (no marker, not in its cgroup or tree): not signalled; the host sees EOF when it exits",
					"pid", ref.PID, "command", info.Comm, "target", r.targets[w.target].ID)
			}
			continue
		}
		if r.add(w.target, info, RoleHolder) {
			added++
			if r.kept[ref.PID] {
				r.log.Info("not sparing a kept process: it holds a host stdio channel", "pid", ref.PID)
				r.unspare(ref.PID)
			}
		}
	}
	return added
}

// adopted reports an orphan the subreaper took in from a server's tree:
// its parent is the subreaper, and it is none of the subreaper's own
// children, which all carry markers (servers, brokers, the log hub), nor
// a process already judged unproven (its children re-parent to the
// subreaper once it is killed, which proves nothing of them).
func (r *run) adopted(info proc.Info) bool {
	if r.c.Reaper <= 0 || info.PPID != r.c.Reaper || r.doubted[info.PID] {
		return false
	}
	env, err := proc.Environ(info.PID)
	if err != nil {
		return false
	}
	for _, key := range []string{envProcID, envSessionID, envLogWriter} {
		if _, ok := proc.EnvValue(env, key); ok {
			return false
		}
	}
	return true
}

// candidate says whether a process may be signalled at all.
func (r *run) candidate(info proc.Info) bool {
	if info.PID <= 1 || info.PID == r.self || info.UID != r.uid || info.State == 'Z' || info.State == 'X' {
		return false
	}
	for _, p := range r.c.Excluded {
		if p == info.PID {
			return false
		}
	}
	for _, tok := range r.sparedPIDs[info.PID] {
		if tok.Matches(info.Token) {
			return false
		}
	}
	return true
}

// add makes info a member of target i, through a pidfd verified against its
// token. It reports whether it added one.
func (r *run) add(i int, info proc.Info, role Role) bool {
	if r.members[info.PID] != nil || !r.candidate(info) {
		return false
	}
	h, err := proc.OpenHandle(info.PID, info.Token)
	if err != nil {
		if !gone(err) {
			r.fail(fmt.Errorf("open a handle on process %d: %w", info.PID, err))
		}
		return false // exited (or recycled) between scan and open
	}
	r.members[info.PID] = &member{pid: info.PID, tok: info.Token, h: h, target: i, role: role, comm: info.Comm}
	return true
}

// markerTarget finds the target an environment's markers point at.
func (r *run) markerTarget(env []string) (int, bool) {
	return markerTarget(env, r.byID, r.targets, r.opt)
}

// keep reports (and logs once) a process spared by SUPERVISOR_KEEP=1.
func (r *run) keep(i, pid int, env []string) bool {
	if v, _ := proc.EnvValue(env, EnvKeep); v != "1" {
		return false
	}
	if !r.kept[pid] {
		r.kept[pid] = true
		r.spared[i] = append(r.spared[i], pid)
		r.log.Info("sparing a process that asked to be kept", "pid", pid, "target", r.targets[i].ID, "env", EnvKeep+"=1")
		// Out of the server's cgroup at once: cgroup.kill would not spare
		// it, and the cgroup could never be found empty with it inside.
		if cg := r.targets[i].Cgroup; cg != "" {
			if err := cgroup.Keep(cg, pid); err != nil {
				r.log.Warn("could not move a kept process out of its cgroup", "pid", pid, "err", err)
			}
		}
		// And out of its server's limits, which end with the server.
		if err := cgroup.KeepV1(r.targets[i].LimitCgroups, pid); err != nil {
			r.log.Warn("could not move a kept process out of its limits' cgroups", "pid", pid, "err", err)
		}
	}
	return true
}

func (r *run) hasMarker(pid int, key, want string) bool {
	env, err := proc.Environ(pid)
	if err != nil {
		return false
	}
	v, ok := proc.EnvValue(env, key)
	return ok && v == want
}

// populated reports whether target i's cgroup still has processes.
func (r *run) populated(i int) bool {
	if r.events[i] == nil {
		return false
	}
	pop, err := cgroup.IsPopulated(r.events[i])
	if err != nil || !pop {
		return false
	}
	// A server that has exited can leave its cgroup counted as populated
	// for a moment: its leader is listed as a zombie while its other
	// threads finish exiting, and then nothing is listed (the kernel's
	// css_task_iter skips a dying leader without live threads) until the
	// last thread has left. Both are an ended tree: waiting on them
	// carried a server that had exited on EOF on to SIGTERM, and said so.
	// Only looked for once no member is known alive: the wait asks on
	// every round, and a live member means a live cgroup without a read.
	for _, m := range r.members {
		if m.target == i && m.h != nil {
			return true
		}
	}
	pids, err := cgroup.Procs(r.targets[i].Cgroup)
	if err != nil {
		return true
	}
	for _, pid := range pids {
		if info, err := proc.Stat(pid); err != nil || info.State != 'Z' {
			return true
		}
	}
	return false
}

func (r *run) unspare(pid int) {
	for i, list := range r.spared {
		for j, p := range list {
			if p == pid {
				r.spared[i] = append(list[:j:j], list[j+1:]...)
				return
			}
		}
	}
}

// gone reports whether err says the process is no longer there (exited, or
// its PID is someone else's now): anything else is a failure to look.
func gone(err error) bool {
	return errors.Is(err, proc.ErrGone) || errors.Is(err, proc.ErrTokenMismatch)
}

// scan is proc.Scan, through the cascade's fault hook when set.
func (r *run) scan() ([]proc.Info, error) {
	if r.c.ScanFault != nil {
		if err := r.c.ScanFault(); err != nil {
			return nil, err
		}
	}
	return proc.Scan()
}
