package api

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
	"github.com/seed-86a41135/supervisor/shutdown/outcome"
)

// Protocol is the wire protocol number; a peer with another is refused.
const Protocol = 1

// Version is the supervisor release; Commit and Date are the commit it was
// built from and that commit's time. A release build sets all three at
// link time (scripts/release, -ldflags -X); see Build for the others.
var (
	Version = "0.1.0-dev"
	Commit  = ""
	Date    = ""
)

// Message types.
const (
	TypeHello   = "hello"
	TypeError   = "error"
	TypeOK      = "ok"
	TypeRun     = "run"     // shim → daemon, with 3 fds; answered by started, later exited
	TypeStarted = "started" // daemon → shim
	TypeExited  = "exited"  // daemon → shim
	// TypeExec answers a run that offered InPlace with the server's
	// command, environment and directory: the shim execs it in its own
	// place (an fd may follow: the log pipe for its stderr).
	TypeExec = "exec"
	// TypeExecFailed is the shim telling why the exec failed, before it
	// exits with the status of a failed start.
	TypeExecFailed = "exec_failed"
	// TypeNotInPlace answers a run that asked InPlaceOnly and that the
	// daemon would not exec in the shim's place (a shared or lazy server,
	// a cgroup the shim cannot enter): nothing runs for it, and the lean
	// entry hands the run to the full `supervisor run`. Nothing is
	// recorded either, but where the move into the cgroup failed after
	// the daemon predicted it would not: that intent record is left
	// failed, saying why. Its body is an Error (the reason; Code 125).
	TypeNotInPlace = "not_in_place"
	// TypeFront answers a lazy run that offered Front with the server's
	// verified lazy-start cache (a Front): the client answers its host's
	// handshake and list calls from it, with no broker and no server, and
	// comes back with a run carrying Replay and Rest on its first other
	// request. Nothing is recorded for it until then.
	TypeFront       = "front"
	TypeStopSelf    = "stop_self"
	TypePs          = "ps"
	TypeSessions    = "sessions"
	TypeSessionEnd  = "session_end"
	TypeStop        = "stop"
	TypeStatus      = "status"
	TypeDaemonStop  = "daemon_stop"
	TypeOutcomes    = "outcomes"
	TypeProcesses   = "processes"
	TypeSessionList = "session_list"
	// TypeAttach re-attaches a shim to its server after a daemon restart;
	// answered by started, later exited, like run.
	TypeAttach = "attach"
	// TypeProgress precedes the outcomes of a stop, session_end or
	// daemon_stop that asked for it (Progress set) and waits longer than
	// a second: zero or more frames, then the reply. A request without
	// Progress never gets one, so older clients read their reply first.
	TypeProgress = "progress"
)

// Msg is one frame: a type and its body.
type Msg struct {
	Type string          `json:"type"`
	Body json.RawMessage `json:"body,omitempty"`
}

// Hello opens every connection in both directions.
type Hello struct {
	Protocol int    `json:"protocol"`
	Version  string `json:"version"`
	PID      int    `json:"pid"`
	// PidNS and MntNS are the inodes of the sender's PID and mount
	// namespaces: a shim in other namespaces than its daemon (a sandboxed
	// host) cannot hand it a command line that means the same thing there,
	// and supervises its server itself (local mode).
	PidNS uint64 `json:"pid_ns,omitempty"`
	MntNS uint64 `json:"mnt_ns,omitempty"`
	// InPlace, from a daemon, says it takes a run's offer to exec the
	// server in the shim's place (RunRequest.InPlace): a shim offers only
	// then, so an older daemon still gets the three fds it expects.
	InPlace bool `json:"in_place,omitempty"`
	// InPlaceOnly, from a daemon, says it answers a run that asks
	// InPlaceOnly with not_in_place rather than starting the server any
	// other way: the lean run entry (cmd/supervisor-run) asks only such a
	// daemon.
	InPlaceOnly bool `json:"in_place_only,omitempty"`
	// Front, from a daemon, says it takes a run with what a lazy run's
	// front read (RunRequest.Replay and Rest): a run that has any goes
	// only to such a daemon.
	Front bool `json:"front,omitempty"`
}

// Error is a failed request. Code is the exit status the CLI should use.
type Error struct {
	Message string `json:"message"`
	Code    int    `json:"code,omitempty"`
	// Retry says the condition passes by itself (the daemon is stopping,
	// the session is being ended): the client may try again shortly.
	Retry bool `json:"retry,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// RunRequest asks the daemon to start a server on the shim's stdio (the
// three fds travel with the frame).
//
// Argv, Env and Cwd travel as bytes (base64 in JSON): they need not be
// UTF-8, and JSON strings would replace invalid bytes and blow control
// characters up sixfold.
type RunRequest struct {
	Argv        Bytes      `json:"argv"`
	Cwd         ByteString `json:"cwd"`
	Env         Bytes      `json:"env"`
	Name        string     `json:"name,omitempty"`
	Session     string     `json:"session"`
	Label       string     `json:"label,omitempty"`
	HostPID     int        `json:"host_pid"`
	HostToken   proc.Token `json:"host_token"`
	HostCommand string     `json:"host_command"`
	GraceMS     int64      `json:"grace_ms,omitempty"`
	// MaxInstances caps live instances per (session, Name) when Name is
	// set: nil means 1, 0 no cap. The newest wins.
	MaxInstances *int       `json:"max_instances,omitempty"`
	ShimPID      int        `json:"shim_pid"`
	ShimToken    proc.Token `json:"shim_token"`
	// Share asks for the server to be shared (design §11): the client is
	// attached to the one upstream of its server key, through a broker.
	Share bool `json:"share,omitempty"`
	// NoShare (run --share=false) keeps the server direct even where it
	// would be shared automatically (it speaks the stateless revision).
	NoShare bool `json:"no_share,omitempty"`
	// Lazy answers the handshake and list calls from a cache and starts
	// the server on the first other request; IdleMS stops it after that
	// long with nothing in flight (0: never), to start it again on the
	// next request (design §11). Either runs the client through a broker.
	Lazy   bool  `json:"lazy,omitempty"`
	IdleMS int64 `json:"idle_ms,omitempty"`
	// InPlace offers to exec the server in the shim's own place (Linux
	// with PIDFD_INFO_EXIT): a fourth fd, the shim's pidfd, comes with
	// the three of stdio. The daemon answers with exec or, where it
	// spawns the server itself after all, with started.
	InPlace bool `json:"in_place,omitempty"`
	// InPlaceOnly (with InPlace) asks for exec in place or nothing: a run
	// the daemon would start any other way is answered not_in_place
	// before anything is recorded for it. The lean run entry cannot stay
	// resident as a shim, and hands such a run to `supervisor run`.
	InPlaceOnly bool `json:"in_place_only,omitempty"`
	// Front (with Lazy) offers to answer the host from the lazy-start
	// cache in the client's own process until a request needs the server:
	// the daemon answers with front where the cache is warm and no broker
	// of the server key runs.
	Front bool `json:"front,omitempty"`
	// Replay is what the client's front consumed before this run (its
	// host's initialize among it), for the broker to read as the client's
	// own messages without answering them again; Rest is what the front
	// read after, unconsumed: the broker reads it before the client's
	// stdin.
	Replay []byte `json:"replay,omitempty"`
	Rest   []byte `json:"rest,omitempty"`
	// NoFlatten (run --flatten=false) runs a package runner's command
	// (npx, npm exec) as given instead of as the program it would run.
	NoFlatten bool `json:"no_flatten,omitempty"`
	// Limits bound the server's tree (run --memory-max, --cpu-max,
	// --pids-max), enforced in its cgroup; a run whose limits cannot be
	// enforced is refused.
	Limits *Limits `json:"limits,omitempty"`
	// Sandbox confines the server (run --sandbox, --allow-read,
	// --allow-write, --allow-env, --network): a run whose sandbox cannot
	// be enforced here is refused. NoSandbox (--sandbox=false) runs it
	// unconfined where the config would sandbox it.
	Sandbox   *sandbox.Spec `json:"sandbox,omitempty"`
	NoSandbox bool          `json:"no_sandbox,omitempty"`
	// Confines, from a shim offering InPlace, says it applies an exec
	// order's Sandbox before its exec: a daemon execs a sandboxed server
	// in place only in a shim that says so, and never runs it unconfined.
	Confines bool `json:"confines,omitempty"`
	// Given names the variables this run's parent set or changed for it:
	// where the parent is the host, its config's env block for this
	// server. A sandboxed server sees them (names only travel here; the
	// values are in Env).
	Given []string `json:"given,omitempty"`
}

// Front carries a server's lazy-start cache (broker.Cache, verified by
// the daemon) to a client that answers from it.
type Front struct {
	Cache json.RawMessage `json:"cache"`
}

// Exec tells the shim to become its server: it sets the marker
// environment, enters its own process group and working directory, and
// execs Argv. The daemon has moved it into the server's cgroup already
// and watches it by pidfd from here.
type Exec struct {
	ID        string     `json:"id"`
	Argv      Bytes      `json:"argv"`
	Cwd       ByteString `json:"cwd"`
	Env       Bytes      `json:"env"` // without the markers, which the shim adds
	Session   string     `json:"session"`
	Instance  string     `json:"instance,omitempty"`
	Host      string     `json:"host,omitempty"`
	LogStderr bool       `json:"log_stderr,omitempty"` // an fd follows: stderr goes to it
	// Sandbox is what the shim confines itself to before the exec
	// (RunRequest.Confines), nil for none.
	Sandbox *sandbox.Rules `json:"sandbox,omitempty"`
}

// ExecFailed is why a shim could not exec its server.
type ExecFailed struct {
	Code    int    `json:"code"` // the status the shim exits with
	Message string `json:"message"`
}

// Started answers a run request once the server runs.
type Started struct {
	ID      string     `json:"id"`
	PID     int        `json:"pid"`
	Token   proc.Token `json:"token"`
	Session string     `json:"session"`
	// Shared says the client was attached to a shared server's broker
	// (PID and Token are the broker's), whoever asked for it: the run, the
	// config or the daemon, for a server speaking the stateless revision.
	Shared bool `json:"shared,omitempty"`
}

// Exited tells the shim how its server ended.
type Exited struct {
	ExitCode int    `json:"exit_code"` // what the shim exits with
	Code     int    `json:"code"`
	Signal   string `json:"signal,omitempty"`
	// Unknown says the status could not be known: the server was
	// re-adopted after a daemon restart and is nobody's child we can wait
	// for.
	Unknown bool `json:"unknown,omitempty"`
}

// Attach re-attaches a shim to the server it started, after the daemon
// connection dropped (a daemon restart or crash). The server is named by
// id, PID and creation token; the session fields let a daemon whose store
// was lost reopen the session and watch its host again.
type Attach struct {
	ID        string     `json:"id"`
	PID       int        `json:"pid"`
	Token     proc.Token `json:"token"`
	ShimPID   int        `json:"shim_pid"`
	ShimToken proc.Token `json:"shim_token"`
	GraceMS   int64      `json:"grace_ms,omitempty"`

	Session     string     `json:"session"`
	Label       string     `json:"label,omitempty"`
	HostPID     int        `json:"host_pid"`
	HostToken   proc.Token `json:"host_token"`
	HostCommand string     `json:"host_command"`
}

// DaemonStop asks the daemon to exit. KeepProcesses leaves every server
// running for the next daemon to re-adopt (an upgrade); otherwise every
// session is stopped first.
type DaemonStop struct {
	KeepProcesses bool `json:"keep_processes,omitempty"`
	// GraceMS is the SIGTERM grace of the sessions' stop, and the most a
	// stop under way still gets; 0: the daemon's default.
	GraceMS int64 `json:"grace_ms,omitempty"`
	// Progress asks for progress frames (TypeProgress).
	Progress bool `json:"progress,omitempty"`
}

// Progress is one step of a long stop, for the client to show while it
// waits.
type Progress struct {
	Message string `json:"message"`
}

// GraceOf is a request's grace, refused when the cascade would not take
// it (negative, or above outcome.MaxGrace); 0 means the default.
func GraceOf(ms int64) (time.Duration, error) {
	if ms > outcome.MaxGrace.Milliseconds() {
		return 0, fmt.Errorf("grace of %d ms is above the maximum of %v: a stop must end in bounded time", ms, outcome.MaxGrace)
	}
	g := time.Duration(ms) * time.Millisecond
	return g, outcome.CheckGrace(g)
}

// Recovery summarizes a daemon's reconcile at start (design §7).
type Recovery struct {
	At            string  `json:"at"`
	Adopted       int     `json:"adopted"`
	Lost          int     `json:"lost"`
	Stopped       int     `json:"stopped"`
	SessionsEnded int     `json:"sessions_ended"`
	FilesRemoved  int     `json:"files_removed"`
	DurationMS    float64 `json:"duration_ms"`
	// StoreRebuilt is set when the registry file could not be read at
	// start: it was moved aside and the registry rebuilt from the markers
	// of the running processes.
	StoreRebuilt *StoreRebuilt `json:"store_rebuilt,omitempty"`
}

// StoreRebuilt says why the registry file was unreadable and where it
// was kept for the user to inspect.
type StoreRebuilt struct {
	MovedTo string `json:"moved_to"`
	Reason  string `json:"reason"`
}

// String is the recovery as status and `daemon restart` print it.
func (r Recovery) String() string {
	return fmt.Sprintf("%d adopted, %d lost, %d stopped, %d sessions ended, %d files removed in %.1f ms",
		r.Adopted, r.Lost, r.Stopped, r.SessionsEnded, r.FilesRemoved, r.DurationMS)
}

// StopSelf asks, on a run connection, to stop that connection's server.
type StopSelf struct {
	GraceMS int64 `json:"grace_ms,omitempty"`
	// Interrupt: the shim got SIGINT (Ctrl-C in its terminal). The server,
	// in a process group of its own, never saw it: it gets SIGINT first,
	// as a direct child in the terminal's foreground group would, and the
	// stop cascade after the grace only if it is still running.
	Interrupt bool `json:"interrupt,omitempty"`
}

// PsRequest lists processes.
type PsRequest struct {
	All     bool   `json:"all"`
	Session string `json:"session,omitempty"`
}

// Processes answers ps.
type Processes struct {
	Processes []Process `json:"processes"`
	// More says another processes frame follows: a long table is sent in
	// pages so no frame nears MaxFrame (read them with Client.Processes).
	More bool `json:"more,omitempty"`
}

// PsPages splits records into pages whose frames stay well under
// MaxFrame: a record's size is bounded by a fixed part plus its argv and
// error at worst-case JSON escaping (six bytes a byte).
func PsPages(procs []Process) [][]Process {
	const budget = MaxFrame / 2
	var pages [][]Process
	start, size := 0, 0
	for i, p := range procs {
		n := 2048 + 6*len(p.Error) + 6*len(p.Cwd)
		for _, a := range p.Argv {
			n += 6*len(a) + 8
		}
		if i > start && size+n > budget {
			pages = append(pages, procs[start:i])
			start, size = i, 0
		}
		size += n
	}
	return append(pages, procs[start:])
}

// SessionsRequest lists sessions.
type SessionsRequest struct {
	All bool `json:"all"`
}

// SessionInfo is a session with its process count (the `sessions --json`
// contract of design §8).
type SessionInfo struct {
	Session
	Processes int `json:"processes"`
	// Shared counts the session's clients of shared servers (run --share):
	// each is relayed by a broker, not a process of the session's own.
	Shared int `json:"shared"`
	// Usage sums the session's running servers (shared servers apart:
	// they are no one session's).
	Usage *Usage `json:"usage,omitempty"`
}

// SessionList answers sessions.
type SessionList struct {
	Sessions []SessionInfo `json:"sessions"`
}

// SessionEndRequest ends a session through the cascade.
type SessionEndRequest struct {
	ID      string `json:"id"`
	GraceMS int64  `json:"grace_ms,omitempty"`
	// Progress asks for progress frames (TypeProgress).
	Progress bool `json:"progress,omitempty"`
}

// StopRequest stops one process by id or name.
type StopRequest struct {
	Target  string `json:"target"`
	GraceMS int64  `json:"grace_ms,omitempty"`
	// Progress asks for progress frames (TypeProgress).
	Progress bool `json:"progress,omitempty"`
}

// RestartRequest asks the daemon to stop the server Target (an id or a
// name) and start it again as it was started.
type RestartRequest struct {
	Target  string `json:"target"`
	GraceMS int64  `json:"grace_ms,omitempty"`
}

// Restarted answers restart: the server's id, its process before and now.
type Restarted struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	OldPID int    `json:"old_pid"`
	PID    int    `json:"pid"`
}

// Outcomes answers session_end and stop.
type Outcomes struct {
	Outcomes []outcome.Outcome `json:"outcomes"`
}

// Status answers status.
type Status struct {
	PID       int             `json:"pid"`
	Version   string          `json:"version"`
	Protocol  int             `json:"protocol"`
	StartedAt string          `json:"started_at"`
	Uptime    string          `json:"uptime"`
	StateDir  string          `json:"state_dir"`
	Socket    string          `json:"socket"`
	Features  map[string]bool `json:"features"`
	// Limits says, for each facility this daemon runs without, why (no
	// subreaper or cgroups on macOS, say) and what stands in for it.
	Limits []string `json:"limits,omitempty"`
	// ResourceLimits says, for memory_max, cpu_max and pids_max, how this
	// daemon enforces them ("cgroup v2", "cgroup v1") or why it cannot.
	ResourceLimits map[string]string `json:"resource_limits,omitempty"`
	// Sandbox says what this machine can enforce of a server's sandbox
	// (run --sandbox), in a line.
	Sandbox   string `json:"sandbox,omitempty"`
	Sessions  int    `json:"sessions"`
	Processes int    `json:"processes"`
	Records   int    `json:"records"`
	// Recovery is the summary of the reconcile this daemon ran at start.
	Recovery *Recovery `json:"recovery,omitempty"`
	// LogHubs are the processes copying servers' output into their logs,
	// with how many pipes each copies.
	LogHubs []LogHubStatus `json:"log_hubs,omitempty"`
	// Restarter says what starts this daemon again after a crash: its
	// keeper (with its pid), a service manager, or nothing until the next
	// supervisor command.
	Restarter string `json:"restarter,omitempty"`
	// BinaryVersion is the version of the CLI asking (filled in by the
	// CLI): a daemon older than the binary is restarted with
	// `supervisor daemon restart`.
	BinaryVersion string `json:"binary_version,omitempty"`
}

// Bytes is a list of strings carried byte-exact (base64) on the wire.
type Bytes []string

// MarshalJSON encodes each string as base64 bytes.
func (b Bytes) MarshalJSON() ([]byte, error) {
	raw := make([][]byte, len(b))
	for i, s := range b {
		raw[i] = []byte(s)
	}
	return json.Marshal(raw)
}

// UnmarshalJSON decodes base64 bytes.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	var raw [][]byte
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*b = make(Bytes, len(raw))
	for i, r := range raw {
		(*b)[i] = string(r)
	}
	return nil
}

// ByteString is a string carried byte-exact (base64) on the wire.
type ByteString string

// MarshalJSON encodes the string as base64 bytes.
func (s ByteString) MarshalJSON() ([]byte, error) { return json.Marshal([]byte(s)) }

// UnmarshalJSON decodes base64 bytes.
func (s *ByteString) UnmarshalJSON(data []byte) error {
	var raw []byte
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*s = ByteString(raw)
	return nil
}

// Millis converts a duration to the wire's milliseconds, rounding up so a
// positive duration never becomes 0 (which means "the default").
func Millis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Ensure, breaker and log message types.
const (
	TypeEnsure       = "ensure"
	TypeEnsured      = "ensured"
	TypeBreakers     = "breakers"
	TypeBreakerList  = "breaker_list"
	TypeBreakerReset = "breaker_reset"
	TypeRestart      = "restart"   // answered by restarted
	TypeRestarted    = "restarted" // daemon → client
)

// EnsureRequest asks for a healthy shared server on Port, started from the
// embedded run request's command when none runs. The embedded request
// carries no fds: a shared server's stdin is /dev/null and its output goes
// to its log.
type EnsureRequest struct {
	RunRequest
	Port         int    `json:"port"`
	Health       string `json:"health"`
	TimeoutMS    int64  `json:"timeout_ms,omitempty"`
	LingerMS     int64  `json:"linger_ms,omitempty"`
	IntervalMS   int64  `json:"interval_ms,omitempty"`
	AdoptForeign bool   `json:"adopt_foreign,omitempty"`
}

// Ensured answers ensure.
type Ensured struct {
	ID      string `json:"id"`
	PID     int    `json:"pid"`
	Port    int    `json:"port"`
	Name    string `json:"name"`
	Health  string `json:"health"`
	Started bool   `json:"started"` // this call started it
}

// BreakerList answers breakers and breaker_reset.
type BreakerList struct {
	Breakers []BreakerState `json:"breakers"`
}

// BreakerResetRequest closes the breakers with this key or name.
type BreakerResetRequest struct {
	Target string `json:"target"`
}
