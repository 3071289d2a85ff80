package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/api"
)

// How servers' output reaches their logs.
//
// A shared server's stdout and stderr, and a stdio server's stderr, go to a
// pipe read by the log hub, `supervisor _log-writer`: one process of its
// own for all of the daemon's servers (logwriter.Hub, loghub.Hubs). It
// writes each log and rotates it by rename before a write would pass the
// cap: the live file stays within the cap, and only what falls off the end
// of the kept backups is lost. For a stdio server it also copies
// everything to the host's stderr, which it holds instead of the server
// (stdin and stdout are still the host's own fds).
//
// Why a process and not a goroutine of the daemon: the servers outlive the
// daemon (design §2). A pipe read by the daemon alone would break when the
// daemon dies or restarts, and the server's next write would kill it with
// SIGPIPE. The hub is the daemon's child, so it survives the daemon, goes
// on copying, and re-joins the next daemon on its socket. The daemon in
// turn keeps a duplicate of every pipe's read end, so a hub that dies
// costs no server a SIGPIPE either: its pipes go to a new hub. Only both
// dying at once cuts the servers' output. The hub ignores SIGTERM, SIGINT
// and SIGHUP and lets a pipe go at its EOF, once the server and everything
// that inherited its output are gone, after their last line. It carries
// SUPERVISOR_LOG_WRITER=1 (and the instance marker), by which stops,
// recovery and doctor never take it for a server.
//
// Where no hub can be started (Windows, or the binary cannot be found), a
// shared server writes its log file itself and the daemon rotates it by
// copy and truncate (logrotate.go), and a stdio server's stderr is the
// host's, uncaptured.

// errLogWriterUnsupported says this platform has no log writers.
var errLogWriterUnsupported = errors.New("log writers are not supported on this platform")

// logCap is the cap and the number of backups of every server log.
func (d *Daemon) logCap() (maxBytes int64, keep int) {
	st := d.settings()
	return int64(st.LogMaxMB) << 20, st.LogBackups
}

// RunLogPath is where a stdio server's stderr is captured: by name and
// process id, as one name runs in many sessions at once.
func RunLogPath(p api.Paths, name, id string) string {
	return filepath.Join(p.StateDir, "logs", "run", safeName(name)+"@"+id+".log")
}

// RunLogPathsByName lists the stdio servers' logs of name, newest first
// (by last write).
func RunLogPathsByName(p api.Paths, name string) []string {
	m, _ := filepath.Glob(filepath.Join(p.StateDir, "logs", "run", safeName(name)+"@*.log"))
	mtime := map[string]time.Time{}
	for _, path := range m {
		if st, err := os.Stat(path); err == nil {
			mtime[path] = st.ModTime()
		}
	}
	sort.SliceStable(m, func(i, j int) bool { return mtime[m[i]].After(mtime[m[j]]) })
	return m
}

// runLogID is the process id a stdio server's log (or backup) is named by.
func runLogID(base string) (string, bool) {
	_, rest, ok := strings.Cut(base, "@")
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, ".log")
	return id, ok && id != ""
}

// pruneRunLogs removes the logs (and backups) of stdio servers not written
// since before whose process is not kept (keep says which ids are: the
// live ones and those still listed), so logs go with their records.
func pruneRunLogs(p api.Paths, before time.Time, keep func(id string) bool) (int, error) {
	dir := filepath.Join(p.StateDir, "logs", "run")
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("list %s: %w", dir, err)
	}
	removed := 0
	for _, e := range entries {
		id, ok := runLogID(e.Name())
		if !ok || keep(id) {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(before) {
			continue
		}
		if os.Remove(filepath.Join(dir, e.Name())) == nil {
			removed++
		}
	}
	return removed, nil
}
