// Package spawn owns starting processes and collecting their exit statuses:
// command resolution, fd hand-over, process groups, markers, and the one
// central reaper of a subreaper daemon.
//
// # Caveats
//
// Only the Reaper may wait for children. A subreaper that lets anything else
// call wait (exec.Cmd.Wait, os.Process.Wait) loses statuses to whichever
// waiter runs first — the classic Go subreaper trap. Code running inside the
// daemon therefore never uses os/exec to run a child.
package spawn

// Marker environment variables given to every spawned process. Descendants
// inherit them, so a process that escaped its group with setsid can still be
// found and proven ours (design §4).
const (
	EnvSessionID = "SUPERVISOR_SESSION_ID"
	EnvProcID    = "SUPERVISOR_PROC_ID"
	// EnvInstance names the daemon instance (its state directory), so one
	// instance's session sweep never takes another's processes.
	EnvInstance = "SUPERVISOR_INSTANCE"
	// EnvHost is the session's host as PID-STARTTICKS.
	EnvHost = "SUPERVISOR_HOST"
	// EnvKeep=1, set by a server's descendant, spares it from the sweep.
	EnvKeep = "SUPERVISOR_KEEP"
	// EnvLogWriter=1 marks the `supervisor _log-writer` between a server
	// and its log: it carries its server's markers (it is of its tree),
	// but ends by itself at EOF, after the tree's last line, so stops leave
	// it alone and recovery never takes it for the server.
	EnvLogWriter = "SUPERVISOR_LOG_WRITER"
)
