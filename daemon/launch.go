package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/api"
)

// Launch starts a detached daemon (`exe daemon --foreground` in its own
// session, stdio on /dev/null, cwd /) and returns once its socket answers.
// It runs in a short-lived CLI process, never inside the daemon, so using
// os/exec here cannot steal a status from the daemon's reaper.
func Launch(ctx context.Context, exe string, paths api.Paths, env []string) error {
	if err := api.EnsurePrivateDir(paths.StateDir); err != nil {
		return err
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	cmd := exec.Command(exe, "daemon", "--foreground")
	cmd.Env = daemonEnv(env)
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	if err := startDetached(cmd); err != nil {
		return fmt.Errorf("start daemon %s: %w", exe, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		c, err := api.Dial(ctx, paths.Socket)
		if err == nil {
			c.Close()
			return nil
		}
		if !errors.Is(err, api.ErrNotRunning) {
			return err
		}
		select {
		case err := <-exited:
			// A daemon that found another one holding the lock exits 0;
			// keep dialing for that one.
			if err != nil {
				return fmt.Errorf("daemon exited during start: %w; see %s", err, paths.Log())
			}
			exited = nil
		case <-ctx.Done():
			return fmt.Errorf("daemon did not answer on %s: %w; see %s", paths.Socket, ctx.Err(), paths.Log())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// EnsureRunning dials the daemon, launching one if none answers. Concurrent
// callers serialize on a lock file, re-check, and so start exactly one.
func EnsureRunning(ctx context.Context, exe string, paths api.Paths, env []string) (*api.Client, error) {
	if c, err := api.Dial(ctx, paths.Socket); err == nil || !errors.Is(err, api.ErrNotRunning) {
		return c, err
	}
	if err := api.EnsurePrivateDir(paths.StateDir); err != nil {
		return nil, err
	}
	err := withFileLock(paths.StartLock(), func() error {
		c, err := api.Dial(ctx, paths.Socket)
		if err == nil {
			c.Close()
			return nil
		}
		if !errors.Is(err, api.ErrNotRunning) {
			return err
		}
		return Launch(ctx, exe, paths, env)
	})
	if err != nil {
		return nil, err
	}
	return api.Dial(ctx, paths.Socket)
}

// daemonKeep are the variables a daemon inherits from whoever started it.
// Everything else stays behind: the starter's environment may hold secrets,
// and its markers (SUPERVISOR_SESSION_ID, ...) would make the daemon look
// like a member of some session's tree.
var daemonKeep = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "TZ",
	api.EnvStateDir, api.EnvSocket, EnvCgroups, EnvInPlace, EnvOrphan, EnvBreakerCooldown, EnvLogMaxMB, EnvRetention, EnvIdleTimeout, EnvMetricsAddr, EnvPprof, EnvMetricsNames,
	"SUPERVISOR_CONFIG", "XDG_CONFIG_HOME"} // the config file the daemon reads

// EnvCgroups set to "off" turns cgroups off for an auto-started daemon
// (the default is auto).
const EnvCgroups = "SUPERVISOR_CGROUPS"

// EnvInPlace set to "off" makes an auto-started daemon spawn every server
// itself instead of letting shims exec them in their own place (the
// default is auto: where the kernel allows it, inplace_linux.go).
const EnvInPlace = "SUPERVISOR_IN_PLACE"

// EnvOrphan=1 is set by a shim that is about to exec its server in its
// own place: the daemon it launches would be the server's child, a
// descendant of the host's server for its whole life (a host that kills
// its child's tree would take it along, and nobody would reap it). Such a
// daemon starts itself again (Reparent) and exits, so that the daemon that
// stays is re-parented to init or the nearest subreaper.
const EnvOrphan = "SUPERVISOR_DAEMON_ORPHAN"

// Reparent starts this daemon again as exe args, detached, without
// EnvOrphan; the caller exits 0 next, which Launch takes for "keep
// dialing". Errors of the new daemon go to its log, as an auto-started
// daemon's do.
func Reparent(exe string, args []string) error {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	cmd := exec.Command(exe, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvOrphan+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	if err := startDetached(cmd); err != nil {
		return fmt.Errorf("start daemon %s again: %w", exe, err)
	}
	return cmd.Process.Release()
}

func daemonEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		for _, k := range daemonKeep {
			if strings.HasPrefix(kv, k+"=") {
				out = append(out, kv)
			}
		}
	}
	return out
}
