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
// SIGKILL with what is left, but only those proven the server's (orphans
// its subreaper adopted): holding a pipe, or starting after the server,
// proves nothing, and a holder not proven is reported, never signalled.
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
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/shutdown/outcome"
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
	// Cgroup is the server's own cgroup directory, if it has one, and
	// LimitCgroups the cgroup v1 directories of its limits.
	Cgroup       string
	LimitCgroups []string
	// Spared are never signalled even when they hold a channel: the shim
	// (which exits with the server) and the host.
	Spared []Proc
	// LeaderJustExited says the caller saw the leader exit moments ago
	// (reaped it, or its pidfd fired): its group number cannot have been
	// recycled while members remain, so the group is still the target's.
	// Without it, a leader that is gone keeps its group out of the
	// snapshot: the number may name a stranger's group by now.
	LeaderJustExited bool
	// RunsBefore says earlier runs carried this target's id (a shared
	// server restarted under its record): what they left behind is older
	// than the leader, so the marker scan reads every process's
	// environment for it.
	RunsBefore bool
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

// The cascade's report (Outcome, ProcOutcome, Result, Role) and the grace
// bounds are package outcome's, so that the wire protocol (api) carries
// them without importing the cascade.
type (
	Result      = outcome.Result
	Role        = outcome.Role
	ProcOutcome = outcome.ProcOutcome
	Outcome     = outcome.Outcome
)

const (
	ExitedOnEOF     = outcome.ExitedOnEOF
	ExitedOnSIGTERM = outcome.ExitedOnSIGTERM
	Killed          = outcome.Killed
	AlreadyGone     = outcome.AlreadyGone
	Unkillable      = outcome.Unkillable
	Interrupted     = outcome.Interrupted
	Failed          = outcome.Failed

	RoleLeader = outcome.RoleLeader
	RoleGroup  = outcome.RoleGroup
	RoleTree   = outcome.RoleTree
	RoleMarker = outcome.RoleMarker
	RoleCgroup = outcome.RoleCgroup
	RoleHolder = outcome.RoleHolder
)

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
	// OtherServer, when set, names the live servers outside the targets
	// by PID and token: each carries its own markers (a spawn replaces
	// inherited ones), never a target's, so its environment is not read.
	// On a machine of thousands of servers that is most of a stop's reads.
	OtherServer func(pid int, tok proc.Token) bool
	// Instance, when set, is the SUPERVISOR_INSTANCE marker a process must
	// carry to be swept through its session marker.
	Instance string
	// Progress, when set, is told each step that waits: the EOF grace,
	// SIGTERM sent, SIGKILL sent. It runs on the cascade's goroutine and
	// must not block.
	Progress func(Progress)
}

// Progress is one waiting step of a cascade.
type Progress struct {
	// Step is the phase the processes are waiting in: ExitedOnEOF (no
	// signal yet), ExitedOnSIGTERM (SIGTERM sent) or Killed (SIGKILL
	// sent).
	Step Result `json:"step"`
	// Processes is how many processes it waits for.
	Processes int `json:"processes"`
	// Wait is the longest it waits in this step.
	Wait time.Duration `json:"wait"`
	// Joined says the processes are being stopped by an earlier request,
	// which this one waits for (and shortens to Wait).
	Joined bool `json:"joined,omitempty"`
}

// String renders a step for people: "SIGTERM sent to 3 processes,
// waiting up to 5s…".
func (p Progress) String() string {
	n := plural(p.Processes, "process", "processes")
	switch {
	case p.Joined:
		return fmt.Sprintf("%s already being stopped, waiting up to %v…", n, p.Wait)
	case p.Step == ExitedOnEOF:
		return fmt.Sprintf("waiting up to %v for %s to exit on EOF…", p.Wait, n)
	case p.Step == Killed:
		return fmt.Sprintf("SIGKILL sent to %s, waiting up to %v…", n, p.Wait)
	default:
		return fmt.Sprintf("SIGTERM sent to %s, waiting up to %v…", n, p.Wait)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// DefaultGrace is the SIGTERM grace of design §6.
const DefaultGrace = 5 * time.Second

// MaxGrace caps every grace (outcome.MaxGrace).
const MaxGrace = outcome.MaxGrace

// DefaultEOFGrace is how long a dead host's servers get to exit on stdin
// EOF before any signal (design §6).
const DefaultEOFGrace = 500 * time.Millisecond

// Cascade stops sets of processes. The zero value is usable.
type Cascade struct {
	Log hclog.Logger
	// Excluded PIDs are never signalled (the daemon itself).
	Excluded []int
	// Reaper, when set, is the child subreaper the targets were started
	// under (the daemon): a process it adopted that holds a target's host
	// channel is an orphan of that target's tree, proven the target's.
	// Without it such a holder is reported, never signalled.
	Reaper int
	// AfterSignal, when set, runs once SIGTERM has gone to the targets'
	// trees: the fault-injection tests crash the daemon there, mid-stop.
	AfterSignal func()
	// ScanFault, when set, runs before each scan of the processes, and an
	// error from it fails the scan: the fault-injection tests fail stops
	// this way (as running out of fds does).
	ScanFault func() error
}
