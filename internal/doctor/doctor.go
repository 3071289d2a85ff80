// Package doctor owns auditing a machine for leaked MCP servers and stale
// supervisor files: untracked MCP-looking processes whose host is gone,
// processes carrying this instance's markers that its daemon has no record
// of, lock, socket and pid files nobody holds, open circuit breakers, a
// daemon running another version than this binary, and shadow installs of
// `supervisor` on PATH. Fix repairs only what is provably safe: it stops
// orphans through the stop cascade and removes stale files. It never
// starts a daemon, never kills by name, and never touches anything it did
// not first report.
//
// Host configs whose stdio servers are not wrapped by `supervisor run`, or
// whose wrapped servers run a supervisor command that does not resolve
// (not on PATH, gone), are read through the hosts package (reported, never
// fixed here: `supervisor install` does that).
//
// # What counts as an orphan
//
// A process of this uid whose argv looks like an MCP server (LooksLikeMCP),
// not carrying another instance's markers, and whose first ancestor that is
// not a launcher or shell (session.IsLauncher: sh, bash, env, npx, uv, node
// running npm, ...) is PID 1 or an init-like reaper (systemd, init, tini,
// dumb-init, docker-init, catatonit): its host died and it was re-parented.
//
// Fix stops an orphan only when it is provably an MCP server: its argv, or
// the argv of a launcher between it and the reaper, names a known MCP
// package or binary (ProvablyMCP, one documented list). One that looks
// like MCP by name only (`minecraft-mcpe-backup.py`) is reported with
// Stoppable false and left to the user. Processes that are provably ours
// (a supervisor marker, hence a possible record) are never orphans: they
// are the daemon's to adopt or stop.
// A process with a `supervisor daemon` or `supervisor init` among its
// ancestors is tracked, not orphaned; so is one whose SUPERVISOR_PROC_ID the
// running daemon knows. Of a leaked chain (npm exec → sh → node) only the
// top is reported: stopping it through the cascade takes its tree.
//
// # Caveats
//
// Two refinements keep processes that were meant to run under a reaper off
// the list: a process in a systemd `.service` cgroup whose reaper is
// systemd is that service's (run on purpose, not leaked), and a process
// started within two seconds of its reaper is the reaper's own command (a
// container's entrypoint under tini). Conversely an MCP server started on
// purpose with nohup or setsid from a shell that has since exited looks
// exactly like a leaked one, and is reported as such.
//
// A process that carries another instance's SUPERVISOR_INSTANCE marker
// belongs to that instance's daemon, which adopts or stops it when it
// starts; this doctor can only ask its own daemon and leaves it out.
//
// Lock files are checked with flock(LOCK_EX|LOCK_NB) on a fresh open: the
// probe holds the lock for a moment. It is taken while holding start.lock,
// which every auto-start of a daemon takes first, so only a daemon started
// by hand (`daemon --foreground`) in that same moment can find the
// singleton lock taken and exit. While a daemon answers, unheld lock files
// are its working files (the kernel drops a flock with its holder, so an
// unheld one misleads nobody) and are not reported.
package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Kind names what a finding is about. The names are a contract of
// `doctor --json`.
type Kind string

const (
	// KindOrphan is an untracked MCP-looking process whose host is gone.
	KindOrphan Kind = "orphan"
	// KindMarkerWithoutRecord is a process carrying this instance's
	// SUPERVISOR_PROC_ID that the daemon has no record of.
	KindMarkerWithoutRecord Kind = "marker-without-record"
	// KindStaleFile is a lock, socket or pid file left by a process that
	// is gone.
	KindStaleFile Kind = "stale-file"
	// KindBreakerOpen is an open circuit breaker.
	KindBreakerOpen Kind = "breaker-open"
	// KindDaemonOlder is a running daemon of another version than this
	// binary (an in-place upgrade leaves old code running).
	KindDaemonOlder Kind = "daemon-older"
	// KindDaemonUnreachable is a daemon that accepts connections but does
	// not answer the requests the audit needs.
	KindDaemonUnreachable Kind = "daemon-unreachable"
	// KindShadowInstall is more than one distinct `supervisor` on PATH.
	KindShadowInstall Kind = "shadow-install"
)

// Finding is one problem the audit found.
type Finding struct {
	Kind     Kind   `json:"kind"`
	PID      int    `json:"pid"` // 0 when the finding is not about a process
	Path     string `json:"path"`
	Evidence string `json:"evidence"`
	// Fix says what repairs it, whether or not Fix can do it.
	Fix   string `json:"fix"`
	Fixed bool   `json:"fixed"`
	// Stoppable says Fix may stop the process: an orphan whose argv, or a
	// launcher's above it, names a known MCP server (ProvablyMCP). An
	// orphan that looks like MCP by name only is reported, never stopped.
	Stoppable bool `json:"stoppable"`

	token  proc.Token // an orphan's creation token at the audit
	remove bool       // a stale file Fix may remove
	what   string     // a short description for Fix's report
}

// Doctor audits one daemon instance and the machine around it. Only Paths
// is required; zero fields take the defaults documented on them.
type Doctor struct {
	Paths api.Paths
	// Version is this binary's version; default api.Version.
	Version string
	// Getenv reads PATH for the shadow-install check, and HOME and the
	// hosts' variables for the host check; default os.Getenv.
	Getenv func(string) string
	// Executable is this binary, named in shadow-install evidence;
	// default os.Executable().
	Executable string
	// Self is the doctor's own PID: it and its ancestors are never
	// findings; default os.Getpid().
	Self int
	// OnlyPIDs, when not empty, limits the process checks (orphan and
	// marker-without-record), and so what Fix may stop, to these PIDs.
	// The whole process table is still read to judge their ancestry. Tests
	// on shared machines use it so they judge only processes they planted.
	OnlyPIDs []int
	// Grace is the SIGTERM grace Fix gives an orphan; default 2 s.
	Grace time.Duration
	// DialTimeout bounds each exchange with the daemon; default 3 s.
	DialTimeout time.Duration
}

func (d *Doctor) version() string {
	if d.Version != "" {
		return d.Version
	}
	return api.Version
}

func (d *Doctor) getenv(k string) string {
	if d.Getenv != nil {
		return d.Getenv(k)
	}
	return os.Getenv(k)
}

func (d *Doctor) self() int {
	if d.Self > 0 {
		return d.Self
	}
	return os.Getpid()
}

func (d *Doctor) grace() time.Duration {
	if d.Grace > 0 {
		return d.Grace
	}
	return 2 * time.Second
}

func (d *Doctor) dialTimeout() time.Duration {
	if d.DialTimeout > 0 {
		return d.DialTimeout
	}
	return 3 * time.Second
}

func (d *Doctor) executable() string {
	if d.Executable != "" {
		return d.Executable
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return exe
}

func (d *Doctor) inScope(pid int) bool {
	if len(d.OnlyPIDs) == 0 {
		return true
	}
	for _, p := range d.OnlyPIDs {
		if p == pid {
			return true
		}
	}
	return false
}

// Check runs every audit and returns the findings, daemon first, then
// processes, files, breakers, PATH and host configs. It fails only when the
// process table cannot be read; a daemon that misbehaves is itself a
// finding.
func (d *Doctor) Check(ctx context.Context) ([]Finding, error) {
	findings := []Finding{}
	dm := d.probeDaemon(ctx)
	findings = append(findings, dm.findings...)
	procs, err := d.checkProcesses(dm)
	if err != nil {
		return nil, err
	}
	findings = append(findings, procs...)
	findings = append(findings, d.checkFiles(dm)...)
	for _, b := range dm.openBreakers {
		retry := "when its cooldown ends"
		if !b.RetryAt.IsZero() {
			retry = "at " + b.RetryAt.Local().Format(time.RFC3339)
		}
		findings = append(findings, Finding{
			Kind: KindBreakerOpen,
			Evidence: fmt.Sprintf("circuit breaker %s (%s, command %q) is open after %d failures in a row, last: %s; it lets one trial through %s",
				b.Key, b.Name, b.Argv, b.Failures, b.LastReason, retry),
			Fix: fmt.Sprintf("fix the cause, then `supervisor breaker reset %s`", b.Key),
		})
	}
	findings = append(findings, d.checkShadow()...)
	findings = append(findings, d.checkHosts()...)
	return findings, nil
}

// Fix repairs the findings it can prove safe to repair, marks them Fixed
// and returns one line per action, in order. It stops stoppable orphans
// (each re-verified by token, argv and ancestry right before the cascade),
// says why it left the others alone, and removes stale files (only while
// it holds the daemon's singleton lock itself).
// Everything else it leaves to the user, as the findings' Fix says.
func (d *Doctor) Fix(ctx context.Context, findings []Finding) []string {
	var did []string
	var fresh *table // one snapshot, taken for the first orphan, judges them all
	for i := range findings {
		f := &findings[i]
		if f.Kind != KindOrphan {
			continue
		}
		if !f.Stoppable {
			did = append(did, fmt.Sprintf("left pid %d (%s) alone: it looks like MCP by name only (no known MCP package or binary in its argv or its launchers'); not stopped: kill %d yourself if it is yours",
				f.PID, f.what, f.PID))
			continue
		}
		if fresh == nil {
			t, err := readTable()
			if err != nil {
				did = append(did, fmt.Sprintf("left the orphans alone: %v", err))
				break
			}
			fresh = t
		}
		did = append(did, d.stopOrphan(ctx, fresh, f))
	}
	return append(did, d.removeStale(findings)...)
}

// Unfixed counts the findings that remain.
func Unfixed(findings []Finding) int {
	n := 0
	for _, f := range findings {
		if !f.Fixed {
			n++
		}
	}
	return n
}

// rel names a file of the state directory relative to it, for messages.
func (d *Doctor) rel(path string) string {
	if r, err := filepath.Rel(d.Paths.StateDir, path); err == nil && filepath.IsLocal(r) {
		return r
	}
	return path
}
