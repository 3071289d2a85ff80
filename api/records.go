package api

import (
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// The types below are the wire's own copies of what the daemon keeps in
// its registry. They are separate so that a change to what is stored is
// not silently a change to the protocol and to the `--json` contracts
// built on it: the daemon converts its records into these (and a run's
// Limits back) in one place, internal/daemon's wire.go, and a test there
// checks that each converts to the same JSON as the record it comes from.
// A field meant to differ between the two is a deliberate exclusion in
// that test.

// ProcState is a process's lifecycle state as ps and events show it.
type ProcState string

// The process states (registry.ProcState's, by the same names).
const (
	StateStarting ProcState = "starting"
	StateRunning  ProcState = "running"
	StateStopping ProcState = "stopping"
	StateExited   ProcState = "exited"
	StateFailed   ProcState = "failed"
	StateLost     ProcState = "lost"
)

// Final reports whether no further transition can leave s: a process in
// it is over, whatever waits on it can stop waiting.
func (s ProcState) Final() bool {
	return s == StateExited || s == StateFailed || s == StateLost
}

// SessionState is a session's lifecycle state as sessions shows it.
type SessionState string

// The session states (registry.SessionState's, by the same names).
const (
	SessionActive SessionState = "active"
	SessionEnding SessionState = "ending"
	SessionEnded  SessionState = "ended"
)

// Session is a session as the sessions reply carries it (embedded in
// SessionInfo): one running agent host.
type Session struct {
	ID          string       `json:"id"`
	Label       string       `json:"label,omitempty"` // the host's own session id, e.g. CLAUDE_CODE_SESSION_ID
	HostPID     int          `json:"host_pid"`
	HostToken   proc.Token   `json:"host_token"`
	HostCommand string       `json:"host_command"`
	State       SessionState `json:"state"`
	StartedAt   time.Time    `json:"started_at"`
	EndedAt     *time.Time   `json:"ended_at"`
	EndReason   string       `json:"end_reason,omitempty"`
}

// Process is one supervised process as the ps reply carries it. It has
// argv but never environment values: those hold secrets.
//
// The JSON names are the `ps --json` contract of design §8: scripts use
// them, so the contract fields are always present (null when unset).
type Process struct {
	ID        string     `json:"id"`
	Session   string     `json:"session"`
	Name      string     `json:"name"`
	Argv      []string   `json:"argv"`
	Path      string     `json:"path,omitempty"` // the resolved executable
	Cwd       string     `json:"cwd"`
	PID       int        `json:"pid"`
	PGID      int        `json:"pgid"`
	Token     proc.Token `json:"token"`
	ShimPID   int        `json:"shim_pid,omitempty"`
	ShimToken proc.Token `json:"shim_token"`
	// InPlace: the shim exec'd the server in its own place (Linux): PID
	// is the host's own child, and there is no shim to spare or watch.
	InPlace   bool       `json:"in_place,omitempty"`
	State     ProcState  `json:"state"`
	StartedAt time.Time  `json:"started_at"`
	ExitedAt  *time.Time `json:"exited_at"`
	ExitCode  *int       `json:"exit_code"`
	Signal    string     `json:"signal"`
	Error     string     `json:"error,omitempty"` // why it failed or was lost
	Port      int        `json:"port"`
	Shared    bool       `json:"shared"`
	Health    string     `json:"health"`
	// HealthCheck is a shared server's --health (none, tcp, http://...).
	HealthCheck string `json:"health_check,omitempty"`
	Restarts    int    `json:"restarts"`
	// Cgroup is the server's own cgroup directory, when cgroups are in use.
	Cgroup string `json:"cgroup,omitempty"`
	// Stop says how the process and its tree were stopped, last time the
	// stop cascade ran for it.
	Stop *StopRecord `json:"stop,omitempty"`
	// GraceMS is the process's own --grace.
	GraceMS int64 `json:"grace_ms,omitempty"`
	// Stdio holds the inodes of the host stdio channels the process was
	// given.
	Stdio []StdioInode `json:"stdio,omitempty"`
	// Broker marks a shared server's broker (design §11): the process
	// relays for Clients, and its upstream runs as its child.
	Broker bool `json:"broker,omitempty"`
	// BrokerKey is a broker's server key.
	BrokerKey string `json:"broker_key,omitempty"`
	// ServerKey and Fingerprint are what a broker runs (BrokerKey is a
	// lazy client's own broker's key), Lazy and IdleMS how (run --lazy,
	// --idle).
	ServerKey   string `json:"server_key,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Lazy        bool   `json:"lazy,omitempty"`
	IdleMS      int64  `json:"idle_ms,omitempty"`
	// Unsafe says why a broker's server is not safely shareable.
	Unsafe string `json:"unsafe,omitempty"`
	// Relayed counts the messages a broker relayed, both ways.
	Relayed uint64 `json:"relayed,omitempty"`
	// Clients are the clients attached to a broker now.
	Clients []BrokerClient `json:"clients,omitempty"`
	// Usage is what a running process costs now.
	Usage *Usage `json:"usage,omitempty"`
	// Limits bound the process's tree (run --memory-max, ...);
	// LimitCgroups are the cgroup v1 directories that hold them on a
	// hybrid system.
	Limits       *Limits  `json:"limits,omitempty"`
	LimitCgroups []string `json:"limit_cgroups,omitempty"`
	// LimitHit lists the limits the kernel enforced on it: memory_max
	// (the OOM killer killed a process of it), pids_max (a fork failed).
	LimitHit []string `json:"limit_hit,omitempty"`
	// Sandboxed says the server runs confined (run --sandbox): the daemon
	// refuses every request from its processes (a sandboxed server that
	// could ask the daemon to run a command would run it unconfined).
	Sandboxed bool `json:"sandboxed,omitempty"`
	// Egress is the egress proxy a server with a network list runs
	// behind.
	Egress *Egress `json:"egress,omitempty"`
}

// Egress is a server's egress proxy: the hosts it admits, its port, and
// whether it is in the server's own network namespace.
type Egress struct {
	Hosts []string `json:"hosts"`
	Port  int      `json:"port"`
	Netns bool     `json:"netns,omitempty"`
}

// Limits are a server's resource limits as a run request asks for them
// and ps shows them; zero leaves one unbounded.
type Limits struct {
	MemoryMax uint64  `json:"memory_max,omitempty"` // bytes
	CPUMax    float64 `json:"cpu_max,omitempty"`    // CPUs
	PidsMax   int64   `json:"pids_max,omitempty"`
}

// Usage is what a server (its whole tree) or a session costs at a moment,
// as ps and sessions show it.
type Usage struct {
	// MemoryBytes is the cgroup's memory charge, or, where the cgroup does
	// not account memory, the summed resident memory of the processes
	// (MemorySource "cgroup" or "procs"; "" when it could not be read).
	MemoryBytes  uint64 `json:"memory_bytes"`
	MemorySource string `json:"memory_source"`
	// CPUPercent is of one CPU: since the daemon's previous sample of the
	// process (at most a minute before), else since it started.
	CPUPercent float64 `json:"cpu_percent"`
	CPUSeconds float64 `json:"cpu_seconds"`
	Procs      int     `json:"procs"`
}

// BrokerClient is one client attached to a broker (a host's session), as
// a broker's Process lists it. It is not named Client: that is the
// daemon connection.
type BrokerClient struct {
	ID      string    `json:"id"`
	Session string    `json:"session"`
	Since   time.Time `json:"since"`
}

// StdioInode is one host stdio channel handed to a server, as its Process
// lists it.
type StdioInode struct {
	Fd    int    `json:"fd"`
	Kind  string `json:"kind"` // "pipe", "socket", "file", "tty", ...
	Inode uint64 `json:"inode"`
}

// StopRecord is the outcome of the stop cascade for one process, as its
// Process carries it.
type StopRecord struct {
	Result string        `json:"result"`
	Procs  []StoppedProc `json:"procs,omitempty"`
	Left   []int         `json:"left,omitempty"`
	Spared []int         `json:"spared,omitempty"`
	// Unproven held the server's host channel without proof of descent
	// from it: never signalled (shutdown.Outcome.Unproven).
	Unproven []int `json:"unproven,omitempty"`
}

// StoppedProc is one process of a stopped tree, in a StopRecord.
type StoppedProc struct {
	PID    int    `json:"pid"`
	Role   string `json:"role"`
	Result string `json:"result"`
}

// Event is one entry of the lifecycle log as the events reply carries it.
//
// The JSON names are the `events --json` contract: every field is always
// present.
type Event struct {
	// Seq is the event's place in the log: increasing, never reused, so a
	// follower asks for what is after it.
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // e.g. "session.start", "process.exit"
	Session string    `json:"session"`
	Process string    `json:"process"`
	Detail  string    `json:"detail"`
}

// BreakerState is one server key's circuit breaker as the breakers reply
// carries it (`breaker list --json`).
type BreakerState struct {
	Key        string    `json:"key"`
	Name       string    `json:"name"`
	Argv       []string  `json:"argv"`
	Cwd        string    `json:"cwd"`
	State      string    `json:"state"`
	Failures   int       `json:"failures"`
	LastReason string    `json:"last_reason,omitempty"`
	OpenedAt   time.Time `json:"opened_at,omitzero"`
	RetryAt    time.Time `json:"retry_at,omitzero"`
	CooldownMS int64     `json:"cooldown_ms,omitempty"`
	Trial      bool      `json:"trial,omitempty"` // a half-open trial is out
}
