package daemon

import (
	"syscall"
	"time"

	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// How a stop ended is decided once, here, from the reaper's real exit
// status: the cascade only knows the step it was in when it saw the leader
// gone, and a server that exits on stdin EOF races the daemon's own
// reaction to its host's death (the reaper can see the exit before the
// host watch fires, or between the end of the EOF grace and the SIGTERM).
// Events, the record (ps --json) and the stops counter all take the
// outcome decided here.

// eofLead is how long before its host's death was noticed a server's exit
// still counts as caused by it: the kernel closes a dying process's files
// (the server sees EOF) before it wakes the watchers of its pidfd.
const eofLead = time.Second

// trueResult corrects phase, the step the cascade was in when the leader
// was seen gone, with its real exit status st. eofStop says the stop began
// with an EOF grace (the host's pipes are closed).
func trueResult(phase shutdown.Result, st spawn.Status, eofStop bool) shutdown.Result {
	if st.Unknown {
		return phase // re-adopted: the cascade's view is all there is
	}
	switch st.Signal {
	case syscall.SIGKILL:
		return shutdown.Killed
	case syscall.SIGTERM:
		return shutdown.ExitedOnSIGTERM
	}
	switch phase {
	case shutdown.AlreadyGone, shutdown.ExitedOnEOF:
		// Gone before any signal reached it.
		if eofStop {
			return shutdown.ExitedOnEOF
		}
	case shutdown.Killed:
		// It exited by itself before the SIGKILL landed: in the SIGTERM
		// grace (or the EOF one, were SIGTERM not sent at all).
		if st.Signal == 0 {
			return shutdown.ExitedOnSIGTERM
		}
	}
	return phase
}

// settle gives o the true result of its leader, whose exit status is st.
func settle(o shutdown.Outcome, st spawn.Status, eofStop bool) shutdown.Outcome {
	if o.Result == shutdown.Unkillable || o.Result == shutdown.Interrupted {
		return o // something is still alive: that is what counts
	}
	r := trueResult(o.Result, st, eofStop)
	if r == o.Result {
		return o
	}
	o.Result = r
	o.Procs = append([]shutdown.ProcOutcome(nil), o.Procs...)
	for i := range o.Procs {
		if o.Procs[i].PID == o.PID && o.Procs[i].Role == shutdown.RoleLeader {
			o.Procs[i].Result = r
		}
	}
	return o
}

// publishStop records a stop's outcome in the record, the event log and
// the stops counter: the one place that does, so the three agree.
func (d *Daemon) publishStop(session string, o shutdown.Outcome) {
	d.recordStopLogged("process.stop", session, o)
	d.metrics.Stopped(o)
}

// settleExited is the outcome of a stop asked for a process that had
// already exited on its own (its monitor was first). When it exited about
// when its host died and no signal killed it, the stop is what ended it:
// it exited on EOF, and that is published once (the record's stop result
// says it was). Otherwise it is what the record says, or already gone.
func (d *Daemon) settleExited(id string, opt shutdown.Options, since time.Time) shutdown.Outcome {
	out := shutdown.Outcome{ID: id, Result: shutdown.AlreadyGone} // no record: nothing to settle
	p, err := d.reg.Update(id, func(p *registry.Process) error {
		out = shutdown.Outcome{ID: id, PID: p.PID, Result: shutdown.AlreadyGone}
		if p.Stop != nil {
			out = outcomeOf(*p)
		}
		eof := opt.EOFGrace > 0 && p.State == registry.StateExited && p.ExitedAt != nil &&
			!p.ExitedAt.Before(since.Add(-eofLead)) && p.Signal != "SIGKILL" && p.Signal != "SIGTERM"
		if !eof || out.Result != shutdown.AlreadyGone {
			return errUnchanged // settled already, or not by this stop
		}
		out.Result = shutdown.ExitedOnEOF
		for i := range out.Procs {
			if out.Procs[i].PID == out.PID && out.Procs[i].Role == shutdown.RoleLeader {
				out.Procs[i].Result = shutdown.ExitedOnEOF
			}
		}
		p.Stop = stopRecordOf(out)
		return nil
	})
	if err != nil {
		return out
	}
	d.event("process.stop", p.Session, id, out.String())
	d.metrics.Stopped(out)
	return out
}

// outcomeOf is the stop outcome kept in p's record.
func outcomeOf(p registry.Process) shutdown.Outcome {
	o := shutdown.Outcome{ID: p.ID, PID: p.PID, Result: shutdown.Result(p.Stop.Result), Left: p.Stop.Left, Spared: p.Stop.Spared, Unproven: p.Stop.Unproven}
	for _, sp := range p.Stop.Procs {
		o.PIDs = append(o.PIDs, sp.PID)
		o.Procs = append(o.Procs, shutdown.ProcOutcome{PID: sp.PID, Role: shutdown.Role(sp.Role), Result: shutdown.Result(sp.Result)})
	}
	return o
}

func stopRecordOf(o shutdown.Outcome) *registry.StopRecord {
	rec := &registry.StopRecord{Result: string(o.Result), Left: o.Left, Spared: o.Spared, Unproven: o.Unproven}
	for _, p := range o.Procs {
		rec.Procs = append(rec.Procs, registry.StoppedProc{PID: p.PID, Role: string(p.Role), Result: string(p.Result)})
	}
	return rec
}
