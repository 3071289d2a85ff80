// Package session owns session identity and host-death watching: which
// running agent host a shim belongs to (its first non-launcher ancestor),
// the session id derived from it, and an event-driven watch that says when a
// host has died. Ending a session's processes is the daemon's job, through
// the shutdown package.
package session

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Environment variables that select or label a session.
const (
	// EnvSession overrides the session id, like --session.
	EnvSession = "SUPERVISOR_SESSION"
	// EnvClaudeSession is set by Claude Code for its MCP servers; it becomes
	// the session's label so a SessionEnd hook can name the session.
	EnvClaudeSession = "CLAUDE_CODE_SESSION_ID"
)

// ErrInvalidID is returned for a session id outside [A-Za-z0-9._-]{1,128}.
var ErrInvalidID = errors.New("session ids are 1 to 128 characters of A-Z a-z 0-9 . _ -")

// ErrHostGone means the shim's host exited before the shim could find it.
var ErrHostGone = errors.New("the host that started this server has already exited; " +
	"pass --session ID to run it without a host")

// isInit reports whether a process is what orphans are re-parented to.
func isInit(p proc.Info) bool {
	return p.PID == 1 || p.Comm == "systemd" || p.Comm == "init" || p.Comm == "launchd"
}

// ValidateID checks an explicit session id.
func ValidateID(id string) error {
	if !validID(id) {
		return fmt.Errorf("invalid session id %q: %w", id, ErrInvalidID)
	}
	return nil
}

// validID reports whether id is 1 to 128 of [A-Za-z0-9._-]. A loop and not
// the regexp `^[A-Za-z0-9._-]{1,128}$`: that compiles to 128 copies of the
// class, about 120 KB of heap (0.35 MiB of RSS measured) that every
// supervisor process, each shim, log writer and broker, would allocate at
// start and keep.
func validID(id string) bool {
	if len(id) < 1 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Identity is the session a shim belongs to.
type Identity struct {
	ID          string
	Label       string
	HostPID     int
	HostToken   proc.Token
	HostCommand string
}

// Identify finds the host of the process whose parent is ppid: the first
// ancestor that is not a launcher or shell (design §4). explicit, when not
// empty, is the session id to use instead of the derived one (it must pass
// ValidateID); the host is still found and watched.
func Identify(ppid int, explicit string, env []string) (Identity, error) {
	if explicit != "" {
		if err := ValidateID(explicit); err != nil {
			return Identity{}, err
		}
	}
	host, err := findHost(ppid)
	if err != nil {
		return Identity{}, err
	}
	// Reparented to init (or a subreaper such as systemd --user): the host
	// died before we could see it, and a session tied to init would never
	// end. With an explicit session the caller owns its lifetime instead.
	if explicit == "" && isInit(host) {
		return Identity{}, fmt.Errorf("parent is %s (pid %d): %w", host.Comm, host.PID, ErrHostGone)
	}
	// The full token (pidfs inode included) makes the host watch immune
	// to a PID recycled within one clock tick.
	if tok, err := proc.TokenOf(host.PID); err == nil && tok.Matches(host.Token) {
		host.Token = tok
	}
	cmd, _ := proc.Cmdline(host.PID)
	id := Identity{
		ID:          DerivedID(host.PID, host.Token),
		HostPID:     host.PID,
		HostToken:   host.Token,
		HostCommand: strings.Join(cmd, " "),
	}
	if id.HostCommand == "" {
		id.HostCommand = host.Comm
	}
	if explicit != "" {
		id.ID = explicit
	}
	id.Label, _ = proc.EnvValue(env, EnvClaudeSession)
	return id, nil
}

// DerivedID is the session id of a host process: its pid and start time.
// A daemon opens a host's later sessions (after one ended) under this id
// with -2, -3, ... appended (registry.OpenGeneration).
func DerivedID(pid int, tok proc.Token) string {
	return fmt.Sprintf("host-%d-%d", pid, tok.StartTicks)
}

func findHost(ppid int) (proc.Info, error) {
	first, err := proc.Stat(ppid)
	if err != nil {
		return proc.Info{}, fmt.Errorf("read parent process %d: %w", ppid, err)
	}
	cur := first
	for i := 0; i < 64; i++ {
		argv, _ := proc.Cmdline(cur.PID)
		if !IsLauncher(cur.Comm, argv) {
			return cur, nil
		}
		if cur.PPID <= 1 {
			break
		}
		next, err := proc.Stat(cur.PPID)
		if err != nil {
			break
		}
		cur = next
	}
	// Only launchers up to init: the nearest one is the best host we have.
	return first, nil
}

var launchers = map[string]bool{
	"supervisor": true, "sh": true, "bash": true, "zsh": true, "dash": true, "fish": true,
	"cmd": true, "pwsh": true, "powershell": true, "env": true, "npx": true, "npm": true,
	"uv": true, "uvx": true, "pipx": true, "timeout": true, "nohup": true, "setsid": true,
}

// IsLauncher reports whether a process with this comm and argv is a launcher
// or shell that sits between a host and its server rather than a host.
func IsLauncher(comm string, argv []string) bool {
	comm = programName(comm)
	name := comm
	if len(argv) > 0 {
		name = programName(argv[0])
	}
	if launchers[name] || launchers[comm] {
		return true
	}
	joined := strings.Join(argv, " ")
	switch {
	case comm == "node" || name == "node":
		// node is a host (Claude Code, Gemini CLI) unless it runs npm/npx.
		return strings.Contains(joined, "npx") || strings.Contains(joined, "npm exec") ||
			strings.Contains(joined, "npm-cli.js")
	case strings.HasPrefix(name, "python"):
		// python is a launcher only as a shim for uv/pipx tools.
		return strings.Contains(joined, "/shims/") || strings.Contains(joined, `\shims\`) || strings.Contains(joined, " -m uv") ||
			strings.Contains(joined, "pipx")
	case strings.HasPrefix(name, "npm "), strings.HasPrefix(comm, "npm "):
		return true // "npm exec" renames its process title
	}
	return false
}

// programName is the base name of a program path as a launcher table
// knows it, the same on every OS: both separators split, and a Windows
// executable suffix (node.exe, npx.cmd, Python.EXE) goes, with the case
// that Windows ignores.
func programName(path string) string {
	name := path[strings.LastIndexAny(path, `/\`)+1:]
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		switch strings.ToLower(name[i:]) {
		case ".exe", ".cmd", ".bat", ".com":
			return strings.ToLower(name[:i])
		}
	}
	return name
}

// ParseHostID returns the pid and start ticks encoded in a derived session
// id, or ok=false for an explicit one.
func ParseHostID(id string) (pid int, ticks uint64, ok bool) {
	rest, found := strings.CutPrefix(id, "host-")
	if !found {
		return 0, 0, false
	}
	p, t, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(p)
	ticks, err2 := strconv.ParseUint(t, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return pid, ticks, true
}
