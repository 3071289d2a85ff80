package keeper

import (
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Find lists the keepers of the instance whose state directory is
// stateDir: this user's `_keeper keep` processes that log to its LogFile.
func Find(stateDir string) []int {
	log := filepath.Join(stateDir, LogFile)
	infos, _ := proc.Scan()
	var out []int
	for _, info := range infos {
		if info.UID != os.Getuid() || info.State == 'Z' {
			continue
		}
		argv, _ := proc.Cmdline(info.PID)
		if len(argv) >= 4 && argv[1] == Command && argv[2] == "keep" && argv[3] == log {
			out = append(out, info.PID)
		}
	}
	return out
}

// Stop ends the keepers of stateDir's instance that run while no daemon
// does (one pausing between restarts, say): SIGTERM through a handle
// verified by token, then up to limit for them to go. It returns those it
// stopped.
func Stop(stateDir string, limit time.Duration) []int {
	var stopped []int
	for _, pid := range Find(stateDir) {
		tok, err := proc.TokenOf(pid)
		if err != nil {
			continue
		}
		h, err := proc.OpenHandle(pid, tok)
		if err != nil {
			continue
		}
		if h.Signal(syscall.SIGTERM) == nil && h.Wait(limit) {
			stopped = append(stopped, pid)
		}
		h.Close()
	}
	return stopped
}
