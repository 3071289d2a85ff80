// Package client reaches the per-user daemon from a CLI process: it dials
// it, and launches one under its keeper where none answers, so that many
// shims starting at once start exactly one. It runs in short-lived CLI
// processes (the shim, the commands), never in the daemon, which is why
// it may use os/exec.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/keeper"
	"github.com/seed-86a41135/supervisor/internal/lockfile"
	"github.com/seed-86a41135/supervisor/internal/settings"
)

// Launch starts a daemon under a keeper (package keeper: it restarts a
// daemon that dies without stopping) and returns once its socket answers.
// The keeper is started through a stage that exits at once, so neither it
// nor the daemon is ever a descendant of whoever launched them: a shim
// that execs its server in its own place, or a host that kills its
// server's whole tree, cannot take them along. Both run in sessions of
// their own with stdio on /dev/null and cwd /. Launch runs in a
// short-lived CLI process, never inside the daemon, so using os/exec here
// cannot steal a status from the daemon's reaper.
func Launch(ctx context.Context, exe string, paths api.Paths, env []string) error {
	c, err := launch(ctx, exe, paths, env)
	if err != nil {
		return err
	}
	return c.Close()
}

// launch is Launch returning the connection that found the daemon
// answering. A caller that dialed again instead could find that daemon
// SIGKILLed in between, and its keeper's next one not yet listening: a
// start that succeeded would be reported as "not running".
func launch(ctx context.Context, exe string, paths api.Paths, env []string) (*api.Client, error) {
	return launchTries(ctx, exe, paths, env, maxLaunches)
}

// maxLaunches bounds how often one launch starts a daemon again whose
// first found the singleton lock held by a daemon that then went away.
const maxLaunches = 3

// heldLockRecheck is how long a launch whose daemon found the lock held
// dials before it asks whether the holder is still there.
const heldLockRecheck = 100 * time.Millisecond

func launchTries(ctx context.Context, exe string, paths api.Paths, env []string, tries int) (*api.Client, error) {
	if err := api.EnsurePrivateDir(paths.StateDir); err != nil {
		return nil, err
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	// The keeper tells how the first daemon's start failed on a pipe
	// (where fds can be passed): a refused start is reported at once, not
	// after ctx's whole timeout.
	report, w, err := reportPipe()
	if err != nil {
		return nil, err
	}
	fdArg := "-"
	if report != nil {
		defer report.Close() // also ends the reader below
		fdArg = "3"
	}
	cmd := exec.Command(exe, keeper.Command, "detach", filepath.Join(paths.StateDir, keeper.LogFile), fdArg, "--", "daemon", "--foreground")
	cmd.Env = daemonEnv(env)
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	if w != nil {
		cmd.ExtraFiles = []*os.File{w} // fd 3
	}
	err = keeper.StartDetached(cmd)
	if w != nil {
		w.Close() // the keeper's copy is the write end left
	}
	if err != nil {
		return nil, fmt.Errorf("start daemon %s: %w", exe, err)
	}
	detached := make(chan error, 1)
	go func() { detached <- cmd.Wait() }()
	failed := make(chan string, 1)
	if report != nil {
		go func() {
			b, _ := io.ReadAll(io.LimitReader(report, 4096))
			failed <- strings.TrimSpace(string(b))
		}()
	}
	var heldSince time.Time // when the first daemon said another held the lock
	for {
		c, err := api.Dial(ctx, paths.Socket)
		if err == nil {
			return c, nil
		}
		// A daemon killed between accepting and answering (its keeper
		// starts the next one) is one not running yet, not a failure.
		if !errors.Is(err, api.ErrNotRunning) && !api.PeerGone(err) {
			return nil, err
		}
		select {
		case err := <-detached:
			if err != nil {
				return nil, fmt.Errorf("start the daemon's keeper: %w; see %s", err, paths.Log())
			}
			detached = nil
		case why := <-failed:
			// Nothing told: the first daemon found another one holding
			// the lock and exited 0; keep dialing for that one.
			if why != "" {
				return nil, fmt.Errorf("daemon exited during start: %s; see %s", why, paths.Log())
			}
			failed, heldSince = nil, time.Now()
		case <-ctx.Done():
			return nil, fmt.Errorf("daemon did not answer on %s: %w; see %s", paths.Socket, ctx.Err(), paths.Log())
		case <-time.After(5 * time.Millisecond):
		}
		// The holder may have been a daemon on its way out (a stop that
		// returned as its last thread let go, seen in CI): with the lock
		// free and nobody answering, nobody else starts one for us.
		// Asked once per heldLockRecheck: taking the lock to ask could
		// turn away a daemon starting at that moment.
		if !heldSince.IsZero() && time.Since(heldSince) >= heldLockRecheck && tries > 1 {
			heldSince = time.Now()
			if lockfile.Free(paths.Lock()) {
				if c, err := api.Dial(ctx, paths.Socket); err == nil || !errors.Is(err, api.ErrNotRunning) {
					return c, err
				}
				return launchTries(ctx, exe, paths, env, tries-1)
			}
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
	unlock, err := lockfile.Hold(paths.StartLock())
	if err != nil {
		return nil, err
	}
	defer unlock()
	c, err := api.Dial(ctx, paths.Socket)
	if err == nil || !errors.Is(err, api.ErrNotRunning) {
		return c, err
	}
	return launch(ctx, exe, paths, env)
}

// daemonKeep are the variables a daemon inherits from whoever started it.
// Everything else stays behind: the starter's environment may hold secrets,
// and its markers (SUPERVISOR_SESSION_ID, ...) would make the daemon look
// like a member of some session's tree.
var daemonKeep = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "TZ",
	api.EnvStateDir, api.EnvSocket, settings.EnvCgroups, settings.EnvInPlace, settings.EnvBreakerCooldown, settings.EnvLogMaxMB,
	settings.EnvRetention, settings.EnvIdleTimeout, settings.EnvMetricsAddr, settings.EnvPprof, settings.EnvMetricsNames, settings.EnvSandboxNetns,
	"SUPERVISOR_CONFIG", "XDG_CONFIG_HOME"} // the config file the daemon reads

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
