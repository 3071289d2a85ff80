// Package shutdown owns the stop cascade (design §6): given a set of
// processes and a grace, it snapshots their trees, asks them to stop,
// forces what is left, re-scans to a fixed point and reports what happened
// to each process. It never starts or reaps a process; the daemon's reaper
// does that.
//
// The snapshot of a target (snapshot.go) takes, before any signal: its
// leader, its process group, every descendant by PPID (tree links vanish
// once parents die), every process carrying its marker
// (SUPERVISOR_PROC_ID, or the session's SUPERVISOR_SESSION_ID when a whole
// session ends), every process in its cgroup, and every process outside all
// of that which holds the server's end of a host stdio channel (the pipe
// holders that keep a host from seeing EOF). Tree, group, marker and cgroup
// members get SIGTERM and the grace; pipe holders outside the tree get
// SIGKILL with what is left.
//
// # Caveats
//
// Every signal goes through a pidfd opened and verified against a creation
// token: the recorded one (pidfs inode included) for a target's leader, the
// one read by the scan (start ticks) for the processes found around it, so
// a recycled PID is never hit unless it was recycled within one clock tick
// between the scan and the pidfd's opening. Never
// signalled: PID 1, the caller, Excluded PIDs, the Spared processes of a
// target (its shim, its host), and processes of another uid. Waiting is
// event-driven: pidfds become readable when their process exits and
// cgroup.events raises POLLPRI when it changes; there is no sleep loop.
package shutdown

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/cgroup"
	"github.com/seed-86a41135/supervisor/proc"
)

// Target is one supervised process to stop, with what identifies its tree.
type Target struct {
	ID    string
	PID   int
	PGID  int
	Token proc.Token
	// Session is the value of the target's SUPERVISOR_SESSION_ID marker.
	Session string
	// Stdio are the host channels the server was given: their holders
	// outside the tree are killed so the host sees EOF.
	Stdio []Channel
	// Cgroup is the server's own cgroup directory, if it has one.
	Cgroup string
	// Spared are never signalled even when they hold a channel: the shim
	// (which exits with the server) and the host.
	Spared []Proc
	// LeaderJustExited says the caller saw the leader exit moments ago
	// (reaped it, or its pidfd fired): its group number cannot have been
	// recycled while members remain, so the group is still the target's.
	// Without it, a leader that is gone keeps its group out of the
	// snapshot: the number may name a stranger's group by now.
	LeaderJustExited bool
	// Grace is this target's SIGTERM grace; zero means Options.Grace.
	Grace time.Duration
	// Force, when closed, ends this target's graces: SIGKILL now (a
	// second, more urgent stop request for it).
	Force <-chan struct{}
}

// Channel is one host stdio channel handed to a server.
type Channel struct {
	Fd    int    // 0, 1 or 2 in the server
	Kind  string // "pipe" or "socket"
	Inode uint64
}

// Proc is a process named by PID and creation token.
type Proc struct {
	PID   int
	Token proc.Token
}

// Result says how a target, or one process of it, ended.
type Result string

const (
	ExitedOnEOF     Result = "exited on EOF"
	ExitedOnSIGTERM Result = "exited on SIGTERM"
	Killed          Result = "killed"
	AlreadyGone     Result = "already gone"
	Unkillable      Result = "could not be killed"
	// Interrupted means the caller's context ended the cascade early; Left
	// says what was still running.
	Interrupted Result = "interrupted"
)

// Role says why a process belonged to a target's tree.
type Role string

const (
	RoleLeader Role = "leader"
	RoleGroup  Role = "group"
	RoleTree   Role = "descendant"
	RoleMarker Role = "marker"
	RoleCgroup Role = "cgroup"
	RoleHolder Role = "pipe holder"
)

// ProcOutcome is what happened to one process of a target's tree.
type ProcOutcome struct {
	PID    int    `json:"pid"`
	Role   Role   `json:"role"`
	Result Result `json:"result"`
}

// Outcome is what happened to one target and its tree.
type Outcome struct {
	ID     string `json:"id"`
	PID    int    `json:"pid"`
	Result Result `json:"result"`
	// PIDs lists every process of the target's tree that was stopped.
	PIDs []int `json:"pids,omitempty"`
	// Procs says, per process, why it was part of the tree and how it
	// ended.
	Procs []ProcOutcome `json:"procs,omitempty"`
	// Left lists processes still alive at the end (Unkillable or
	// Interrupted).
	Left []int `json:"left,omitempty"`
	// Spared lists marker holders left alone for SUPERVISOR_KEEP=1.
	Spared []int `json:"spared,omitempty"`
}

// Options tune one cascade. Zero values take the defaults.
type Options struct {
	// EOFGrace is how long servers get to exit on their own because the
	// host's pipes are closed, before any signal. Zero skips the step.
	EOFGrace time.Duration
	// Grace is how long SIGTERM gets before SIGKILL. Default 5 s.
	Grace time.Duration
	// KillWait bounds the wait after SIGKILL. Default 5 s.
	KillWait time.Duration
	// Force, when closed, cuts the EOF grace and the SIGTERM grace short:
	// a second, more urgent stop request.
	Force <-chan struct{}
	// WholeSession makes every holder of the targets' session marker part
	// of the tree, not only holders of their process markers: the session
	// is ending, so nothing started for it may stay.
	WholeSession bool
	// SkipProc, when set, says a SUPERVISOR_PROC_ID outside the targets
	// names a process someone else is stopping: its marker holders are not
	// claimed through the session marker.
	SkipProc func(procID string) bool
	// Instance, when set, is the SUPERVISOR_INSTANCE marker a process must
	// carry to be swept through its session marker.
	Instance string
}

// DefaultGrace is the SIGTERM grace of design §6.
const DefaultGrace = 5 * time.Second

// Cascade stops sets of processes. The zero value is usable.
type Cascade struct {
	Log hclog.Logger
	// Excluded PIDs are never signalled (the daemon itself).
	Excluded []int
	// AfterSignal, when set, runs once SIGTERM has gone to the targets'
	// trees: the fault-injection tests crash the daemon there, mid-stop.
	AfterSignal func()
}

// Stop runs the cascade for targets and returns one outcome per target, in
// order. Each target gets its own grace (Target.Grace, else opt.Grace): a
// session's servers are stopped side by side, each escalated to SIGKILL
// when its own grace is over. Stop returns when every process is gone, or
// when KillWait after a target's SIGKILL has passed, or when ctx is done
// (the outcomes then say what is left).
func (c *Cascade) Stop(ctx context.Context, targets []Target, opt Options) []Outcome {
	if opt.Grace <= 0 {
		opt.Grace = DefaultGrace
	}
	if opt.KillWait <= 0 {
		opt.KillWait = 5 * time.Second
	}
	log := c.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	// The EOF grace counts from the call, not from the end of the
	// snapshot: the host's pipes closed before we were asked.
	entered := time.Now()
	r := newRun(c, targets, opt, log)
	defer r.closeAll()

	r.collect()
	r.finish() // nothing of them was alive at the snapshot: already gone

	// The graces end early when ctx is done or opt.Force is closed; a
	// target's own Force ends only its graces, and pokes the wait.
	graceCtx, cancelGrace := context.WithCancel(ctx)
	defer cancelGrace()
	if opt.Force != nil {
		go func() {
			select {
			case <-opt.Force:
				cancelGrace()
			case <-graceCtx.Done():
			}
		}()
	}
	r.watchForces(graceCtx)

	if opt.EOFGrace > 0 && r.aliveMembers() > 0 && !r.anyForced() {
		r.setPhase(ExitedOnEOF)
		r.wait(graceCtx, entered.Add(opt.EOFGrace))
		r.finish()
	}

	start := time.Now()
	r.setPhase(ExitedOnSIGTERM)
	r.signalNew()
	if c.AfterSignal != nil {
		c.AfterSignal()
	}
	killedAt := make([]time.Time, len(targets))
	for {
		r.finish()
		pending := 0
		next := time.Time{}
		for i := range targets {
			if r.result[i] != "" {
				continue
			}
			// Escalate when the grace is over, or forced, or when only pipe
			// holders outside the tree are left: the tree is gone, and the
			// host is waiting for EOF.
			if r.tphase[i] == ExitedOnSIGTERM && (graceCtx.Err() != nil || r.forced[i].Load() ||
				!time.Now().Before(start.Add(r.grace(i))) || r.onlyHolders(i)) {
				if ctx.Err() != nil {
					continue // cancelled: no escalation
				}
				r.escalate(i)
				killedAt[i] = time.Now()
			}
			var until time.Time
			if r.tphase[i] == Killed {
				until = killedAt[i].Add(opt.KillWait)
				if !time.Now().Before(until) {
					continue // gave up: reported as left
				}
			} else {
				until = start.Add(r.grace(i))
			}
			pending++
			if next.IsZero() || until.Before(next) {
				next = until
			}
		}
		if pending == 0 || ctx.Err() != nil {
			break
		}
		waitCtx := graceCtx
		if r.anyKilled() {
			waitCtx = ctx // a force cannot hurry what is already SIGKILLed
		}
		r.wait(waitCtx, next)
		if r.collect() > 0 {
			r.signalNew() // forked during the stop: the fixed point
		}
	}
	left := Unkillable
	if ctx.Err() != nil {
		left = Interrupted
	}
	return r.outcomes(left)
}

// watchForces marks a target forced when its Force channel closes, and
// pokes the wait so it re-evaluates at once. The goroutines end with ctx.
func (r *run) watchForces(ctx context.Context) {
	for i, t := range r.targets {
		if t.Force == nil {
			continue
		}
		r.goroutines.Add(1)
		go func(i int, force <-chan struct{}) {
			defer r.goroutines.Done()
			select {
			case <-force:
				r.forced[i].Store(true)
				one := [8]byte{1}
				unix.Write(r.poke, one[:])
			case <-ctx.Done():
			}
		}(i, t.Force)
	}
}

func (r *run) anyForced() bool {
	for i := range r.targets {
		if r.forced[i].Load() {
			return true
		}
	}
	return false
}

// grace is target i's SIGTERM grace.
func (r *run) grace(i int) time.Duration {
	if g := r.targets[i].Grace; g > 0 {
		return g
	}
	return r.opt.Grace
}

// setPhase moves every unfinished target to phase p.
func (r *run) setPhase(p Result) {
	for i := range r.targets {
		if r.result[i] == "" {
			r.tphase[i] = p
		}
	}
}

// onlyHolders reports whether target i has live pipe holders but no other
// live member and an empty cgroup.
func (r *run) onlyHolders(i int) bool {
	holders := false
	for _, m := range r.members {
		if m.target != i || m.fd < 0 {
			continue
		}
		if m.role != RoleHolder {
			return false
		}
		holders = true
	}
	return holders && !r.populated(i)
}

func (r *run) anyKilled() bool {
	for i := range r.targets {
		if r.result[i] == "" && r.tphase[i] == Killed {
			return true
		}
	}
	return false
}

// escalate moves target i to SIGKILL: its cgroup, its members and the pipe
// holders outside its tree.
func (r *run) escalate(i int) {
	r.tphase[i] = Killed
	if t := r.targets[i]; t.Cgroup != "" {
		if err := cgroup.Kill(t.Cgroup); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log.Warn("cgroup.kill", "cgroup", t.Cgroup, "err", err)
		}
	}
	for _, m := range r.members {
		if m.target == i {
			r.send(m, unix.SIGKILL)
		}
	}
}

// signalNew signals members that have not had their target's current
// signal yet: SIGTERM in the grace (never to pipe holders outside the
// tree: they get SIGKILL with what is left), SIGKILL after it.
func (r *run) signalNew() {
	for _, m := range r.members {
		if m.fd < 0 {
			continue
		}
		switch r.tphase[m.target] {
		case ExitedOnSIGTERM:
			if m.role != RoleHolder && m.sent == 0 {
				r.send(m, unix.SIGTERM)
			}
		case Killed:
			if m.sent != unix.SIGKILL {
				r.send(m, unix.SIGKILL)
			}
		}
	}
	for i, t := range r.targets {
		if r.result[i] == "" && r.tphase[i] == Killed && t.Cgroup != "" && r.populated(i) {
			cgroup.Kill(t.Cgroup) // a process forked into it meanwhile
		}
	}
}

func (r *run) send(m *member, sig unix.Signal) {
	if m.fd < 0 {
		return
	}
	m.sent = sig
	if err := unix.PidfdSendSignal(m.fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		r.log.Warn("signal", "pid", m.pid, "signal", sig, "err", err)
	}
}

// outcomes assembles the per-target reports.
func (r *run) outcomes(left Result) []Outcome {
	out := make([]Outcome, len(r.targets))
	for i, t := range r.targets {
		o := Outcome{ID: t.ID, PID: t.PID, Result: r.result[i], Spared: r.spared[i]}
		for _, m := range r.members {
			if m.target != i {
				continue
			}
			res := m.result
			if m.fd >= 0 {
				o.Left = append(o.Left, m.pid)
				res = left
			}
			o.PIDs = append(o.PIDs, m.pid)
			o.Procs = append(o.Procs, ProcOutcome{PID: m.pid, Role: m.role, Result: res})
		}
		if len(o.Left) > 0 || r.populated(i) || o.Result == "" {
			o.Result = left
		}
		sort.Ints(o.PIDs)
		sort.Ints(o.Left)
		sort.Slice(o.Procs, func(a, b int) bool { return o.Procs[a].PID < o.Procs[b].PID })
		out[i] = o
	}
	return out
}

// finish marks every target whose processes are all gone (and whose cgroup
// is empty) as ended in its current phase.
func (r *run) finish() {
	for i := range r.targets {
		if r.result[i] != "" || r.populated(i) {
			continue
		}
		done := true
		for _, m := range r.members {
			if m.target == i && m.fd >= 0 {
				done = false
				break
			}
		}
		if done {
			r.result[i] = r.tphase[i]
		}
	}
}

// aliveMembers counts live processes that get graces (not pipe holders).
func (r *run) aliveMembers() int {
	n := 0
	for _, m := range r.members {
		if m.fd >= 0 && m.role != RoleHolder {
			n++
		}
	}
	return n
}

// wait polls the pidfds of the members being waited for — pipe holders
// only once their target is in SIGKILL — and the cgroup.events of targets
// in SIGKILL, until all of them are done, deadline has passed or ctx is
// done.
func (r *run) wait(ctx context.Context, deadline time.Time) {
	cancelFd, stop := ctxFd(ctx)
	defer stop()
	for {
		fds := make([]unix.PollFd, 0, len(r.members)+len(r.events)+1)
		owners := make([]*member, 0, len(r.members))
		for _, m := range r.members {
			if m.fd >= 0 && (m.role != RoleHolder || r.tphase[m.target] == Killed) {
				fds = append(fds, unix.PollFd{Fd: int32(m.fd), Events: unix.POLLIN})
				owners = append(owners, m)
			}
		}
		nPids := len(fds)
		for i, f := range r.events {
			if f != nil && r.result[i] == "" && r.populated(i) {
				fds = append(fds, unix.PollFd{Fd: int32(f.Fd()), Events: unix.POLLPRI})
			}
		}
		if len(fds) == 0 {
			return
		}
		remaining := time.Until(deadline)
		if remaining <= 0 || ctx.Err() != nil {
			return
		}
		if cancelFd >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(cancelFd), Events: unix.POLLIN})
		}
		pokeIdx := -1
		if r.poke >= 0 {
			pokeIdx = len(fds)
			fds = append(fds, unix.PollFd{Fd: int32(r.poke), Events: unix.POLLIN})
		}
		n, err := unix.Poll(fds, int(remaining.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		if n == 0 {
			continue
		}
		for i, m := range owners {
			if i < nPids && fds[i].Revents != 0 {
				unix.Close(m.fd)
				m.fd = -1
				m.result = r.tphase[m.target]
			}
		}
		if pokeIdx >= 0 && fds[pokeIdx].Revents != 0 {
			var buf [8]byte
			unix.Read(r.poke, buf[:])
			return // a target was forced: re-evaluate
		}
		// A cgroup that emptied ends the wait only together with the
		// pidfds; its event just re-evaluates the set.
	}
}

func (r *run) closeAll() {
	// The force watchers may still write to poke: wait for them (their
	// context is cancelled by now) before its number can be reused.
	r.goroutines.Wait()
	for _, m := range r.members {
		if m.fd >= 0 {
			unix.Close(m.fd)
			m.fd = -1
		}
	}
	for _, f := range r.events {
		if f != nil {
			f.Close()
		}
	}
	if r.poke >= 0 {
		unix.Close(r.poke)
	}
}

// ctxFd returns an eventfd that becomes readable when ctx is done, so a
// poll can wake on cancellation.
func ctxFd(ctx context.Context) (int, func()) {
	if ctx.Done() == nil {
		return -1, func() {}
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, func() {}
	}
	wrote := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		var one = [8]byte{1}
		unix.Write(efd, one[:])
		close(wrote)
	})
	return efd, func() {
		// If the write is under way, let it finish before the fd number
		// can be reused: a stray write would land in someone else's fd.
		if !stopAfter() {
			<-wrote
		}
		unix.Close(efd)
	}
}

// String renders an outcome for people.
func (o Outcome) String() string {
	s := fmt.Sprintf("%s (pid %d): %s", o.ID, o.PID, o.Result)
	var extra []string
	for _, p := range o.Procs {
		if p.PID != o.PID {
			extra = append(extra, fmt.Sprintf("%s %d %s", p.Role, p.PID, p.Result))
		}
	}
	if len(extra) > 0 {
		s += fmt.Sprintf("; also %v", extra)
	}
	if len(o.Spared) > 0 {
		s += fmt.Sprintf("; spared (SUPERVISOR_KEEP=1): %v", o.Spared)
	}
	if len(o.Left) > 0 {
		s += fmt.Sprintf("; still alive: %v", o.Left)
	}
	return s
}
