package shutdown

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// state is what every OS's run keeps per target, and what Stop reads. A
// run (cascade_unix.go, cascade_windows.go) embeds it and adds how its OS
// finds a tree, signals it and waits for it: collect, finish, signalNew,
// escalate, escalateEarly, wait, anyAlive, outcomes, watchForces and
// closeAll.
type state struct {
	c       *Cascade
	targets []Target
	opt     Options
	log     hclog.Logger

	began  time.Time // the call: what outcomes' times count from
	result []Result  // per target: how it ended; "" while it runs
	tphase []Result  // per target: the step under way
	forced []atomic.Bool
	byID   map[string]int // first target of each id

	goroutines sync.WaitGroup // the force watchers
	self       int
	// failure is why the snapshot could not see the trees (out of fds,
	// /proc unreadable): nothing is signalled, the stop fails and is
	// for the caller to retry.
	failure error
	// untilLeaders makes a wait move each target whose own process (its
	// leader) has exited on to SIGTERM at once (eofEarly), and end once
	// none waits on its leader: the EOF grace waits for servers to exit on
	// their own, and once one has, what it left (an escaped grandchild
	// that never reads stdin) has nothing to wait for, whatever the other
	// targets of the stop still do.
	untilLeaders bool
}

// fail records the first reason the snapshot is not to be trusted.
func (s *state) fail(err error) {
	if s.failure == nil {
		s.failure = err
	}
}

func (s *state) init(c *Cascade, targets []Target, opt Options, log hclog.Logger, self int) {
	s.c, s.targets, s.opt, s.log, s.self = c, targets, opt, log, self
	s.result = make([]Result, len(targets))
	s.tphase = make([]Result, len(targets))
	s.forced = make([]atomic.Bool, len(targets))
	s.byID = map[string]int{}
	for i, t := range targets {
		s.tphase[i] = AlreadyGone
		if _, dup := s.byID[t.ID]; !dup {
			s.byID[t.ID] = i
		}
	}
}

// grace is target i's graceful-stop grace.
func (s *state) grace(i int) time.Duration {
	if g := s.targets[i].Grace; g > 0 {
		return min(g, MaxGrace)
	}
	return s.opt.Grace
}

// eofEarly moves each target in its EOF grace whose own process has exited,
// and that left processes behind, on to SIGTERM now.
func (r *run) eofEarly() {
	moved := false
	for i := range r.targets {
		if r.result[i] == "" && r.tphase[i] == ExitedOnEOF && !r.aliveOf(i, RoleLeader) && r.aliveOf(i, "") {
			r.tphase[i] = ExitedOnSIGTERM
			moved = true
		}
	}
	if moved {
		r.signalNew()
	}
}

// eofPending says whether a target still waits in its EOF grace for its
// own process to exit.
func (r *run) eofPending() bool {
	for i := range r.targets {
		if r.result[i] == "" && r.tphase[i] == ExitedOnEOF && r.aliveOf(i, RoleLeader) {
			return true
		}
	}
	return false
}

// aliveOf says whether a member of target i with role (any but a pipe
// holder when role is "") is alive.
func (r *run) aliveOf(i int, role Role) bool {
	for _, m := range r.members {
		if m.target == i && m.h != nil && (m.role == role || (role == "" && m.role != RoleHolder)) {
			return true
		}
	}
	return false
}

// setPhase moves every unfinished target to phase p.
func (s *state) setPhase(p Result) {
	for i := range s.targets {
		if s.result[i] == "" {
			s.tphase[i] = p
		}
	}
}

func (s *state) anyForced() bool {
	for i := range s.targets {
		if s.forced[i].Load() {
			return true
		}
	}
	return false
}

func (s *state) anyKilled() bool {
	for i := range s.targets {
		if s.result[i] == "" && s.tphase[i] == Killed {
			return true
		}
	}
	return false
}

// Stop runs the cascade for targets and returns one outcome per target, in
// order. Each target gets its own grace (Target.Grace, else opt.Grace): a
// session's servers are stopped side by side, each escalated to the forced
// stop when its own grace is over. Stop returns when every process is
// gone, or when KillWait after a target's forced stop has passed, or when
// ctx is done (the outcomes then say what is left).
func (c *Cascade) Stop(ctx context.Context, targets []Target, opt Options) []Outcome {
	if opt.Grace <= 0 {
		opt.Grace = DefaultGrace
	}
	// Callers refuse a longer grace where it enters; one from an older
	// record still must not wedge what waits for this stop.
	opt.Grace, opt.EOFGrace = min(opt.Grace, MaxGrace), min(opt.EOFGrace, MaxGrace)
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
	r.began = entered
	defer r.closeAll()

	r.collect()
	if r.failure != nil {
		// A tree half seen is not stopped: a leader missed for want of an
		// fd would pass for gone. Nothing was signalled yet.
		out := make([]Outcome, len(targets))
		for i, t := range targets {
			out[i] = Outcome{ID: t.ID, PID: t.PID, Result: Failed, Error: r.failure.Error()}
		}
		return out
	}
	r.finish() // nothing of them was alive at the snapshot: already gone

	// The graces end early when ctx is done or opt.Force is closed; a
	// target's own Force ends only its graces, and pokes the wait.
	graceCtx, cancelGrace := context.WithCancel(ctx)
	defer cancelGrace() // before closeAll, which waits for the watchers
	if opt.Force != nil {
		r.goroutines.Add(1)
		go func() {
			defer r.goroutines.Done()
			select {
			case <-opt.Force:
				cancelGrace()
			case <-graceCtx.Done():
			}
		}()
	}
	r.watchForces(graceCtx)

	if opt.EOFGrace > 0 && r.anyAlive() && !r.anyForced() {
		r.setPhase(ExitedOnEOF)
		r.eofEarly()
		if r.eofPending() {
			r.report(ExitedOnEOF, time.Until(entered.Add(opt.EOFGrace)))
			r.untilLeaders = true
			r.wait(graceCtx, entered.Add(opt.EOFGrace))
			r.untilLeaders = false
		}
		r.finish()
	}

	start := time.Now()
	r.setPhase(ExitedOnSIGTERM)
	r.signalNew()
	if c.AfterSignal != nil {
		c.AfterSignal()
	}
	if graceCtx.Err() == nil {
		longest := time.Duration(0)
		for i := range targets {
			if r.result[i] == "" && !r.forced[i].Load() {
				longest = max(longest, r.grace(i))
			}
		}
		if longest > 0 {
			r.report(ExitedOnSIGTERM, longest)
		}
	}
	killedAt := make([]time.Time, len(targets))
	for {
		r.finish()
		pending := 0
		next := time.Time{}
		killed := false
		for i := range targets {
			if r.result[i] != "" {
				continue
			}
			if r.tphase[i] == ExitedOnSIGTERM && (graceCtx.Err() != nil || r.forced[i].Load() ||
				!time.Now().Before(start.Add(r.grace(i))) || r.escalateEarly(i)) {
				if ctx.Err() != nil {
					continue // cancelled: no escalation
				}
				r.escalate(i)
				killedAt[i] = time.Now()
				killed = true
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
		if killed {
			r.report(Killed, opt.KillWait)
		}
		waitCtx := graceCtx
		if r.anyKilled() {
			waitCtx = ctx // a force cannot hurry what is already killed
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

// report tells opt.Progress that the cascade waits up to wait for the
// processes still running in step (pipe holders outside the tree count
// once they are being killed).
func (r *run) report(step Result, wait time.Duration) {
	if r.opt.Progress == nil {
		return
	}
	n := 0
	for _, m := range r.members {
		if m.h != nil && (m.role != RoleHolder || step == Killed) {
			n++
		}
	}
	if n > 0 {
		r.opt.Progress(Progress{Step: step, Processes: n, Wait: wait})
	}
}
