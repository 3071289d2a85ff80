package sharing

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/lockfile"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/spawn"
)

// Session is the pseudo session a shared server's record lives in: it
// belongs to no host, and recovery tells a shared server by it.
func Session(port int) string { return fmt.Sprintf("shared-%d", port) }

// LockPort takes <state>/ports/<port>.lock, the cross-process half of the
// per-port mutex: the kernel releases it when its holder dies, so there is
// no stale lock to time out.
func LockPort(p api.Paths, port int) (unlock func(), err error) {
	dir := filepath.Join(p.StateDir, "ports")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	return lockfile.Hold(filepath.Join(dir, fmt.Sprintf("%d.lock", port)))
}

// Stranger reports a listener on port that does not carry the marker of
// process id, if there is one: a health check passes for whoever listens.
func Stranger(port int, id string) (proc.Listener, bool) {
	for _, l := range proc.PortListeners(port) {
		if l.PID == 0 {
			return l, true
		}
		env, err := proc.Environ(l.PID)
		if v, _ := proc.EnvValue(env, spawn.EnvProcID); err != nil || v != id {
			return l, true
		}
	}
	return proc.Listener{}, false
}

// ForeignError is the refusal to start a server on a port listener l
// holds, saying what the user can do.
func ForeignError(port int, l proc.Listener) error {
	if l.PID == 0 {
		return fmt.Errorf("port %d is already bound by a process supervisor cannot see (another user's?); not starting another", port)
	}
	return fmt.Errorf("port %d is held by pid %d (%s), which supervisor does not own; not starting another: stop it, or pass --adopt-foreign to use it if its health check passes",
		port, l.PID, strings.Join(l.Argv, " "))
}
