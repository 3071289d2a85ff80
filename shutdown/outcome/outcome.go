// Package outcome is the vocabulary of a stop's report: how each target and
// each process of its tree ended, and why a process was part of it, with
// the bounds every grace keeps to. It is data only, with no dependency:
// the cascade (package shutdown) produces it, the daemon records it, and
// the wire protocol (package api) carries it without importing the
// cascade, so a client of the daemon does not link what stops processes.
package outcome

import (
	"fmt"
	"time"
)

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
	// Failed means the cascade could not see the target's tree (out of
	// file descriptors, /proc unreadable) and signalled nothing; Error
	// says why. The caller retries.
	Failed Result = "stop failed"
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
	// Command names the process: its recorded command line for a
	// target's leader, else its name as the snapshot saw it (no read of
	// a process's memory, which can hang on one in uninterruptible sleep).
	Command string `json:"command,omitempty"`
	// AfterMS is when it was seen gone, in milliseconds from the stop's
	// start; 0 when not seen (still alive, or not known on this OS).
	AfterMS int64 `json:"after_ms,omitempty"`
}

// Outcome is what happened to one target and its tree.
type Outcome struct {
	ID     string `json:"id"`
	PID    int    `json:"pid"`
	Result Result `json:"result"`
	// Name and Command are the target's recorded name and command line,
	// for people (filled by the caller, which keeps the records).
	Name    string `json:"name,omitempty"`
	Command string `json:"command,omitempty"`
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
	// Unproven lists processes that held the server's host channel but
	// could not be proven its own (no marker, not in its cgroup or tree,
	// not an orphan of it): left alone, since holding a pipe is no proof.
	Unproven []int `json:"unproven,omitempty"`
	// Error is why a Failed stop failed.
	Error string `json:"error,omitempty"`
}

// MaxGrace caps every grace (SIGTERM and EOF): a stop must end in bounded
// time, or it wedges what waits for it (a session's end, `daemon stop`,
// new runs in that session). Larger values are refused where they enter.
const MaxGrace = 5 * time.Minute

// CheckGrace refuses a grace the cascade does not take: negative, or
// above MaxGrace.
func CheckGrace(g time.Duration) error {
	switch {
	case g < 0:
		return fmt.Errorf("grace %v: must not be negative", g)
	case g > MaxGrace:
		return fmt.Errorf("grace %v is above the maximum of %v: a stop must end in bounded time", g, MaxGrace)
	}
	return nil
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
	if len(o.Unproven) > 0 {
		s += fmt.Sprintf("; not signalled, holding its stdout but not proven its own: %v", o.Unproven)
	}
	if len(o.Left) > 0 {
		s += fmt.Sprintf("; still alive: %v", o.Left)
	}
	if o.Error != "" {
		s += ": " + o.Error
	}
	return s
}
