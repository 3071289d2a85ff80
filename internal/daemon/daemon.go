// Package daemon wires the per-user supervisor daemon: an oklog/run group of
// actors (signals, the socket server, the central reaper, the host watcher)
// around the registry, the store, spawning and the stop cascade. It owns the
// policy of who is stopped when; the mechanisms live in their own packages.
//
// # Caveats
//
// The daemon is a child subreaper and its reaper is the only waiter for
// children: nothing in this package may call exec.Cmd.Wait or
// os.Process.Wait.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/oklog/run"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/daemon/loghub"
	"github.com/seed-86a41135/supervisor/internal/daemon/metrics"
	"github.com/seed-86a41135/supervisor/internal/daemon/sharing"
	"github.com/seed-86a41135/supervisor/internal/egress"
	"github.com/seed-86a41135/supervisor/internal/keeper"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/session"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
	"github.com/seed-86a41135/supervisor/store"
)

// Config configures a daemon. Zero values take the documented defaults.
type Config struct {
	Paths api.Paths
	// Stderr receives the log too when not nil (foreground mode).
	Stderr io.Writer
	// Grace is the default SIGTERM grace of the stop cascade. Default 5 s.
	Grace time.Duration
	// EOFGrace is how long a server whose host died gets to exit on stdin
	// EOF before any signal. Default 500 ms.
	EOFGrace time.Duration
	// LogLevel is an hclog level name. Default "info".
	LogLevel string
	// Init, when set, makes this daemon the init of an agent container:
	// it runs Init's command, forwards signals to it, and when it exits
	// stops everything left and returns (`supervisor init`).
	Init *InitSpec
	// Settings are the shared-server, health, breaker and log tunables;
	// the zero value means settings.Defaults.
	Settings *settings.Daemon
	// MetricsAddr, when set, serves Prometheus metrics over HTTP at
	// /metrics on this host:port (internal/daemon/metrics). Off by default.
	MetricsAddr string
	// Pprof adds Go's profiles at /debug/pprof/ to the metrics address
	// (--pprof; needs MetricsAddr).
	Pprof bool
	// MetricsNames adds per-server-name usage families to the metrics
	// (--metrics-names): one series per name, so off by default.
	MetricsNames bool
	// Cgroups enables a cgroup per server where a writable cgroup2
	// hierarchy exists (never required). Off, the cascade relies on
	// process groups, markers and pipe holders alone.
	Cgroups bool
	// InPlace lets a shim exec its server in its own place where the
	// kernel tells a pidfd's exit status (Linux 6.15+): no shim process
	// stays beside each server (inplace.go). Off, the daemon spawns
	// every server itself.
	InPlace bool
	// Reload re-reads the config file with the environment and flags the
	// daemon started with (SIGHUP, `supervisor daemon reload`); nil: this
	// daemon has nothing to reload. Its error is logged and answered, and
	// the daemon keeps its current values.
	Reload func() (*Tunables, error)
}

// Daemon is one running supervisor daemon.
type Daemon struct {
	cfg           Config
	log           hclog.Logger
	store         *store.Store
	reg           *registry.Registry
	reaper        *spawn.Reaper
	exe           string       // this binary, run as the servers' log hub; "" when unknown
	keeperPID     int          // the keeper that restarts this daemon (keeper.go)
	keeperTok     proc.Token   // its token
	keeperWatches bool         // it watches from outside: it replaced the first one
	hubs          *loghub.Hubs // the log hubs (internal/daemon/loghub); nil when none can start
	usage         usageCache
	watcher       *session.Watcher
	cgroups       *cgroup.Manager // nil: no cgroups (none writable, or turned off)
	breakers      *breakers
	instance      string // the SUPERVISOR_INSTANCE marker of this state directory
	initSession   string // supervisor init: the command's session marker
	cascade       *shutdown.Cascade
	started       time.Time
	feat          map[string]bool
	limits        []string               // why a facility is off, for status
	sandboxCaps   sandbox.Capabilities   // what this kernel can enforce of a sandbox (sandbox.go)
	metrics       *metrics.Set           // Prometheus metrics (internal/daemon/metrics; the gauges in metrics.go)
	shared        sharing.Slots[*shared] // shared servers by port (ensure)

	mu       sync.Mutex
	live     map[string]*live      // by process id
	claimed  map[string]*live      // by process id: a stop of it is under way, whether or not it has exited (stopIDsSince; taken under the live's stopMu: live.stopMu before d.mu)
	hosts    map[string]func()     // session id → cancel of its host watch
	brokers  map[string]*brokerRef // brokers of shared servers (run --share) by server key
	facts    *factBook             // what brokers learned about server keys
	conns    map[*api.Conn]bool    // open connections, closed on exit
	stopping bool                  // refusing new runs
	recovery *api.Recovery         // the reconcile at start
	dying    map[string]string     // sessions whose host died, by id: the next batch to end

	stopReq chan stopRequest
	// life ends when the actors have: the tasks that only wait (a
	// monitor, a shared server's supervisor, retrying a failed stop) end
	// with it.
	life context.Context
	// tasks own the goroutines no actor owns (tasks.go).
	tasks tasks
	// connCap and reqCap bound the open connections, and those that are
	// not a server's lifeline (conns.go); reqConns counts the latter.
	connCap, reqCap int
	reqConns        int
	capWarned       atomic.Int64 // when runs refused at the server cap were last logged (unix ns)
	// answering counts stop requests (stop, session end, restart) whose
	// stops are under way: the daemon's exit lets them answer before it
	// closes their connections (awaitAnswers).
	answering atomic.Int32
	// fdBudget is the fd limit less the cascade's reserve; starting counts
	// the server starts in flight against it (reserveServer).
	fdBudget int
	starting int

	tun      atomic.Pointer[tunables] // settings and graces: d.settings(), swapped by a reload
	reloadMu sync.Mutex               // one reload at a time
}

// stopRequest is `daemon stop`: the outcomes go back on reply, and the
// stopper waits for sent before exiting so the reply is not cut off by the
// connections being closed.
type stopRequest struct {
	reply chan []shutdown.Outcome
	sent  chan struct{}
	keep  bool             // --keep-processes: leave every server running
	opt   shutdown.Options // the stop's grace and progress
}

// Run runs a daemon until it is stopped (signal or `daemon stop`). It
// returns *AlreadyRunningError when another daemon holds the lock.
func Run(ctx context.Context, cfg Config) (err error) {
	cfg = cfg.withDefaults()
	paths := cfg.Paths
	if err := ensureStateDir(paths); err != nil {
		return err
	}
	d := newDaemon(cfg)
	rot := &lumberjack.Logger{Filename: paths.Log(), MaxSize: 10, MaxBackups: 3}
	defer rot.Close()
	d.log = newDaemonLog(rot, cfg)
	// A detached daemon's stderr is /dev/null: why it could not start must
	// be in the log the CLI points users to.
	defer func() {
		var already *AlreadyRunningError
		switch {
		case errors.As(err, &already):
			// Said in the log too: who held the lock is what a launch
			// that waited for a daemon nobody started wants to know.
			d.log.Info("another daemon holds the singleton lock: this one steps aside", "holder", already.PID, "lock", already.Lock)
		case err != nil:
			d.log.Error("daemon cannot run", "err", err)
		}
	}()

	if err := socketDir(paths); err != nil {
		return err
	}
	lock, err := lockSingleton(paths.Lock())
	if err != nil {
		return err
	}
	defer lock.Close()
	// A metrics address that cannot be had fails the start before the
	// reconcile acts on anything.
	var ms *metrics.Server
	if cfg.MetricsAddr != "" { // Prometheus metrics over HTTP (metrics.go)
		if ms, err = d.listenMetrics(cfg.MetricsAddr); err != nil {
			return err
		}
		// Closed here if the daemon fails before serving (Serve owns it
		// after; closing twice is harmless).
		defer ms.Close()
	}
	return d.runHoldingLock(ctx, cfg, ms)
}

// runHoldingLock is Run once the daemon holds the singleton lock: it
// reconciles what an earlier daemon left, serves until the daemon stops,
// and closes what it opened. ms serves the metrics, when not nil.
func (d *Daemon) runHoldingLock(ctx context.Context, cfg Config, ms *metrics.Server) (err error) {
	paths := cfg.Paths
	d.instance = paths.Instance()
	removeCgroupRoot := d.setUpFeatures(cfg)
	defer removeCgroupRoot() // when empty: a daemon that keeps processes leaves it

	var loaded storeContent
	d.store, loaded, err = openStore(paths.DB(), d.log)
	if err != nil {
		return err
	}
	defer func() {
		if err := d.store.Close(); err != nil {
			d.log.Error("close the registry store", "err", err)
		}
	}()
	if err := d.loadRegistry(loaded); err != nil {
		return err
	}
	d.reaper = spawn.NewReaper(d.log.Named("reaper"))
	if exe, xerr := os.Executable(); xerr == nil {
		d.exe = exe
		d.hubs = loghub.New(d.log.Named("loghub"), fdLimit(), d.startHub)
		defer d.hubs.Close()
	} else {
		d.log.Warn("cannot find this binary: servers write their logs directly (rotated by copy and truncate)", "err", xerr)
	}
	d.cascade = d.newCascade(cfg.Init != nil)
	life, endLife := context.WithCancel(context.Background())
	d.life = life
	defer func() { // before the store closes: tasks write to it
		endLife()
		if left := d.tasks.wait(taskWait); len(left) > 0 {
			d.log.Warn("exiting with background work under way: a stop left is resumed by the next daemon", "tasks", left)
		}
	}()
	d.connCap, d.reqCap, d.fdBudget = connCaps(d.log)
	if d.watcher, err = session.NewWatcher(d.log.Named("hosts")); err != nil {
		return err
	}
	defer d.watcher.Close()
	// A stop on purpose is told to a keeper that is not the parent.
	defer func() {
		if err == nil && cfg.Init == nil {
			if merr := markStopped(paths.StateDir); merr != nil {
				d.log.Warn("stop not told to a keeper watching by pidfd: it may start a daemon again", "err", merr)
			}
		}
	}()
	// What an earlier daemon said of its stop is no longer news.
	os.Remove(filepath.Join(paths.StateDir, keeper.StoppedFile))
	if cfg.Init == nil && d.exe != "" {
		d.watchKeepers()
	}

	ln, err := d.recoverAndListen(paths, loaded.rebuilt)
	if err != nil {
		return err
	}
	return d.runGroup(ctx, cfg, ln, ms)
}

// recoverAndListen reconciles the registry with what runs, then listens
// on the daemon's socket. rebuilt tells how the store was rebuilt, if it
// was.
func (d *Daemon) recoverAndListen(paths api.Paths, rebuilt *api.StoreRebuilt) (*api.Listener, error) {
	// Reconcile before the socket accepts anything (design §7).
	rec := d.reconcile()
	rec.StoreRebuilt = rebuilt
	d.recovery = &rec

	// We hold the singleton lock, so whatever socket is left at the path
	// is a dead daemon's.
	ln, err := api.Listen(paths.Socket)
	if err != nil {
		return nil, err
	}
	d.log.Info("daemon started", "pid", os.Getpid(), "version", api.Version, "state", paths.StateDir, "socket", paths.Socket)
	d.event("daemon.start", "", "", fmt.Sprintf("pid %d version %s", os.Getpid(), api.Version))
	return ln, nil
}

// withDefaults is cfg with the documented defaults for its zero values.
func (cfg Config) withDefaults() Config {
	if cfg.Grace <= 0 {
		cfg.Grace = shutdown.DefaultGrace
	}
	if cfg.EOFGrace <= 0 {
		cfg.EOFGrace = shutdown.DefaultEOFGrace
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "info"
	}
	if cfg.Settings == nil {
		s := settings.Defaults()
		cfg.Settings = &s
	}
	return cfg
}

// ensureStateDir makes the state directory of paths, private, unless a
// keeper restarts this daemon in one that is gone.
func ensureStateDir(paths api.Paths) error {
	if os.Getenv(keeper.EnvRestart) == "1" {
		// Started again by its keeper: the instance is its state
		// directory, and one removed meanwhile is not made again.
		if _, err := os.Stat(paths.StateDir); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("state directory %s is gone: not starting again in its place (a new daemon starts with the next supervisor command)", paths.StateDir)
		}
	}
	return api.EnsurePrivateDir(paths.StateDir)
}

// newDaemon is a daemon of cfg before it has opened anything.
func newDaemon(cfg Config) *Daemon {
	d := &Daemon{
		cfg: cfg, started: time.Now(),
		live: map[string]*live{}, claimed: map[string]*live{}, hosts: map[string]func(){}, conns: map[*api.Conn]bool{},
		brokers: map[string]*brokerRef{},
		stopReq: make(chan stopRequest),
		feat:    map[string]bool{},
	}
	d.metrics = newMetrics(d)
	d.setTunables(*cfg.Settings, cfg.Grace, cfg.EOFGrace)
	return d
}

// newDaemonLog is the daemon's logger, writing to rot and, in the
// foreground, to cfg.Stderr too.
func newDaemonLog(rot io.Writer, cfg Config) hclog.Logger {
	out := rot
	if cfg.Stderr != nil {
		out = io.MultiWriter(rot, cfg.Stderr)
	}
	return hclog.New(&hclog.LoggerOptions{Name: "supervisor", Output: out, Level: hclog.LevelFromString(cfg.LogLevel)})
}

// loadRegistry builds the registry, the fact book and the breakers on
// the store just opened, whose content is loaded.
func (d *Daemon) loadRegistry(loaded storeContent) error {
	d.reg = registry.New(d.store, nil, loaded.sessions, loaded.procs)
	if r := loaded.rebuilt; r != nil {
		// Before the reconcile, which rebuilds the registry from the
		// markers and reports what it found after this.
		d.event("daemon.store_rebuilt", "", "", fmt.Sprintf("registry unreadable (%s): moved aside to %s; rebuilt from the markers of running processes", r.Reason, r.MovedTo))
	}
	var err error
	if d.facts, err = newFactBook(d.store, d.log.Named("facts")); err != nil {
		return err
	}
	if d.breakers, err = newBreakers(d.store, d.settings().Breaker, d.log.Named("breaker")); err != nil {
		return err
	}
	return nil
}

// newCascade is the daemon's stop cascade; asInit: this daemon is the
// init of `supervisor init`.
func (d *Daemon) newCascade(asInit bool) *shutdown.Cascade {
	c := &shutdown.Cascade{Log: d.log.Named("shutdown"), Excluded: []int{os.Getpid()},
		AfterSignal: func() { fault("cascade.signalled") }, ScanFault: scanFault()}
	if d.feat["subreaper"] && !asInit {
		// An orphan the daemon adopted descends from a server it spawned.
		// Not as init (PID 1 of a container, or its subreaper): then it
		// adopts the host's orphans too.
		c.Reaper = os.Getpid()
	}
	return c
}

// runGroup runs the daemon's actors on ln (and ms, when metrics are
// served) until one ends: the daemon stops.
func (d *Daemon) runGroup(ctx context.Context, cfg Config, ln *api.Listener, ms *metrics.Server) error {
	var g run.Group
	if cfg.Init != nil {
		ictx, cancel := context.WithCancel(ctx)
		g.Add(func() error { return d.runInit(ictx, cfg.Init) }, func(error) { cancel() })
	} else {
		g.Add(d.stopper(ctx))
	}
	d.addActors(&g, ln, cfg.Paths)
	if ms != nil {
		g.Add(ms.Run, ms.Stop)
	}
	err := g.Run()
	d.log.Info("daemon exiting")
	if errors.Is(err, errInitDone) {
		return nil
	}
	return err
}

// Features reports what the daemon uses.
func (d *Daemon) features() map[string]bool {
	out := map[string]bool{}
	for k, v := range d.feat {
		out[k] = v
	}
	return out
}

// answerWait bounds how long an exiting daemon waits for stop requests
// to answer: a stop that `daemon stop` shortened ends with the daemon's
// own, moments before or after it.
const answerWait = 2 * time.Second

// awaitAnswers waits (up to limit) until no stop request is between the
// end of its stop and its answer: a `session end` whose stop the daemon's
// own stop shortened hears its outcome, not a closed connection.
func (d *Daemon) awaitAnswers(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for d.answering.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

func (d *Daemon) closeConns() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for c := range d.conns {
		c.Close()
	}
}

// serve accepts connections until the listener is closed.
func (d *Daemon) serve(ln *api.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := 5 * time.Millisecond
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of fds or buffers is a passing state of the machine, not
			// a reason to leave every server unsupervised: wait and retry,
			// as net/http does.
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
				errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ECONNABORTED) {
				d.log.Warn("accept failed; retrying", "err", err, "in", backoff)
				time.Sleep(backoff)
				backoff = min(2*backoff, time.Second)
				continue
			}
			d.log.Error("accept", "err", err)
			return fmt.Errorf("accept on %s: %w", d.cfg.Paths.Socket, err)
		}
		backoff = 5 * time.Millisecond
		conn.SetLimits(api.MaxFrame, api.MaxReply)
		wg.Add(1)
		if !d.admit(conn) {
			go func() {
				defer wg.Done()
				d.refuseBusy(conn)
			}()
			continue
		}
		go func() {
			defer wg.Done()
			defer func() {
				d.forget(conn)
				conn.Close()
			}()
			d.handle(conn)
		}()
	}
}

// socketDir prepares the socket's directory. The state directory and the
// /tmp fallback are ours to create and restrict; a directory the user chose
// through SUPERVISOR_SOCKET is created if missing but never re-moded (it may
// be their home). Either is refused when another user could replace the
// socket in it, before anything else is done: Listen would refuse later.
func socketDir(p api.Paths) error {
	dir := filepath.Dir(p.Socket)
	if dir == p.StateDir || dir == api.FallbackDir() {
		return api.EnsurePrivateDir(dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create socket directory %s: %w", dir, err)
	}
	if err := api.CheckSocketDir(p.Socket); err != nil {
		return fmt.Errorf("socket %s: %w", p.Socket, err)
	}
	return nil
}

// storeContent is what openStore read: the records, and why the file was
// replaced if it was.
type storeContent struct {
	sessions []registry.Session
	procs    []registry.Process
	rebuilt  *api.StoreRebuilt
}

// openStore opens and loads the registry. A file bbolt cannot read (an open
// error, a panic inside bbolt, a failed consistency check, a record that
// does not decode) is moved aside as registry.db.corrupt-<time>, kept for
// the user, and a fresh one is started (design §7): the registry is a cache
// of the truth, the reconcile rebuilds it from the markers of the running
// processes, and the daemon must come up, or every shim runs in local mode
// from then on. A file held by another process, of a newer schema, or not
// readable for permissions is an error instead: none of those is damage,
// and replacing it would lose what it holds.
func openStore(path string, log hclog.Logger) (*store.Store, storeContent, error) {
	s, err := store.Open(path, store.Options{})
	if err == nil {
		var c storeContent
		c.sessions, c.procs, err = s.Load()
		if err == nil {
			return s, c, nil
		}
		_ = s.Close() // the load's error is the one to report
		if !errors.Is(err, store.ErrCorrupt) {
			return nil, storeContent{}, err
		}
	}
	if errors.Is(err, store.ErrLocked) || errors.Is(err, store.ErrSchema) || errors.Is(err, fs.ErrPermission) {
		return nil, storeContent{}, err
	}
	aside, rerr := moveAside(path, time.Now())
	if rerr != nil {
		return nil, storeContent{}, fmt.Errorf("%w (moving it aside failed: %w; move %s elsewhere yourself and start the daemon again)", err, rerr, path)
	}
	log.Error("registry unreadable: moved aside, rebuilding it from the markers of running processes", "err", err, "moved_to", aside)
	c := storeContent{rebuilt: &api.StoreRebuilt{MovedTo: aside, Reason: err.Error()}}
	if s, err = store.Open(path, store.Options{}); err != nil {
		return nil, storeContent{}, fmt.Errorf("start a fresh registry after moving the unreadable one to %s: %w", aside, err)
	}
	return s, c, nil
}

// moveAside renames the file at path to path.corrupt-<UTC now>, with a
// counter when that name is taken: an earlier damaged file is never
// replaced. The daemon holds the singleton lock, so no other daemon races
// for the name.
func moveAside(path string, now time.Time) (string, error) {
	base := path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	aside := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(aside); err != nil {
			break // free, or not even stat-able: Rename says which
		}
		aside = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(path, aside); err != nil {
		return "", err
	}
	return aside, nil
}

// setUpFeatures finds what this machine lets the daemon do: be a
// subreaper, give each server a cgroup, let shims exec their servers in
// their own place. What it cannot is logged and listed in d.limits (for
// `status`). cleanup removes the instance's cgroup subtree once it is
// empty.
func (d *Daemon) setUpFeatures(cfg Config) (cleanup func()) {
	cleanup = func() {}
	if err := proc.SetChildSubreaper(); err != nil {
		d.log.Warn("not a subreaper: orphaned descendants will go to init", "err", err)
		d.limits = append(d.limits, fmt.Sprintf("not a subreaper (%v): escaped descendants are found by their markers", err))
	} else {
		d.feat["subreaper"] = true
	}
	d.feat["process_handles"] = proc.HandlesSupported() // pidfd, kqueue or process HANDLE
	d.feat["cgroup"] = false
	if cfg.Cgroups {
		// One subtree per instance (uid and state directory), so daemons
		// of other instances never meet in a cgroup.
		name := filepath.Join(fmt.Sprintf("supervisor-%d", os.Getuid()), d.instance)
		if m, err := cgroup.Detect(name); err != nil {
			d.log.Info("cgroups not in use: process groups and markers only", "why", err)
			d.limits = append(d.limits, fmt.Sprintf("no cgroups (%v): process groups and markers only", err))
		} else {
			d.cgroups = m
			d.feat["cgroup"] = true
			d.log.Info("cgroups in use", "root", m.Root())
			cleanup = m.RemoveRoot
		}
	}

	d.sandboxCaps = sandbox.Support()
	d.sandboxCaps.NoNamespace = egress.NamespaceSupport()
	if os.Getenv(settings.EnvSandboxNetns) == "off" {
		d.sandboxCaps.NoNamespace = "network namespaces turned off (" + settings.EnvSandboxNetns + "=off)"
	}
	d.feat["sandbox"] = d.sandboxCaps.Filesystem
	if !d.sandboxCaps.Filesystem {
		d.limits = append(d.limits, "no sandbox ("+d.sandboxCaps.Why+"): sandboxed servers are refused")
	}
	if cfg.InPlace {
		if why := inPlaceUnsupported(); why != "" {
			d.log.Info("servers are spawned by the daemon, not exec'd in their shim's place", "why", why)
			d.limits = append(d.limits, "no exec in the shim's place ("+why+"): a shim process stays beside each server")
		} else {
			d.feat["in_place"] = true
		}
	}
	return cleanup
}

// stopper is the actor that ends the daemon: SIGTERM, SIGINT or `daemon
// stop` stop every session (or, for an upgrade, leave every server to the
// next daemon), then it returns and the group ends; SIGHUP reloads the
// config.
func (d *Daemon) stopper(ctx context.Context) (execute func() error, interrupt func(error)) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	stopCtx, cancel := context.WithCancel(ctx)
	return func() error {
		defer signal.Stop(sigs)
		var req *stopRequest
	wait:
		for {
			select {
			case s := <-sigs:
				if s == syscall.SIGHUP {
					d.log.Info("SIGHUP received: reloading the config")
					_, _ = d.reload() // it logs its failure and keeps the old config
					continue
				}
				d.log.Info("signal received: stopping every session", "signal", s)
			case r := <-d.stopReq:
				req = &r
				d.log.Info("daemon stop requested", "keep_processes", r.keep)
			case <-stopCtx.Done():
				return nil
			}
			break wait
		}
		var outcomes []shutdown.Outcome
		if req != nil && req.keep {
			// An upgrade: the next daemon re-adopts everything. Runs
			// are refused from here, and the lifelines closing with
			// the connections stop nothing.
			d.mu.Lock()
			d.stopping = true
			d.mu.Unlock()
			d.detachShared()
			d.log.Info("exiting and leaving every server running for the next daemon", "live", len(d.reg.Processes(registry.Filter{})))
			d.event("daemon.stop", "", "", "keeping processes for the next daemon")
			outcomes = []shutdown.Outcome{}
		} else {
			var opt shutdown.Options
			if req != nil {
				opt = req.opt
			}
			outcomes = d.stopAllWith(context.WithoutCancel(ctx), opt)
			d.event("daemon.stop", "", "", fmt.Sprintf("stopped every session (%d processes)", len(outcomes)))
		}
		if req != nil {
			req.reply <- outcomes
			select {
			case <-req.sent:
			case <-time.After(5 * time.Second):
			}
		}
		return nil
	}, func(error) { cancel() }
}

// addActors adds the daemon's standing actors to g: the reaper, the host
// watcher, log rotation, retention, the reader of Landlock's denials, and
// the socket's accept loop (whose
// end closes every connection). Each ends when g interrupts it.
func (d *Daemon) addActors(g *run.Group, ln *api.Listener, paths api.Paths) {
	{
		rctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return d.reaper.Run(rctx) }, func(error) { cancel() })
	}
	{
		wctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return d.watcher.Run(wctx) }, func(error) { cancel() })
	}
	{
		lctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return d.runLogRotation(lctx) }, func(error) { cancel() })
	}
	{
		cctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return d.runRetention(cctx) }, func(error) { cancel() })
	}
	// Opened here, where its actor closes it: a daemon that fails before
	// its actors start leaves no socket behind (and no records queued).
	if r := d.openDenials(); r != nil {
		dctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return d.watchDenials(dctx, r) }, func(error) { cancel() })
	}
	{
		sock := &socketKeeper{cur: ln, path: paths.Socket, paths: paths}
		sctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return d.keepSocket(sctx, sock) }, func(error) {
			cancel()
			sock.close()
			d.hubs.Closing() // the hubs' connections end: let them go, not replaced
			d.awaitAnswers(answerWait)
			d.closeConns()
		})
	}
}
