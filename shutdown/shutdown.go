// Package shutdown owns the stop cascade (design §6): given a set of
// processes and a grace, it snapshots their trees, asks them to stop,
// forces what is left, re-scans to a fixed point and reports what happened
// to each. It never starts or waits for (reaps) a process; the daemon's
// reaper does that.
//
// This version of the cascade covers each target's process group: SIGTERM
// to every member, the grace, SIGKILL to what is left, re-scan. Members are
// signalled through pidfds opened and verified against their creation token,
// so a recycled PID is never hit. Escaped descendants, pipe holders and
// cgroups extend the snapshot step (snapshot.go) without changing the rest.
//
// # Caveats
//
// Waiting is event-driven: each member's pidfd becomes readable when it
// exits, and the cascade polls the set of pidfds with a deadline. There is
// no sleep loop.
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

	"github.com/seed-86a41135/supervisor/proc"
)

// Target is one supervised process to stop, with its group.
type Target struct {
	ID    string
	PID   int
	PGID  int
	Token proc.Token
}

// Result says how a target ended.
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

// Outcome is what happened to one target and its tree.
type Outcome struct {
	ID     string `json:"id"`
	PID    int    `json:"pid"`
	Result Result `json:"result"`
	// PIDs lists every process of the target's tree that was stopped.
	PIDs []int `json:"pids,omitempty"`
	// Left lists processes still alive after SIGKILL (Result Unkillable).
	Left []int `json:"left,omitempty"`
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
}

// DefaultGrace is the SIGTERM grace of design §6.
const DefaultGrace = 5 * time.Second

// Cascade stops sets of processes. The zero value is usable.
type Cascade struct {
	Log hclog.Logger
	// Excluded PIDs are never signalled (the daemon itself, the host).
	Excluded []int
}

type member struct {
	pid    int
	tok    proc.Token
	fd     int // pidfd; -1 once exited
	target int // index into targets
}

type run struct {
	c       *Cascade
	targets []Target
	members map[int]*member
	phase   []Result // per target: the phase in which it finished
	pids    [][]int
	leaders []bool // leader was alive at the snapshot
}

// Stop runs the cascade for targets and returns one outcome per target, in
// order. It returns when every process is gone, or when KillWait after
// SIGKILL has passed, or when ctx is done (the outcomes then say what is
// left).
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
	r := &run{c: c, targets: targets, members: map[int]*member{},
		phase: make([]Result, len(targets)), pids: make([][]int, len(targets)), leaders: make([]bool, len(targets))}
	defer r.closeAll()

	r.snapshot(log)
	r.finish(AlreadyGone) // nothing of them was alive at the snapshot

	// The graces end early when ctx is done or Force is closed.
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
	if opt.EOFGrace > 0 && r.alive() > 0 {
		r.wait(graceCtx, opt.EOFGrace)
		r.finish(ExitedOnEOF)
	}
	if r.alive() > 0 {
		r.signal(unix.SIGTERM, log)
		r.waitFixedPoint(graceCtx, opt.Grace, unix.SIGTERM, log)
		r.finish(ExitedOnSIGTERM)
	}
	if r.alive() > 0 && ctx.Err() == nil {
		r.signal(unix.SIGKILL, log)
		r.waitFixedPoint(ctx, opt.KillWait, unix.SIGKILL, log)
		r.finish(Killed)
	}
	left := Unkillable
	if ctx.Err() != nil {
		left = Interrupted
	}

	out := make([]Outcome, len(targets))
	for i, t := range targets {
		o := Outcome{ID: t.ID, PID: t.PID, Result: r.phase[i], PIDs: r.pids[i]}
		for _, m := range r.members {
			if m.target == i && m.fd >= 0 {
				o.Left = append(o.Left, m.pid)
			}
		}
		if len(o.Left) > 0 {
			sort.Ints(o.Left)
			o.Result = left
		}
		sort.Ints(o.PIDs)
		out[i] = o
	}
	return out
}

// snapshot records every live member of each target's group before any
// signal: once parents die, tree links are gone.
func (r *run) snapshot(log hclog.Logger) {
	for i, t := range r.targets {
		info, err := proc.Stat(t.PID)
		if err != nil || !t.Token.Matches(info.Token) {
			continue // gone, or the pid is someone else's now
		}
		// A zombie leader still holds its group number, so the group is
		// ours; a live one is a member itself even if it left its group.
		r.leaders[i] = true
		if info.State != 'Z' && info.State != 'X' {
			r.add(i, info)
		}
	}
	r.rescan(log)
}

// add opens a verified pidfd for a member of target i. Never PID 1, the
// caller itself, an excluded PID or a process of another uid.
func (r *run) add(i int, info proc.Info) bool {
	if _, seen := r.members[info.PID]; seen {
		return false
	}
	if info.PID == 1 || info.PID == os.Getpid() || info.UID != os.Getuid() || r.excluded(info.PID) {
		return false
	}
	fd, err := proc.OpenPidfd(info.PID, info.Token)
	if err != nil {
		return false // exited between scan and open
	}
	r.members[info.PID] = &member{pid: info.PID, tok: info.Token, fd: fd, target: i}
	r.pids[i] = append(r.pids[i], info.PID)
	return true
}

// rescan adds members that appeared since the last scan (a fork during the
// kill) and returns how many it added.
func (r *run) rescan(log hclog.Logger) int {
	infos, err := proc.Scan()
	if err != nil {
		log.Warn("scan processes", "err", err)
		return 0
	}
	byPGID := map[int]int{}
	for i, t := range r.targets {
		if _, dup := byPGID[t.PGID]; t.PGID > 0 && !dup {
			byPGID[t.PGID] = i // two targets in one group: the first owns it
		}
	}
	added := 0
	for _, info := range infos {
		i, ok := byPGID[info.PGID]
		if !ok || info.State == 'Z' || info.State == 'X' {
			continue
		}
		if _, seen := r.members[info.PID]; seen {
			continue
		}
		// A group whose leader is gone could in principle be a recycled
		// number; only act on it when the leader was ours at the snapshot
		// or the member carries our marker.
		if !r.leaders[i] && !carriesMarker(info.PID, r.targets[i].ID) {
			continue
		}
		if r.add(i, info) {
			added++
		}
	}
	return added
}

func carriesMarker(pid int, procID string) bool {
	env, err := proc.Environ(pid)
	if err != nil {
		return false
	}
	for _, kv := range env {
		if kv == "SUPERVISOR_PROC_ID="+procID {
			return true
		}
	}
	return false
}

func (r *run) excluded(pid int) bool {
	for _, p := range r.c.Excluded {
		if p == pid {
			return true
		}
	}
	return false
}

func (r *run) signal(sig unix.Signal, log hclog.Logger) {
	for _, m := range r.members {
		if m.fd < 0 {
			continue
		}
		if err := unix.PidfdSendSignal(m.fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			log.Warn("signal", "pid", m.pid, "signal", sig, "err", err)
		}
	}
}

// waitFixedPoint waits for the members to exit, re-scanning whenever they
// have so that a process forked during the stop is caught and signalled too.
func (r *run) waitFixedPoint(ctx context.Context, d time.Duration, sig unix.Signal, log hclog.Logger) {
	deadline := time.Now().Add(d)
	for {
		r.wait(ctx, time.Until(deadline))
		if r.rescan(log) == 0 || ctx.Err() != nil || time.Now().After(deadline) {
			return
		}
		r.signal(sig, log)
	}
}

// finish marks every target whose members are all gone as ended in phase.
func (r *run) finish(phase Result) {
	for i := range r.targets {
		if r.phase[i] != "" {
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
			r.phase[i] = phase
		}
	}
}

func (r *run) alive() int {
	n := 0
	for _, m := range r.members {
		if m.fd >= 0 {
			n++
		}
	}
	return n
}

// wait polls the live members' pidfds until all have exited, d has passed
// or ctx is done.
func (r *run) wait(ctx context.Context, d time.Duration) {
	deadline := time.Now().Add(d)
	cancelFd, stop := ctxFd(ctx)
	defer stop()
	for r.alive() > 0 {
		remaining := time.Until(deadline)
		if remaining <= 0 || ctx.Err() != nil {
			return
		}
		fds := make([]unix.PollFd, 0, len(r.members)+1)
		owners := make([]*member, 0, len(r.members))
		for _, m := range r.members {
			if m.fd >= 0 {
				fds = append(fds, unix.PollFd{Fd: int32(m.fd), Events: unix.POLLIN})
				owners = append(owners, m)
			}
		}
		if cancelFd >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(cancelFd), Events: unix.POLLIN})
		}
		ms := int(remaining.Milliseconds()) + 1
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			if err != nil {
				return
			}
			continue
		}
		for i, m := range owners {
			if fds[i].Revents != 0 {
				unix.Close(m.fd)
				m.fd = -1
			}
		}
	}
}

func (r *run) closeAll() {
	for _, m := range r.members {
		if m.fd >= 0 {
			unix.Close(m.fd)
			m.fd = -1
		}
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
	stopAfter := context.AfterFunc(ctx, func() {
		var one = [8]byte{1}
		unix.Write(efd, one[:])
	})
	return efd, func() {
		stopAfter()
		unix.Close(efd)
	}
}

// String renders an outcome for people.
func (o Outcome) String() string {
	s := fmt.Sprintf("%s (pid %d): %s", o.ID, o.PID, o.Result)
	if len(o.PIDs) > 1 {
		s += fmt.Sprintf(", pids %v", o.PIDs)
	}
	if len(o.Left) > 0 {
		s += fmt.Sprintf(", still alive: %v", o.Left)
	}
	return s
}
