// Package shim is `supervisor run`: the thin process a host's MCP config
// launches instead of the server. It hands its own stdin, stdout and stderr
// to the daemon (which spawns the server on them directly, so no byte of
// MCP traffic passes through the supervisor), forwards stop signals, and
// exits with the server's status.
package shim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/daemon"
	"github.com/seed-86a41135/supervisor/proc"
	"github.com/seed-86a41135/supervisor/session"
)

// CodeSupervisorError is the exit status for any failure of the supervisor
// itself (as opposed to the server's own status).
const CodeSupervisorError = 125

// Options is one `supervisor run`.
type Options struct {
	Argv    []string
	Name    string
	Session string        // explicit session id; empty derives it from the host
	Grace   time.Duration // SIGTERM grace for this server; 0 = daemon default
	Exe     string        // this binary, to start the daemon
	Paths   api.Paths
	Env     []string
	Stderr  io.Writer
	// StartTimeout bounds reaching (or starting) the daemon. Default 10 s.
	StartTimeout time.Duration
}

// Error is a failure with the exit status the shim must use.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func fail(code int, err error) (int, error) { return code, &Error{Code: code, Err: err} }

// Run runs the shim and returns the exit status to use. A non-nil error has
// not been printed yet.
func Run(ctx context.Context, o Options) (int, error) {
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Second
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	// Inherited fds a host leaked without close-on-exec must not reach the
	// daemon we may start (it would hold a host pipe open forever).
	if _, err := proc.MarkInheritedCloexec(); err != nil {
		return fail(CodeSupervisorError, err)
	}
	if len(o.Argv) == 0 {
		return fail(CodeSupervisorError, errors.New("no command given after --"))
	}
	explicit := o.Session
	if explicit == "" {
		explicit = lookEnv(o.Env, session.EnvSession)
	}
	ident, err := session.Identify(os.Getppid(), explicit, o.Env)
	if err != nil {
		return fail(CodeSupervisorError, err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fail(CodeSupervisorError, fmt.Errorf("current directory: %w", err))
	}
	selfTok, err := proc.TokenOf(os.Getpid())
	if err != nil {
		return fail(CodeSupervisorError, err)
	}

	// Catch stop signals before the server exists, so none is lost.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	dctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	c, err := daemon.EnsureRunning(dctx, o.Exe, o.Paths, o.Env)
	cancel()
	if err != nil {
		return fail(CodeSupervisorError, fmt.Errorf("reach the daemon: %w", err))
	}
	defer c.Close()

	req := api.RunRequest{
		Argv: o.Argv, Cwd: api.ByteString(cwd), Env: o.Env, Name: o.Name,
		Session: ident.ID, Label: ident.Label,
		HostPID: ident.HostPID, HostToken: ident.HostToken, HostCommand: ident.HostCommand,
		GraceMS: o.Grace.Milliseconds(), ShimPID: os.Getpid(), ShimToken: selfTok,
	}
	if err := c.Send(api.TypeRun, &req, 0, 1, 2); err != nil {
		if errors.Is(err, api.ErrFrameTooLarge) {
			err = fmt.Errorf("the command line and environment are too large to hand to the daemon: %w", err)
		}
		return fail(CodeSupervisorError, err)
	}
	// The daemon holds its own references now. Drop ours of stdin and
	// stdout so EOF semantics are exactly those of a direct spawn; stderr
	// stays for our own messages and closes when we exit with the server.
	if err := detachStdio(); err != nil {
		return fail(CodeSupervisorError, err)
	}

	type recv struct {
		m   api.Msg
		err error
	}
	msgs := make(chan recv, 1)
	go func() { // ends when c is closed (deferred above)
		for {
			m, fds, err := c.Recv()
			for _, fd := range fds {
				unix.Close(fd)
			}
			msgs <- recv{m, err}
			if err != nil {
				return
			}
		}
	}()

	var started api.Started
	signalled := 0
	for {
		select {
		case s := <-sigs:
			signalled++
			g := o.Grace
			if signalled > 1 {
				g = time.Millisecond // asked twice: do not wait out the grace
			}
			if err := c.Send(api.TypeStopSelf, &api.StopSelf{GraceMS: g.Milliseconds()}); err != nil {
				return fail(CodeSupervisorError, fmt.Errorf("forward %v: %w", s, err))
			}
		case r := <-msgs:
			if r.err != nil {
				if started.PID == 0 {
					return fail(CodeSupervisorError, fmt.Errorf("daemon closed the connection before starting the server: %w", r.err))
				}
				return lostDaemon(o.Stderr, started, r.err)
			}
			switch r.m.Type {
			case api.TypeError:
				var e api.Error
				api.Decode(r.m, &e)
				code := e.Code
				if code == 0 {
					code = CodeSupervisorError
				}
				return fail(code, errors.New(e.Message))
			case api.TypeStarted:
				if err := api.Decode(r.m, &started); err != nil {
					return fail(CodeSupervisorError, err)
				}
			case api.TypeExited:
				var ex api.Exited
				if err := api.Decode(r.m, &ex); err != nil {
					return fail(CodeSupervisorError, err)
				}
				return ex.ExitCode, nil
			}
		}
	}
}

// detachStdio points fds 0 and 1 at /dev/null (closing them outright would
// let the next open reuse the numbers).
func detachStdio() error {
	null, err := unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer unix.Close(null)
	for _, fd := range []int{0, 1} {
		if err := unix.Dup3(null, fd, 0); err != nil {
			return fmt.Errorf("detach fd %d: %w", fd, err)
		}
	}
	return nil
}

// lostDaemon waits for the server after the daemon went away: the server
// keeps running (design §2), and the shim keeps standing for it until it
// exits. Its status cannot be known: it is not our child.
func lostDaemon(stderr io.Writer, s api.Started, cause error) (int, error) {
	fmt.Fprintf(stderr, "supervisor: lost the daemon (%v); server %s (pid %d) keeps running unsupervised\n", cause, s.ID, s.PID)
	tok, err := proc.TokenOf(s.PID)
	if err != nil {
		return fail(CodeSupervisorError, fmt.Errorf("server %d already gone", s.PID))
	}
	proc.WaitExit(s.PID, tok, -1)
	return fail(CodeSupervisorError, fmt.Errorf("server %d exited while the daemon was away; its status is unknown", s.PID))
}

func lookEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := cutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}
