package spawn

import (
	"os"
	"strings"
	"syscall"

	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// Request describes one process to start.
type Request struct {
	Argv []string
	Env  []string // the caller's whole environment; markers are added
	Dir  string
	// Stdio are the fds for the child's 0, 1 and 2. Start owns them and
	// closes them once the child has its copies (or the start failed), so
	// EOF reaches the host exactly as after a direct spawn.
	Stdio [3]*os.File

	SessionID string
	ProcID    string
	Instance  string // the daemon instance's marker, see EnvInstance
	// Host, when set, is the session's host as "PID-STARTTICKS" (the
	// EnvHost marker): a daemon that lost its store can still tell
	// whether the server's host lives.
	Host string
	// Pdeathsig, when not 0, is sent to the child when its parent dies:
	// for a shim in local mode, whose death nobody else would notice. (The
	// daemon leaves it 0: its servers must outlive it, design §2.)
	Pdeathsig syscall.Signal
	// LogWriter marks the process as a server's log writer (EnvLogWriter),
	// a marker no caller's environment can pass on.
	LogWriter bool
	// Foreground puts the child's new group in the foreground of the
	// terminal on fd 0 (for `supervisor init` with a tty).
	Foreground bool

	// CgroupFD, when not 0, is an open cgroup directory to clone the child
	// into (SysProcAttr.UseCgroupFD): it is in the cgroup from its first
	// instruction, so nothing it forks can be missed. (fd 0 is stdin,
	// never a cgroup, so 0 can mean none.)
	CgroupFD int
	// ThreadCgroups are cgroup v1 directories the child must start in (its
	// limits on a hybrid system: v1 has no clone-into). The forking thread
	// enters them for the fork, so the child is in them from its first
	// instruction, and goes back to ThreadHome (the daemon's own) after.
	// Linux only.
	ThreadCgroups, ThreadHome []string
	// Sandbox, when set, confines the child from its first instruction
	// (internal/sandbox): the forking thread confines itself, forks, and
	// is never used again; an in-place Exec confines the process before
	// its exec. A start that cannot confine fails: it never runs the
	// server unconfined.
	Sandbox *sandbox.Rules
	// Netns is a network namespace the server is forked into (its egress
	// proxy's: egress.Namespace), the forking thread entering it first
	// and never used again; nil for the daemon's. A broker is forked into
	// its upstream's, unconfined.
	Netns *os.File
}

// Started is a process that was started.
type Started struct {
	PID   int
	PGID  int
	Token proc.Token
	Path  string
	Exit  <-chan Status
}

// WithMarkers returns env with the marker variables set, replacing any the
// caller had (a shim started by a supervised process must not inherit its
// parent's identity; an inherited host marker goes too, markedEnv sets its
// own). SUPERVISOR_KEEP and SUPERVISOR_LOG_WRITER are dropped too: it is for a server's
// descendants to set, and inherited from a host it would spare them all.
// instance, when not empty, is the SUPERVISOR_INSTANCE marker.
func WithMarkers(env []string, session, procID, instance string) []string {
	out := make([]string, 0, len(env)+4)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == EnvSessionID || k == EnvProcID || k == EnvInstance || k == EnvKeep || k == EnvHost || k == EnvLogWriter {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, EnvSessionID+"="+session, EnvProcID+"="+procID)
	if instance != "" {
		out = append(out, EnvInstance+"="+instance)
	}
	return out
}

// markedEnv is the environment req's process starts with: the caller's,
// with every marker set in one copy (the host's, EnvHost, when known).
func markedEnv(req Request) []string {
	env := WithMarkers(req.Env, req.SessionID, req.ProcID, req.Instance)
	if req.Host != "" {
		env = append(env, EnvHost+"="+req.Host)
	}
	if req.LogWriter {
		env = append(env, EnvLogWriter+"=1")
	}
	return env
}
