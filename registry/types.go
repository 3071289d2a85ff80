// Package registry owns the ProcessRegistry: the sessions and processes the
// daemon supervises, their state machine, and the queries the CLI asks of them.
//
// The registry is a cache of the truth (markers plus creation tokens are the
// ground truth, see design §4). Every state change is handed to a Persister and
// committed before the registry reports it, so a caller that acts after a
// transition returns acts on durable state. The registry never signals or
// spawns anything itself.
package registry

import (
	"errors"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// ProcState is the lifecycle state of a supervised process.
type ProcState string

// The process state machine:
//
//	starting → running → stopping → exited | failed | lost
//	starting → failed | stopping | lost | exited   (spawn error, stopped or
//	                                             exited before recorded, crash)
//	running  → exited | failed | lost     (exited on its own, or vanished)
const (
	StateStarting ProcState = "starting"
	StateRunning  ProcState = "running"
	StateStopping ProcState = "stopping"
	StateExited   ProcState = "exited"
	StateFailed   ProcState = "failed"
	StateLost     ProcState = "lost"
)

// Final reports whether no further transition can leave s.
func (s ProcState) Final() bool {
	return s == StateExited || s == StateFailed || s == StateLost
}

var transitions = map[ProcState][]ProcState{
	StateStarting: {StateRunning, StateFailed, StateStopping, StateLost, StateExited},
	StateRunning:  {StateStopping, StateExited, StateLost, StateFailed},
	StateStopping: {StateExited, StateFailed, StateLost},
}

// CanTransition reports whether the state machine allows from → to.
func CanTransition(from, to ProcState) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// SessionState is the lifecycle state of a session.
type SessionState string

const (
	SessionActive SessionState = "active"
	SessionEnding SessionState = "ending"
	SessionEnded  SessionState = "ended"
)

// Token is a creation token (see proc.Token).
type Token = proc.Token

// Session is one running agent host and the processes started on its behalf.
type Session struct {
	ID          string       `json:"id"`
	Label       string       `json:"label,omitempty"` // the host's own session id, e.g. CLAUDE_CODE_SESSION_ID
	HostPID     int          `json:"host_pid"`
	HostToken   Token        `json:"host_token"`
	HostCommand string       `json:"host_command"`
	State       SessionState `json:"state"`
	StartedAt   time.Time    `json:"started_at"`
	EndedAt     *time.Time   `json:"ended_at"`
	EndReason   string       `json:"end_reason,omitempty"`
}

// Process is one supervised process. It carries argv but never environment
// values: those hold secrets.
//
// Its JSON is how the store keeps it. What `ps --json` prints (the
// contract of design §8) is api.Process, converted from it by the daemon;
// today the two are the same, field for field (TestWireMatchesRecords).
type Process struct {
	ID        string   `json:"id"`
	Session   string   `json:"session"`
	Name      string   `json:"name"`
	Argv      []string `json:"argv"`
	Path      string   `json:"path,omitempty"` // the resolved executable
	Cwd       string   `json:"cwd"`
	PID       int      `json:"pid"`
	PGID      int      `json:"pgid"`
	Token     Token    `json:"token"`
	ShimPID   int      `json:"shim_pid,omitempty"`
	ShimToken Token    `json:"shim_token"`
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
	// stop cascade ran for it (a stop, its session's end, or its leftovers
	// after it exited on its own).
	Stop *StopRecord `json:"stop,omitempty"`
	// GraceMS is the process's own --grace, kept so a daemon that
	// re-adopts it after a restart stops it the same way.
	GraceMS int64 `json:"grace_ms,omitempty"`
	// Stdio holds the inodes of the host stdio channels the process was
	// given, so the stop cascade can find every holder of them.
	Stdio []StdioInode `json:"stdio,omitempty"`
	// Broker marks a shared server's broker (design §11): the process
	// relays for Clients, and its upstream runs as its child.
	Broker bool `json:"broker,omitempty"`
	// BrokerKey is a broker's server key: a daemon that re-adopts the
	// broker finds it by this again.
	BrokerKey string `json:"broker_key,omitempty"`
	// ServerKey and Fingerprint are what a broker runs (BrokerKey is a
	// lazy client's own broker's key), Lazy and IdleMS how (run --lazy,
	// --idle): a daemon that re-adopts it goes on learning from it.
	ServerKey   string `json:"server_key,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Lazy        bool   `json:"lazy,omitempty"`
	IdleMS      int64  `json:"idle_ms,omitempty"`
	// Unsafe says why a broker's server is not safely shareable: it sent
	// server-to-client requests (roots/list, sampling, elicitation) that
	// no single client could be asked.
	Unsafe string `json:"unsafe,omitempty"`
	// Relayed counts the messages a broker relayed, both ways.
	Relayed uint64 `json:"relayed,omitempty"`
	// Clients are the clients attached to a broker now.
	Clients []Client `json:"clients,omitempty"`
	// Usage is what a running process costs now, filled in by ps; never
	// stored.
	Usage *Usage `json:"usage,omitempty"`
	// Limits bound the process's tree (run --memory-max, ...), enforced
	// in its cgroup; LimitCgroups are the cgroup v1 directories that
	// hold them on a hybrid system, removed when it ends.
	Limits       *Limits  `json:"limits,omitempty"`
	LimitCgroups []string `json:"limit_cgroups,omitempty"`
	// LimitHit lists the limits the kernel enforced on it: memory_max
	// (the OOM killer killed a process of it), pids_max (a fork failed).
	LimitHit []string `json:"limit_hit,omitempty"`
	// Sandboxed says the server runs confined (run --sandbox): the daemon
	// refuses every request from its processes (a sandboxed server that
	// could ask the daemon to run a command would run it unconfined).
	Sandboxed bool `json:"sandboxed,omitempty"`
	// Egress is the egress proxy of a server with a network list, what a
	// restarted daemon needs to open it again.
	Egress *Egress `json:"egress,omitempty"`
}

// Egress is a server's egress proxy: the hosts it admits (host:port, as
// the policy lists them), its port, and whether it is in the server's own
// network namespace (its loopback) or on the daemon's.
type Egress struct {
	Hosts []string `json:"hosts"`
	Port  int      `json:"port"`
	Netns bool     `json:"netns,omitempty"`
}

// Limits are a server's resource limits; zero leaves one unbounded.
type Limits struct {
	MemoryMax uint64  `json:"memory_max,omitempty"` // bytes
	CPUMax    float64 `json:"cpu_max,omitempty"`    // CPUs
	PidsMax   int64   `json:"pids_max,omitempty"`
}

// Usage is what a server (its whole tree) or a session costs at a moment
// (package usage).
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

// Add sums u and o (a session's servers).
func (u Usage) Add(o Usage) Usage {
	u.MemoryBytes += o.MemoryBytes
	if u.MemorySource == "" || u.MemorySource == o.MemorySource {
		u.MemorySource = o.MemorySource
	} else if o.MemorySource != "" {
		u.MemorySource = "mixed"
	}
	u.CPUPercent += o.CPUPercent
	u.CPUSeconds += o.CPUSeconds
	u.Procs += o.Procs
	return u
}

// Client is one client attached to a broker: a host's session.
type Client struct {
	ID      string    `json:"id"`
	Session string    `json:"session"`
	Since   time.Time `json:"since"`
}

// StdioInode identifies one host stdio channel handed to a server.
type StdioInode struct {
	Fd    int    `json:"fd"`
	Kind  string `json:"kind"` // "pipe", "socket", "file", "tty", ...
	Inode uint64 `json:"inode"`
}

// StopRecord is the outcome of the stop cascade for one process.
type StopRecord struct {
	Result string        `json:"result"`
	Procs  []StoppedProc `json:"procs,omitempty"`
	Left   []int         `json:"left,omitempty"`
	Spared []int         `json:"spared,omitempty"`
	// Unproven held the server's host channel without proof of descent
	// from it: never signalled (shutdown.Outcome.Unproven).
	Unproven []int `json:"unproven,omitempty"`
}

// StoppedProc is one process of a stopped tree.
type StoppedProc struct {
	PID    int    `json:"pid"`
	Role   string `json:"role"`
	Result string `json:"result"`
}

// Event is one entry of the capped lifecycle log.
//
// Its JSON is how the store keeps it; `events --json` prints api.Event,
// the same today (TestWireMatchesRecords).
type Event struct {
	// Seq is the event's place in the log, handed out by the Persister:
	// increasing, never reused, so a follower asks for what is after it.
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // e.g. "session.start", "process.exit"
	Session string    `json:"session"`
	Process string    `json:"process"`
	Detail  string    `json:"detail"`
}

// Sentinel errors of the registry.
var (
	// ErrNotFound means no session or process has the given id or name.
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous means a name matched more than one live process.
	ErrAmbiguous = errors.New("ambiguous name")
	// ErrBadTransition means the state machine forbids the change.
	ErrBadTransition = errors.New("state transition not allowed")
)
