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
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/client"
	"github.com/seed-86a41135/supervisor/internal/config"
	"github.com/seed-86a41135/supervisor/internal/lazycache"
	"github.com/seed-86a41135/supervisor/internal/leanrun"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/shutdown"
)

// CodeSupervisorError is the exit status for any failure of the supervisor
// itself (as opposed to the server's own status).
const CodeSupervisorError = leanrun.CodeSupervisorError

// Options is one `supervisor run`: what it asks for (leanrun.Spec), and
// how this shim goes about it.
type Options struct {
	leanrun.Spec
	Exe    string // this binary, to start the daemon
	Paths  api.Paths
	Stderr io.Writer
	// StartTimeout bounds starting the server while the daemon asks to
	// retry (it is stopping, or the session is being ended). Default 10 s.
	StartTimeout time.Duration
	// LocalAfter is how long the daemon may take to answer (or start)
	// before the shim supervises the server itself. Default 2 s.
	LocalAfter time.Duration
	// FrontFd, where 0 or more, is the lean entry's memfd of what its
	// front read (leanrun.TakeFrontState); -1 or unset (0 is stdin,
	// never one) for none.
	FrontFd int
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
	if o.LocalAfter <= 0 {
		o.LocalAfter = 2 * time.Second
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
	// What the lean entry's front read, if it handed this run over after
	// answering its host from the cache: the server must see it first.
	fronted := o.FrontFd > 0
	var front leanrun.FrontState
	var err error
	if fronted {
		front, err = leanrun.TakeFrontState(o.FrontFd)
	}
	if err != nil {
		return fail(CodeSupervisorError, fmt.Errorf("the lean run entry's hand-over after its answers from the cache: %w", err))
	}
	req, err := NewRequest(o)
	if err != nil {
		return fail(CodeSupervisorError, err)
	}
	if fronted {
		req.Replay, req.Rest = front.Replay, front.Rest
	}

	// Offer to exec the server in this process's place (inplace_linux.go):
	// the daemon answers with exec where it takes the offer.
	selfFd := -1
	if v, _ := proc.EnvValue(o.Env, settings.EnvInPlace); v != "off" {
		selfFd = leanrun.InPlaceFd()
	}
	if selfFd >= 0 {
		defer api.CloseFds([]int{selfFd})
	}

	// Catch stop signals before the server exists, so none is lost: they
	// become a stop request. Not while an offer to exec in place is out:
	// if the daemon takes it, a signal before the exec must end this
	// process, the server-to-be, as it would end a server started
	// directly (a caught one could be lost in the hand-over); if it does
	// not, a signal before the catch ends the shim, and the daemon stops
	// the server of a shim gone.
	sigs := make(chan os.Signal, 4)
	catch := []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}
	if selfFd < 0 {
		signal.Notify(sigs, catch...)
	}
	defer signal.Stop(sigs)

	// Offered for every run (the config file may make a server lazy) but
	// one whose host a front answered already.
	if v, _ := proc.EnvValue(o.Env, settings.EnvLazyFront); v != "off" && !fronted {
		req.Front = true
	}
	c, started, msgs, err := startServer(ctx, o, &req, selfFd)
	var fo *frontOrder
	if errors.As(err, &fo) {
		fronted = true
		// The host is answered from the cache here until it asks what
		// only the server can answer; then the run goes on as any lazy
		// run, with what the front read.
		code, ferr := serveFront(fo, &req, sigs, catch, selfFd < 0)
		if ferr != nil || code >= 0 {
			return code, ferr
		}
		c, started, msgs, err = startServer(ctx, o, &req, selfFd)
	}
	var ex *leanrun.ExecOrder
	if errors.As(err, &ex) {
		warnVersion(o.Stderr, c.Daemon.Version)
		code, err := leanrun.Exec(c, ex)
		return fail(code, err)
	}
	// One P for a shim that stays: it waits nearly all its life, and
	// every P past the first lets the runtime start threads that then stay
	// for the server's life; thread ids count against pid_max with the
	// servers'. (5-6 threads instead of 6-7; the rest are the runtime's
	// own and os/signal's two.) Not before: the call stops the world, a
	// millisecond of every start in place, where the shim is gone at once.
	runtime.GOMAXPROCS(1)
	signal.Notify(sigs, catch...)
	// The daemon may share a server the run did not ask to (the config,
	// a stateless server): a broker is never signalled by a shim.
	o.Share = o.Share || started.Shared
	var local *localReason
	if errors.As(err, &local) && fronted {
		// The host's handshake went to the front: a server started here
		// would never see it.
		return 125, fmt.Errorf("the server cannot be started: the daemon cannot be reached any more (%s), and a server run without it would not have seen the handshake the cache answered", local.why)
	}
	if errors.As(err, &local) {
		// Only the daemon's cgroups enforce limits: a server that has any,
		// on the command line or in the config file, is never run here
		// without them.
		if l, sb, unread := daemonOnly(o); l != nil || sb != nil || unread != "" {
			if unread != "" {
				return 125, fmt.Errorf("the config file may set this server's limits or sandbox, which need the daemon, and it cannot be used (%s); %s: not running it without them", local.why, unread)
			}
			what := "limits"
			if sb != nil {
				what = "sandbox"
			}
			return 125, fmt.Errorf("the server's %s need the daemon, and it cannot be used (%s): not running it without them", what, local.why)
		}
		return runLocal(ctx, o, req, local.why, sigs)
	}
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e.Code, err
		}
		return fail(CodeSupervisorError, err)
	}
	defer func() { c.Close() }()
	warnVersion(o.Stderr, c.Daemon.Version)
	// The daemon and the server hold their own references now. Drop ours
	// of stdin and stdout so EOF semantics are exactly those of a direct
	// spawn; stderr stays for our own messages and closes when we exit with
	// the server.
	if err := detachStdio(); err != nil {
		return fail(CodeSupervisorError, err)
	}

	signalled := 0
	var pending []os.Signal
	for {
		select {
		case s := <-sigs:
			signalled++
			g := o.Grace
			if signalled > 1 {
				g = time.Millisecond // asked twice: do not wait out the grace
			}
			// Ctrl-C is the server's too: it gets SIGINT, not the cascade's
			// SIGTERM, and exits 130 as it would started directly.
			interrupt := s == syscall.SIGINT && signalled == 1
			if err := c.Send(api.TypeStopSelf, &api.StopSelf{GraceMS: api.Millis(g), Interrupt: interrupt}); err != nil {
				// The daemon is going away: the re-attach hands the
				// signal to the server itself.
				pending = append(pending, s)
			}
		case r := <-msgs:
			if r.err != nil {
				// The daemon went away (a restart or a crash): the server
				// keeps running; find the next daemon and re-attach.
				c.Close()
				nc, nmsgs, err := reattach(ctx, o, req, started, r.err, &pending, sigs)
				if errors.Is(err, errServerGone) {
					return fail(CodeSupervisorError, err)
				}
				if err != nil {
					return lostDaemon(o.Stderr, started, err, sigs, o.Share)
				}
				c, msgs = nc, nmsgs
				warnVersion(o.Stderr, c.Daemon.Version)
				// Signals that came while no daemon answered (a shared
				// server's, which the broker's other clients need, is
				// never signalled by a shim) become a stop request now.
				for len(pending) > 0 {
					if c.Send(api.TypeStopSelf, &api.StopSelf{GraceMS: api.Millis(o.Grace)}) != nil {
						break // gone again: the next re-attach sends the rest
					}
					pending = pending[1:]
				}
				continue
			}
			api.CloseFds(r.fds)
			switch r.m.Type {
			case api.TypeError:
				var e api.Error
				if err := api.Decode(r.m, &e); err != nil {
					e.Message = fmt.Sprintf("the daemon's error does not decode: %v", err)
				}
				return fail(orCode(e.Code), errors.New(e.Message))
			case api.TypeExited:
				var ex api.Exited
				if err := api.Decode(r.m, &ex); err != nil {
					return fail(CodeSupervisorError, err)
				}
				if ex.Unknown {
					return fail(CodeSupervisorError, fmt.Errorf("server %s (pid %d) exited; its status is unknown: it was re-adopted after a daemon restart", started.ID, started.PID))
				}
				return ex.ExitCode, nil
			}
		}
	}
}

// NewRequest describes o for the daemon (leanrun.NewRequest).
func NewRequest(o Options) (api.RunRequest, error) { return leanrun.NewRequest(o.Spec) }

type recv struct {
	m   api.Msg
	fds []int // the receiver closes them
	err error
}

// startServer reaches the daemon (starting it if needed), hands it the run
// request with fds 0-2 and waits for the server to start. A daemon that is
// stopping, or a session being ended, is retried until StartTimeout: a
// fresh daemon (or session) follows in moments.
//
// A daemon that takes an in-place offer (selfFd, the pidfd sent along)
// answers with exec instead: the error is then a *leanrun.ExecOrder.
func startServer(ctx context.Context, o Options, req *api.RunRequest, selfFd int) (*api.Client, api.Started, <-chan recv, error) {
	deadline := time.Now().Add(o.StartTimeout)
	for {
		// A daemon that cannot be reached or started within LocalAfter is
		// not waited for: the host is waiting too (design §2).
		dctx, cancel := context.WithTimeout(ctx, o.LocalAfter)
		// A daemon started now is nobody's child (daemon.Launch): not
		// this process's, which is the server's after an exec in place.
		c, err := client.EnsureRunning(dctx, o.Exe, o.Paths, o.Env)
		cancel()
		if err != nil {
			return nil, api.Started{}, nil, &localReason{why: fmt.Sprintf("the daemon cannot be reached or started: %v", err)}
		}
		if !c.SameNamespaces() {
			c.Close()
			return nil, api.Started{}, nil, &localReason{why: "this shim runs in another PID or mount namespace than the daemon (a sandboxed host)"}
		}
		if (len(req.Replay) > 0 || len(req.Rest) > 0) && !c.Daemon.Front {
			c.Close()
			return nil, api.Started{}, nil, &Error{Code: CodeSupervisorError, Err: fmt.Errorf(
				"the daemon (version %s) cannot take what this lazy run's front read, and the server would miss the host's handshake: run `supervisor daemon restart`", c.Daemon.Version)}
		}
		// Offered only to a daemon that takes it: an older one expects
		// three fds.
		req.InPlace = selfFd >= 0 && c.Daemon.InPlace
		req.Confines = req.InPlace // leanrun.Exec confines to the order's sandbox
		fds := stdioFds()
		if req.InPlace {
			fds = append(fds, selfFd)
		}
		if err := c.Send(api.TypeRun, req, fds...); err != nil {
			c.Close()
			if errors.Is(err, api.ErrFrameTooLarge) {
				err = fmt.Errorf("the command line and environment are too large to hand to the daemon: %w", err)
			}
			return nil, api.Started{}, nil, err
		}
		msgs := receive(c)
		r := <-msgs
		if r.m.Type != api.TypeExec {
			api.CloseFds(r.fds)
		}
		switch {
		case r.err != nil:
			c.Close()
			// The daemon died mid-start: the server may be running on our
			// stdio already. A daemon started now recovers it from its
			// intent record and marker, and stops it, since this shim is
			// going away.
			dctx, cancel := context.WithTimeout(ctx, o.LocalAfter)
			if nc, err := client.EnsureRunning(dctx, o.Exe, o.Paths, o.Env); err == nil {
				nc.Close()
			}
			cancel()
			return nil, api.Started{}, nil, fmt.Errorf("the daemon went away while starting the server (%v); a new daemon stops whatever it had started: retry", r.err)
		case r.m.Type == api.TypeStarted:
			var st api.Started
			if err := api.Decode(r.m, &st); err != nil {
				c.Close()
				return nil, api.Started{}, nil, err
			}
			return c, st, msgs, nil
		case r.m.Type == api.TypeExec && req.InPlace:
			ex, err := leanrun.DecodeExec(r.m, r.fds)
			r.fds = nil
			if err != nil {
				c.Close()
				return nil, api.Started{}, nil, err
			}
			return c, api.Started{}, msgs, ex
		case r.m.Type == api.TypeFront && req.Front:
			c.Close()
			var f api.Front
			if err := api.Decode(r.m, &f); err != nil {
				return nil, api.Started{}, nil, err
			}
			front, err := lazycache.NewFront(f.Cache)
			if err != nil {
				return nil, api.Started{}, nil, fmt.Errorf("the daemon's answer to a lazy run: %w", err)
			}
			return nil, api.Started{}, nil, &frontOrder{front: front}
		case r.m.Type == api.TypeError:
			c.Close()
			var e api.Error
			if err := api.Decode(r.m, &e); err != nil {
				e.Message = fmt.Sprintf("the daemon's error does not decode: %v", err)
			}
			if e.Retry && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return nil, api.Started{}, nil, &Error{Code: orCode(e.Code), Err: errors.New(e.Message)}
		default:
			c.Close()
			return nil, api.Started{}, nil, fmt.Errorf("%w: %q before started", api.ErrMalformed, r.m.Type)
		}
	}
}

func orCode(code int) int {
	if code == 0 {
		return CodeSupervisorError
	}
	return code
}

// errServerGone: the server exited while the shim had no daemon.
var errServerGone = errors.New("server gone")

// reattach finds the daemon again after the connection to it dropped and
// re-attaches to the server by id, PID and creation token. It dials with
// backoff, and after AwayLimit starts a daemon itself (the old one crashed,
// and nobody else may need one soon). Until then stop signals go to the
// server directly. It gives up when the server exits, or when the daemon
// answering does not know the server.
//
// A shared server's shim (o.Share: st is its broker, which serves other
// clients too) never signals it: signals wait in *pending for the next
// daemon, and a host that dies meanwhile takes only its own client away
// (the broker sees the client's EOF).
func reattach(ctx context.Context, o Options, req api.RunRequest, st api.Started, cause error, pending *[]os.Signal, sigs chan os.Signal) (*api.Client, <-chan recv, error) {
	server, err := proc.OpenHandle(st.PID, st.Token)
	if err != nil {
		return nil, nil, fmt.Errorf("lost the daemon (%v); server %d exited meanwhile, its status is unknown: %w", cause, st.PID, errServerGone)
	}
	defer server.Close()
	if !o.Share {
		for _, sig := range *pending {
			server.Signal(sig.(syscall.Signal))
		}
		*pending = nil
	}
	// While no daemon answers, the host's death is this shim's to act on:
	// after LocalAfter it stops the server itself, as in local mode.
	host, err := proc.OpenHandle(req.HostPID, req.HostToken)
	if err == nil {
		defer host.Close()
	} // else: gone already
	away := time.Now()
	backoff := 10 * time.Millisecond
	for {
		select {
		case sig := <-sigs:
			if o.Share {
				*pending = append(*pending, sig)
			} else {
				server.Signal(sig.(syscall.Signal))
			}
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		backoff = min(2*backoff, 500*time.Millisecond)
		if server.Wait(time.Millisecond) {
			return nil, nil, fmt.Errorf("lost the daemon (%v); server %d exited meanwhile, its status is unknown: %w", cause, st.PID, errServerGone)
		}
		if time.Since(away) >= o.LocalAfter && (host == nil || host.Wait(time.Millisecond)) {
			if o.Share {
				return nil, nil, fmt.Errorf("lost the daemon (%v) and then the host: the shared server's broker lets this client go on its EOF: %w", cause, errServerGone)
			}
			stopOrphan(o, req, st)
			return nil, nil, fmt.Errorf("lost the daemon (%v) and then the host: stopped server %d itself: %w", cause, st.PID, errServerGone)
		}
		var c *api.Client
		dctx, cancel := context.WithTimeout(ctx, o.LocalAfter)
		if time.Since(away) < o.LocalAfter {
			c, err = api.Dial(dctx, o.Paths.Socket)
		} else {
			c, err = client.EnsureRunning(dctx, o.Exe, o.Paths, o.Env)
		}
		cancel()
		if err != nil {
			continue
		}
		a := api.Attach{ID: st.ID, PID: st.PID, Token: st.Token, ShimPID: req.ShimPID, ShimToken: req.ShimToken,
			GraceMS: req.GraceMS, Session: req.Session, Label: req.Label, HostPID: req.HostPID,
			HostToken: req.HostToken, HostCommand: req.HostCommand}
		if err := c.Send(api.TypeAttach, &a); err != nil {
			c.Close()
			continue
		}
		msgs := receive(c)
		r := <-msgs
		api.CloseFds(r.fds)
		switch {
		case r.err != nil:
			c.Close()
			continue // that daemon went away too
		case r.m.Type == api.TypeStarted:
			return c, msgs, nil
		case r.m.Type == api.TypeError:
			c.Close()
			var e api.Error
			if err := api.Decode(r.m, &e); err != nil {
				e.Message = fmt.Sprintf("the daemon's error does not decode: %v", err)
			}
			return nil, nil, errors.New(e.Message)
		default:
			c.Close()
			return nil, nil, fmt.Errorf("%w: %q answering attach", api.ErrMalformed, r.m.Type)
		}
	}
}

// stopOrphan stops server st through the cascade when its host died while
// no daemon could be reached: nobody else would.
func stopOrphan(o Options, req api.RunRequest, st api.Started) {
	c := &shutdown.Cascade{Excluded: []int{os.Getpid()}}
	c.Stop(context.Background(), []shutdown.Target{shimTarget(req, st.ID, st.PID, st.PID, st.Token)},
		shutdown.Options{Grace: o.Grace, EOFGrace: shutdown.DefaultEOFGrace}) // Stop defaults a zero grace
}

// shimTarget is a server this shim stops itself (local mode, or its daemon
// gone): never its host, whose death may be what started the stop.
func shimTarget(req api.RunRequest, id string, pid, pgid int, tok proc.Token) shutdown.Target {
	return shutdown.Target{ID: id, PID: pid, PGID: pgid, Token: tok, Session: req.Session,
		Spared: []shutdown.Proc{{PID: req.HostPID, Token: req.HostToken}}}
}

// receive delivers c's messages until c fails or is closed.
func receive(c *api.Client) <-chan recv {
	msgs := make(chan recv, 1)
	go func() {
		for {
			m, fds, err := c.Recv()
			msgs <- recv{m, fds, err}
			if err != nil {
				return
			}
		}
	}()
	return msgs
}

// warnVersion says once, on stderr (hosts log it), that this binary is
// newer than the daemon it talks to.
func warnVersion(w io.Writer, daemonVersion string) {
	if daemonVersion == api.Version || !api.NewerVersion(api.Version, daemonVersion) {
		return
	}
	fmt.Fprintf(w, "supervisor: the running daemon is version %s, this binary %s: `supervisor daemon restart` switches to it without stopping any server\n",
		daemonVersion, api.Version)
}

// lostDaemon waits for the server after the daemon went away: the server
// keeps running (design §2), and the shim keeps standing for it until it
// exits, forwarding stop signals to it directly. Its status cannot be
// known: it is not our child.
func lostDaemon(stderr io.Writer, s api.Started, cause error, sigs <-chan os.Signal, share bool) (int, error) {
	fmt.Fprintf(stderr, "supervisor: lost the daemon and could not re-attach (%v); server %s (pid %d) keeps running unsupervised\n", cause, s.ID, s.PID)
	server, err := proc.OpenHandle(s.PID, s.Token)
	if err != nil {
		return fail(CodeSupervisorError, fmt.Errorf("server %d already gone", s.PID))
	}
	defer server.Close()
	exited := make(chan struct{})
	go func() { server.Wait(-1); close(exited) }()
	for {
		select {
		case <-exited:
			return fail(CodeSupervisorError, fmt.Errorf("server %d exited while the daemon was away; its status is unknown", s.PID))
		case sig := <-sigs:
			if share {
				// The broker serves other clients: this client just goes
				// (the host closes its pipes, the broker sees EOF).
				return 128 + int(sig.(syscall.Signal)), nil
			}
			server.Signal(sig.(syscall.Signal))
		}
	}
}

// daemonOnly are the limits and the sandbox the daemon would give this
// run's server, which only it enforces: its flags, over the config file's
// [servers.NAME], over the config's for all servers (a none lifting those
// below); nil when none. unread says why the config could not be read
// when its text names a limit or a sandbox anyway: a broken config is
// what keeps a daemon from starting, and its limits must not be lost with
// it.
func daemonOnly(o Options) (l *api.Limits, sb *sandbox.Spec, unread string) {
	var own, all api.Limits
	var server settings.Server
	var def sandbox.Spec
	getenv := func(k string) string {
		v, _ := proc.EnvValue(o.Env, k)
		return v
	}
	e, err := config.Load(getenv)
	if err == nil {
		e.WriteWarnings(o.Stderr)
	}
	switch {
	case err == nil && len(o.Argv) > 0:
		name := o.Name
		if name == "" {
			name = filepath.Base(o.Argv[0])
		}
		server = e.Settings.Servers[name]
		own, all, def = server.Limits, e.Settings.Limits, e.Settings.Sandbox
	case err != nil:
		if path, perr := config.Path(getenv); perr == nil && namesLimit(path) {
			return nil, nil, fmt.Sprintf("it cannot be read (%v)", err)
		}
	}
	return settings.EffectiveLimits(settings.MergeLimits(o.Limits, own), all),
		settings.MergeSandbox(o.Sandbox, o.NoSandbox, server, def), ""
}

// namesLimit says whether the file at path sets memory_max, cpu_max or
// pids_max anywhere, read as plain lines.
func namesLimit(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		key, _, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if ok && (key == "memory_max" || key == "cpu_max" || key == "pids_max" || key == "sandbox") {
			return true
		}
		// An inline table: capped = { memory_max = "1G" }.
		if ok && strings.Contains(line, "{") && (strings.Contains(line, "memory_max") || strings.Contains(line, "cpu_max") || strings.Contains(line, "pids_max") || strings.Contains(line, "sandbox")) {
			return true
		}
	}
	return false
}
