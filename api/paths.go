package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Environment variables that select the daemon instance (design §8).
const (
	EnvStateDir = "SUPERVISOR_STATE_DIR"
	EnvSocket   = "SUPERVISOR_SOCKET"
)

// EnvInPlace set to "off" makes an auto-started daemon spawn every server
// itself, and every shim keep from offering to exec its server in its own
// place (the default is auto: where the kernel allows it). Here, not with
// the other settings, because the lean run entry reads it too.
const EnvInPlace = "SUPERVISOR_IN_PLACE"

// EnvLocalAfter is how long `supervisor run` waits for a daemon to answer
// or start before it supervises its server itself (local mode, design §2);
// a machine so loaded that a daemon takes longer than the default to
// start can raise it. Here because the lean run entry checks it too.
const EnvLocalAfter = "SUPERVISOR_LOCAL_AFTER"

// LocalAfter reads EnvLocalAfter: 0 where it is unset (the shim's
// default), an error naming the variable where it is not a positive
// duration.
func LocalAfter(getenv func(string) string) (time.Duration, error) {
	v := getenv(EnvLocalAfter)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 2s", EnvLocalAfter, v)
	}
	return d, nil
}

// Paths are the files of one daemon instance.
type Paths struct {
	StateDir string // registry.db, daemon.lock, supervisor.log
	Socket   string
}

// Lock, Log and DB name the files inside the state directory.
func (p Paths) Lock() string      { return filepath.Join(p.StateDir, "daemon.lock") }
func (p Paths) StartLock() string { return filepath.Join(p.StateDir, "start.lock") }
func (p Paths) Log() string       { return filepath.Join(p.StateDir, "supervisor.log") }
func (p Paths) DB() string        { return filepath.Join(p.StateDir, "registry.db") }

// ResolvePaths derives the instance's paths from getenv. The default state
// directory is ~/.local/state/supervisor where ~ is the uid's home: HOME when
// set, else the password database, because hosts such as the MCP SDKs strip
// most variables and every shim of one user must reach the same daemon.
func ResolvePaths(getenv func(string) string) (Paths, error) {
	var p Paths
	p.StateDir = getenv(EnvStateDir)
	if p.StateDir == "" {
		dir, err := defaultStateDir(getenv)
		if err != nil {
			return Paths{}, err
		}
		p.StateDir = dir
	}
	abs, err := filepath.Abs(p.StateDir)
	if err != nil {
		return Paths{}, fmt.Errorf("state directory %q: %w", p.StateDir, err)
	}
	p.StateDir = abs
	p.Socket = getenv(EnvSocket)
	if p.Socket == "" {
		p.Socket = filepath.Join(p.StateDir, "supervisor.sock")
		if len(p.Socket) > maxSunPath {
			p.Socket = FallbackSocket(p.StateDir)
		}
	} else if p.Socket, err = filepath.Abs(p.Socket); err != nil {
		return Paths{}, fmt.Errorf("%s %q: %w", EnvSocket, getenv(EnvSocket), err)
	}
	if len(p.Socket) > maxSunPath {
		return Paths{}, fmt.Errorf("socket path %q is %d bytes, longer than the %d a unix socket allows; set %s to a shorter path",
			p.Socket, len(p.Socket), maxSunPath, EnvSocket)
	}
	return p, nil
}

// FallbackSocket names the socket of stateDir in FallbackDir: one per state
// directory, so two instances with long paths do not share a daemon.
func FallbackSocket(stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return filepath.Join(FallbackDir(), hex.EncodeToString(sum[:6])+".sock")
}

// EnsurePrivateDir creates dir with mode 0700 if missing and checks that an
// existing one is a real directory owned by this uid and not open to others
// (it is restricted to 0700 if it is), and that no directory above it lets
// another user replace it (checkSafePath).
func EnsurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("check %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: %s is not a directory (a symlink?); use a directory you own (set %s or %s)", errUnsafeDir, dir, EnvStateDir, EnvSocket)
	}
	if uid, ok := ownerUID(st); ok && uid != os.Getuid() {
		return fmt.Errorf("%w: %s is owned by uid %d, not by you (uid %d): that user could replace the daemon's socket or state; use a directory you own (set %s or %s)",
			errUnsafeDir, dir, uid, os.Getuid(), EnvStateDir, EnvSocket)
	}
	if st.Mode().Perm()&0o077 != 0 || st.Mode()&os.ModeSticky != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("restrict %s to 0700: %w", dir, err)
		}
	}
	return checkSafePath(dir)
}

var errUnsafeDir = errors.New("refusing an unsafe directory")

// CheckSocketDir refuses a socket directory, or one above it, that lets
// another user replace the socket (see checkSafePath).
func CheckSocketDir(socket string) error { return checkSafePath(filepath.Dir(socket)) }
