// Package leanrun is the lean run entry, cmd/supervisor-run, and what it
// shares with the full shim (`supervisor run`, package shim): the run
// request, the offer to exec the server in the shim's own place, and that
// exec. The lean entry does only the fast path, the daemon up and taking
// the offer; every other run it hands to `supervisor run` by exec, so it
// keeps every guarantee of that path (design §7). It links no logger, no
// HTTP and no CLI framework: a host pays its start at every server start.
package leanrun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
	"github.com/seed-86a41135/supervisor/session"
	"github.com/seed-86a41135/supervisor/spawn"
)

// CodeSupervisorError is the exit status for any failure of the
// supervisor itself (as opposed to the server's own status).
const CodeSupervisorError = 125

// Spec is what one run asks for, from its command line and environment.
type Spec struct {
	Argv []string
	Name string
	// Dir is the server's working directory; empty: this process's.
	Dir     string
	Session string        // explicit session id; empty derives it from the host
	Grace   time.Duration // SIGTERM grace for this server; 0 = daemon default
	// MaxInstances caps live instances of Name in the session (nil: 1).
	MaxInstances *int
	// Share attaches to the shared upstream of this server (run --share).
	Share bool
	// NoShare (run --share=false) keeps it direct even where the daemon
	// would share it on its own.
	NoShare bool
	// Lazy and Idle: RunRequest.Lazy and IdleMS.
	Lazy bool
	Idle time.Duration
	// NoFlatten: RunRequest.NoFlatten.
	NoFlatten bool
	// Limits: RunRequest.Limits (nil: none asked).
	Limits *api.Limits
	// Sandbox and NoSandbox: RunRequest's (run --sandbox, --allow-*,
	// --network; --sandbox=false).
	Sandbox   *sandbox.Spec
	NoSandbox bool
	Env       []string
}

// NewRequest describes s for the daemon: the command, this process's
// working directory and environment, and the session of its host (the
// first non-launcher ancestor, or the explicit one).
func NewRequest(s Spec) (api.RunRequest, error) {
	explicit := s.Session
	if explicit == "" {
		explicit, _ = proc.EnvValue(s.Env, session.EnvSession)
	}
	ident, err := session.Identify(os.Getppid(), explicit, s.Env)
	if err != nil {
		return api.RunRequest{}, err
	}
	cwd, err := workDir(s.Dir)
	if err != nil {
		return api.RunRequest{}, err
	}
	selfTok, err := proc.TokenOf(os.Getpid())
	if err != nil {
		return api.RunRequest{}, err
	}
	return api.RunRequest{
		Argv: s.Argv, Cwd: api.ByteString(cwd), Env: s.Env, Name: s.Name,
		Session: ident.ID, Label: ident.Label,
		HostPID: ident.HostPID, HostToken: ident.HostToken, HostCommand: ident.HostCommand,
		GraceMS: api.Millis(s.Grace), ShimPID: os.Getpid(), ShimToken: selfTok,
		MaxInstances: s.MaxInstances, Share: s.Share, NoShare: s.NoShare, Lazy: s.Lazy, IdleMS: api.Millis(s.Idle),
		NoFlatten: s.NoFlatten, Limits: s.Limits, Sandbox: s.Sandbox, NoSandbox: s.NoSandbox,
		Given: Given(s.Env, os.Getppid()),
	}, nil
}

// Given names the variables of env that process parent does not have, or
// has with another value: what a host's config set for this server (its
// env block). None where the parent's environment cannot be read.
func Given(env []string, parent int) []string {
	theirs, err := proc.Environ(parent)
	if err != nil {
		return nil
	}
	had := make(map[string]string, len(theirs))
	for _, kv := range theirs {
		k, v, _ := strings.Cut(kv, "=")
		had[k] = v
	}
	var out []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if was, ok := had[k]; (!ok || was != v) && k != "_" {
			out = append(out, k)
		}
	}
	return out
}

// workDir is the server's working directory as an absolute path (the
// daemon runs in /), checked here so that a bad one is reported before a
// daemon is started or reached. The daemon checks again when it spawns.
func workDir(dir string) (string, error) {
	if dir == "" {
		cwd, err := os.Getwd()
		switch {
		case errors.Is(err, fs.ErrPermission):
			// getwd stats ".", which needs search permission on it.
			return "", fmt.Errorf("the current directory is not searchable: %w; chmod u+x it, or cd to another directory, or pass --cwd", err)
		case err != nil:
			// getwd fails with ENOENT once the directory was removed.
			return "", fmt.Errorf("the current directory cannot be found (was it removed?): %w; cd to a directory that exists, or pass --cwd", err)
		}
		dir = cwd
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("--cwd %q: %w", dir, err)
		}
		dir = abs
	}
	if err := spawn.CheckDir(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// ExecOrder is the daemon's answer to an in-place offer: become the
// server. Stderr is the log writer's pipe, or -1.
type ExecOrder struct {
	api.Exec
	Stderr int
}

func (e *ExecOrder) Error() string { return "exec " + e.ID + " in place" }

// DecodeExec reads an exec message and the fds that came with it (it
// takes them: on an error they are closed).
func DecodeExec(m api.Msg, fds []int) (*ExecOrder, error) {
	ex := &ExecOrder{Stderr: -1}
	err := api.Decode(m, &ex.Exec)
	switch {
	case err == nil && ex.LogStderr && len(fds) == 1:
		ex.Stderr, fds = fds[0], nil
	case err == nil && (ex.LogStderr || len(fds) > 0):
		err = fmt.Errorf("%w: exec with %d fds, log_stderr %v", api.ErrMalformed, len(fds), ex.LogStderr)
	}
	api.CloseFds(fds)
	if err != nil {
		return nil, err
	}
	return ex, nil
}
