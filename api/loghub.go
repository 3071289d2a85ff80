package api

// The log hub's messages (package logwriter's Hub, internal/daemon/loghub_unix.go).
// One hub process reads every server's output pipe of a daemon; the
// daemon keeps a duplicate of each pipe's read end, so that neither one's
// death leaves a server writing into a pipe with no reader (SIGPIPE).
const (
	// TypeLogPipe hands a hub one pipe to copy: its read end, and when
	// Tee is set, where everything is copied too (a host's stderr), as
	// the message's fds. Daemon → hub for a new pipe; hub → daemon when a
	// hub re-joins a new daemon (TypeLogHub), once per pipe it holds.
	TypeLogPipe = "log_pipe"
	// TypeLogDone is a hub telling the daemon a pipe reached EOF (the
	// server and every holder of its write end are gone) and its log is
	// closed: the daemon lets go of its duplicates.
	TypeLogDone = "log_done"
	// TypeLogHub is the first request of a hub whose daemon went away,
	// on the next daemon's socket: its pipes follow as log_pipe
	// messages, then log_pipes_end. The connection stays the hub's.
	TypeLogHub = "log_hub"
	// TypeLogPipesEnd ends the pipes a re-joining hub hands over.
	TypeLogPipesEnd = "log_pipes_end"
)

// LogPipe describes one pipe of a log hub.
type LogPipe struct {
	// ID names the pipe; unique among every daemon's pipes.
	ID string `json:"id"`
	// Path is the live log file.
	Path string `json:"path"`
	// MaxBytes caps each file (0 or less: no cap); Keep is how many
	// rotated files are kept.
	MaxBytes int64 `json:"max_bytes,omitempty"`
	Keep     int   `json:"keep,omitempty"`
	// Tee says a second fd comes with the message: everything read is
	// copied to it as well.
	Tee bool `json:"tee,omitempty"`
}

// LogDone names a pipe that reached EOF.
type LogDone struct {
	ID string `json:"id"`
	// Dropped counts the bytes the log file could not take (a full disk,
	// a log directory gone), and LogError says why the first write
	// failed: the pipe was read on, so the server never blocked on it.
	Dropped  int64  `json:"dropped,omitempty"`
	LogError string `json:"log_error,omitempty"`
}

// LogHub introduces a hub re-joining a daemon.
type LogHub struct {
	PID   int `json:"pid"`
	Pipes int `json:"pipes"`
}

// LogHubStatus is one log hub in `status`.
type LogHubStatus struct {
	PID   int `json:"pid"`
	Pipes int `json:"pipes"`
	// Primary: new pipes go to it (the others re-joined from an earlier
	// daemon and end with their last pipe).
	Primary bool `json:"primary,omitempty"`
}
