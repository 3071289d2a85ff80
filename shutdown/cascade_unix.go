//go:build unix

package shutdown

import (
	"context"
	"errors"
	"os"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

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
				r.poke.wake()
			case <-ctx.Done():
			}
		}(i, t.Force)
	}
}

// onlyHolders reports whether target i has live pipe holders but no other
// live member and an empty cgroup.
func (r *run) onlyHolders(i int) bool {
	holders := false
	for _, m := range r.members {
		if m.target != i || m.h == nil {
			continue
		}
		if m.role != RoleHolder {
			return false
		}
		holders = true
	}
	return holders && !r.populated(i)
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
		if m.h == nil {
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
			if err := cgroup.Kill(t.Cgroup); err != nil { // a process forked into it meanwhile
				r.log.Warn("cgroup.kill failed: waiting on what the snapshot finds", "cgroup", t.Cgroup, "err", err)
			}
		}
	}
}

func (r *run) send(m *member, sig syscall.Signal) {
	if m.h == nil {
		return
	}
	m.sent = sig
	if err := m.h.Signal(sig); err != nil && !errors.Is(err, proc.ErrGone) {
		r.log.Warn("signal", "pid", m.pid, "signal", sig, "err", err)
	}
}

// outcomes assembles the per-target reports.
func (r *run) outcomes(left Result) []Outcome {
	out := make([]Outcome, len(r.targets))
	for i, t := range r.targets {
		o := Outcome{ID: t.ID, PID: t.PID, Result: r.result[i], Spared: r.spared[i], Unproven: r.unproven[i]}
		for _, m := range r.members {
			if m.target != i {
				continue
			}
			res := m.result
			if m.h != nil {
				o.Left = append(o.Left, m.pid)
				res = left
				if left == Unkillable {
					r.logStuck(t.ID, m)
				}
			}
			po := ProcOutcome{PID: m.pid, Role: m.role, Result: res, Command: m.comm}
			if !m.gone.IsZero() {
				po.AfterMS = max(1, m.gone.Sub(r.began).Milliseconds())
			}
			o.PIDs = append(o.PIDs, m.pid)
			o.Procs = append(o.Procs, po)
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
			if m.target == i && m.h != nil {
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
		if m.h != nil && m.role != RoleHolder {
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
	cancel, stop := ctxWaker(ctx)
	defer stop()
	for {
		fds := make([]unix.PollFd, 0, len(r.members)+len(r.events)+1)
		owners := make([]*member, 0, len(r.members))
		for _, m := range r.members {
			if m.h != nil && (m.role != RoleHolder || r.tphase[m.target] == Killed) {
				fds = append(fds, unix.PollFd{Fd: int32(m.h.Fd()), Events: unix.POLLIN})
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
		// Past the deadline (or cancelled), one last look without
		// blocking: an exit that came just in time is counted in the step
		// it came in, not in the next (a late EOF exit is no SIGTERM's).
		remaining := time.Until(deadline)
		last := remaining <= 0 || ctx.Err() != nil
		timeout := 0
		if !last {
			timeout = int(remaining.Milliseconds()) + 1
		}
		if cancel != nil {
			fds = append(fds, unix.PollFd{Fd: int32(cancel.fd()), Events: unix.POLLIN})
		}
		pokeIdx := -1
		if r.poke != nil {
			pokeIdx = len(fds)
			fds = append(fds, unix.PollFd{Fd: int32(r.poke.fd()), Events: unix.POLLIN})
		}
		n, err := unix.Poll(fds, timeout)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		if n == 0 {
			if last {
				return
			}
			continue
		}
		for i, m := range owners {
			if i < nPids && fds[i].Revents != 0 {
				m.h.Close()
				m.h = nil
				m.result = r.tphase[m.target]
				m.gone = time.Now()
			}
		}
		if r.untilLeaders {
			r.eofEarly()
			if !r.eofPending() {
				return
			}
		}
		if pokeIdx >= 0 && fds[pokeIdx].Revents != 0 {
			r.poke.drain()
			return // a target was forced: re-evaluate
		}
		if last {
			return
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
		if m.h != nil {
			m.h.Close()
			m.h = nil
		}
	}
	for _, f := range r.events {
		if f != nil {
			f.Close()
		}
	}
	if r.poke != nil {
		r.poke.close()
	}
}

// ctxWaker returns a waker that wakes when ctx is done, so a poll can
// wake on cancellation (nil when ctx cannot be done).
func ctxWaker(ctx context.Context) (*waker, func()) {
	if ctx.Done() == nil {
		return nil, func() {}
	}
	w, err := newWaker()
	if err != nil {
		return nil, func() {}
	}
	woke := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		w.wake()
		close(woke)
	})
	return w, func() {
		// If the wake is under way, let it finish before the fd numbers
		// can be reused: a stray write would land in someone else's fd.
		if !stopAfter() {
			<-woke
		}
		w.close()
	}
}

// anyAlive reports whether a process that gets graces still runs.
func (r *run) anyAlive() bool { return r.aliveMembers() > 0 }

// escalateEarly: only pipe holders outside the tree are left (the tree is
// gone, and the host is waiting for EOF).
func (r *run) escalateEarly(i int) bool { return r.onlyHolders(i) }

// logStuck says where a process that outlived its SIGKILL is: only an
// uninterruptible wait in the kernel (state D) keeps one alive, and the
// function it waits in names what it waits for.
func (r *run) logStuck(id string, m *member) {
	state := "gone by now"
	if info, err := proc.Stat(m.pid); err == nil {
		state = string(info.State)
	}
	r.log.Warn("a process outlived its SIGKILL", "target", id, "pid", m.pid, "command", m.comm,
		"state", state, "waits_in", proc.WaitChannel(m.pid), "signal", proc.SignalName(m.sent))
}
