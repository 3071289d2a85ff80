//go:build linux

// Command bench measures the supervisor against real processes, a real
// daemon and real signals, and prints one markdown table (median and p99
// over the trials of each figure) plus a JSON file with the same numbers:
//
//   - host-death-overhead: a fake host (the binary symlinked as "bench-host")
//     runs three servers through `supervisor run` on a warm daemon: one that
//     exits on SIGTERM, one that leaves a setsid grandchild holding its
//     stdout and exits on stdin EOF, one that ignores SIGTERM (--grace
//     200ms). The host is SIGKILLed; raw is the time until the last of the
//     three servers and the grandchild is gone (pidfds), overhead is raw
//     minus the 700ms of graces that must elapse (500ms EOF grace + 200ms).
//   - spawn-overhead: `supervisor run -- /bin/true` on a warm daemon against
//     /bin/true run directly; cold-start: the same run with no daemon (the
//     shim starts one; `supervisor daemon stop` between trials).
//   - pipe-holder-eof: the bench itself is the host of `supervisor run --
//     <bin> _fixture escape` on pipes; it closes the server's stdin and
//     measures from the server's exit to EOF on the host's stdout read end,
//     which the escaped grandchild holds until the supervisor stops it.
//   - spawn-storm: per storm a free port P (listen on 127.0.0.1:0, close),
//     then N (--storm-calls, 200; 20 with --quick) concurrent `supervisor
//     ensure --json --session storm-T --port P --linger 1ms -- <bin>
//     _fixture listen P` on a warm daemon. Each call's latency runs from its
//     process's start (exec done) to its exit. The daemon must have started
//     exactly one server for P (`ps --all --json`) and no call may fail;
//     either is a failed run. The server's readiness floor is a directly
//     started `_fixture listen P2`, timed until P2 accepts a connection;
//     the same burst of N `supervisor version` shows what N processes
//     starting at once cost on this machine without the daemon. After each
//     storm `session end storm-T` stops the server (linger 1ms) and the
//     bench waits until its pid is gone.
//   - recovery: a daemon starts on a registry of N records (--recovery-records,
//     4000; 40 with --quick) in N/4 sessions: half are live `sleep 3600`
//     carrying the instance's markers, half name processes that have exited.
//     Reconcile time (the daemon's own recovery.duration_ms), exec → socket
//     answering, the daemon's RSS on an empty store and after recovery, and
//     `daemon stop` until the N/2 adopted processes are gone. adopted and
//     lost must both be N/2. Each trial starts N processes, so this figure
//     has its own trial count (--recovery-trials, 5; 2 with --quick).
//   - scale: N hosts (--scale-sessions, 1000; 10 with --quick; fewer,
//     said on stderr, when pid_max or memory cannot hold them) with 4
//     `supervisor run -- sleep 3600` each on a private daemon: its RSS,
//     `ps --json` latency, registry.db size, and every session ended at
//     once by `daemon stop` or by SIGKILL of all hosts (alternating trials,
//     --scale-trials). See scale.go.
//   - peers: Debian's supervisord (stopasgroup, killasgroup), `tini -s -g`
//     and dumb-init against ours stopping one tree (sh, a child in its
//     group, a setsid escapee): survivors and stop time. Missing peers are
//     installed with apt-get (as root; with --quick only when CI=true).
//     See peers.go.
//   - shared-memory: N = 1, 5, 10 (1, 2 with --quick) Go SDK clients of the
//     real server-everything and server-filesystem (testdata/npm), direct
//     (`supervisor run`) vs shared (`run --share`): the summed PSS and USS
//     (median of 5 readings) of every process each mode costs (servers
//     and their log writers; brokers, upstreams, log writers and the
//     shims that stay resident); the goal (shared ≤ direct / N + 5 MiB) and the fair
//     one (shared ≤ direct at N = 1 + 5 MiB).
//     Skipped with a note when node_modules is missing (an error under
//     CI=true). relay-cost: raw JSON-RPC over a shim's pipes to `_fixture
//     mcp`, direct vs shared: round trips of 1 KiB echo calls
//     (--relay-calls, 10,000; 200 with --quick) and throughput on 1 MiB
//     results. Both on a private daemon (linger 1s). See share.go.
//   - spawn-overhead also runs again with 2,000 (200 with --quick)
//     unrelated `sleep 3600` processes of this user on the machine: every
//     stop scans /proc once (issue 16).
//   - lazy-start: a session of 10 (3 with --quick) server-filesystem servers
//     connected at once, direct against `run --lazy` with a warm cache:
//     time to tools/list answered, server processes then, and a lazy
//     server's first call against its own start. See lazy.go.
//   - npx-chain: server-filesystem as node, as npx and as npx under
//     `supervisor run`: start time and the PSS of every process each takes
//     (issue 16's launcher goal). See npx.go.
//
// Everything runs in a temporary directory (SUPERVISOR_STATE_DIR and
// SUPERVISOR_SOCKET point into it), and every process the bench started is
// checked by PID and creation token at the end and SIGKILLed if still alive.
// A p99 is given only over 100 samples or more (nearest rank); below that
// the table shows the median and the maximum, never a maximum called p99.
// The spawn-storm rows are per storm too: the p50 and p99 within each
// storm, then their median and p99 over the storms (--storm-trials, by
// default --trials).
//
// Regenerate docs/benchmarks.md's numbers from the repository root with
//
//	go run ./cmd/bench            # 20 trials; table on stdout, cmd/bench/results.json
//	go run ./cmd/bench --quick    # 3 trials (storms of 20 calls), a smoke run
//	go run ./cmd/bench --only recovery --out /tmp/recovery.json   # one figure
//
// Progress goes to stderr; --keep leaves the temporary directory (daemon log
// in state/supervisor.log) for a look at where the time goes.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

const (
	mainPkg = "github.com/seed-86a41135/supervisor/cmd/supervisor"
	leanPkg = "github.com/seed-86a41135/supervisor/cmd/supervisor-run"
)

// Graces of the host-death scenario that must elapse before the last
// process can be gone: the EOF grace of a dead host's servers, then the
// ignore-term server's --grace.
const (
	eofGrace    = 500 * time.Millisecond
	stubbornDur = 200 * time.Millisecond
	graces      = eofGrace + stubbornDur
)

// trialLimit bounds every wait of one trial.
const trialLimit = 20 * time.Second

func main() {
	os.Exit(run(context.Background(), os.Args[1:], commandLine(), os.Stdout, os.Stderr))
}

// commandLine is how the bench was invoked: `go run ./cmd/bench ARGS` when the
// binary lives in go run's build cache, else the argv itself.
func commandLine() string {
	exe := os.Args[0]
	if strings.Contains(exe, "go-build") || strings.Contains(filepath.Dir(exe), string(filepath.Separator)+"exe") {
		return strings.Join(append([]string{"go", "run", "./cmd/bench"}, os.Args[1:]...), " ")
	}
	return strings.Join(os.Args, " ")
}

type options struct {
	quick         bool
	trials        int
	stormCalls    int
	stormTrials   int
	out           string
	bin           string
	keep          bool
	cgroups       string
	inPlace       string
	pprof         string
	recRecords    int
	recTrials     int
	scaleSessions int
	scaleTrials   int
	peerTrials    int
	relayCalls    int
	only          map[string]bool // figures to run; nil means all
}

// run runs the whole bench and returns the exit status.
func run(ctx context.Context, args []string, cmdline string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.BoolVar(&o.quick, "quick", false, "small N (3 trials): a smoke run")
	fs.IntVar(&o.trials, "trials", 0, "trials per figure (default 20, 3 with --quick)")
	fs.IntVar(&o.stormCalls, "storm-calls", 0, fmt.Sprintf("concurrent ensure calls per spawn storm (default %d, %d with --quick)", stormCalls, stormCallsQuick))
	fs.IntVar(&o.stormTrials, "storm-trials", 0, "spawn storms (default: --trials)")
	fs.StringVar(&o.out, "out", filepath.Join("cmd", "bench", "results.json"), "write the results as JSON here")
	fs.StringVar(&o.bin, "bin", "", "a prebuilt supervisor binary (default: go build "+mainPkg+")")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (daemon log, host stderr)")
	fs.StringVar(&o.cgroups, "cgroups", "", "the daemon's cgroup mode, auto or off (default: the daemon's own default, auto)")
	fs.StringVar(&o.inPlace, "in-place", "", "whether shims exec their server in their own place, auto or off (default: the daemon's own default, auto)")
	fs.StringVar(&o.pprof, "pprof", "", "serve the recovery and scale figures' daemons' Go profiles at http://ADDR/debug/pprof/ (one daemon at a time), to profile them while they run")
	fs.IntVar(&o.recRecords, "recovery-records", 0, fmt.Sprintf("records in the recovery figure's registry, half live (default %d, %d with --quick)", recoveryRecords, recoveryRecordsQuick))
	fs.IntVar(&o.recTrials, "recovery-trials", 0, fmt.Sprintf("trials of the recovery figure (default %d, %d with --quick)", recoveryTrials, recoveryTrialsQuick))
	fs.IntVar(&o.scaleSessions, "scale-sessions", 0, fmt.Sprintf("sessions of 4 servers in the scale figure (default %d, %d with --quick)", scaleSessions, scaleSessionsQuick))
	fs.IntVar(&o.scaleTrials, "scale-trials", 0, fmt.Sprintf("trials of the scale figure, alternating daemon stop and host SIGKILL (default %d, %d with --quick)", scaleTrials, scaleTrialsQuick))
	fs.IntVar(&o.peerTrials, "peer-trials", 0, fmt.Sprintf("trials per peer in the peers figure (default %d, %d with --quick)", peerTrials, peerTrialsQuick))
	fs.IntVar(&o.relayCalls, "relay-calls", 0, fmt.Sprintf("tools/call echo round trips per mode in the relay-cost figure (default %d, %d with --quick)", relayCalls, relayCallsQuick))
	only := fs.String("only", "", "run only these figures, comma-separated ("+strings.Join(figureNames, ", ")+")")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *only != "" {
		o.only = map[string]bool{}
		for _, name := range strings.Split(*only, ",") {
			if !slices.Contains(figureNames, name) {
				fmt.Fprintf(stderr, "bench: --only %q: want some of %s\n", name, strings.Join(figureNames, ", "))
				return 2
			}
			o.only[name] = true
		}
		// A partial run must not overwrite the full run's results.json.
		outSet := false
		fs.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
		if !outSet {
			fmt.Fprintln(stderr, "bench: --only needs --out (cmd/bench/results.json holds the full run)")
			return 2
		}
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if o.trials == 0 {
		o.trials = 20
		if o.quick {
			o.trials = 3
		}
	}
	if o.stormCalls == 0 {
		o.stormCalls = stormCalls
		if o.quick {
			o.stormCalls = stormCallsQuick
		}
	}
	if o.stormTrials == 0 {
		o.stormTrials = o.trials
	}
	if o.recRecords == 0 {
		o.recRecords = recoveryRecords
		if o.quick {
			o.recRecords = recoveryRecordsQuick
		}
	}
	if o.recTrials == 0 {
		o.recTrials = recoveryTrials
		if o.quick {
			o.recTrials = recoveryTrialsQuick
		}
	}
	if o.scaleSessions == 0 {
		o.scaleSessions = scaleSessions
		if o.quick {
			o.scaleSessions = scaleSessionsQuick
		}
	}
	if o.scaleTrials == 0 {
		o.scaleTrials = scaleTrials
		if o.quick {
			o.scaleTrials = scaleTrialsQuick
		}
	}
	if o.peerTrials == 0 {
		o.peerTrials = peerTrials
		if o.quick {
			o.peerTrials = peerTrialsQuick
		}
	}
	if o.scaleSessions < 1 || o.scaleTrials < 1 || o.peerTrials < 1 {
		fmt.Fprintln(stderr, "bench: --scale-sessions, --scale-trials and --peer-trials must be at least 1")
		return 2
	}
	if o.recRecords < 2 || o.recRecords%2 != 0 || o.recTrials < 1 {
		fmt.Fprintln(stderr, "bench: --recovery-records must be even and at least 2, --recovery-trials at least 1")
		return 2
	}
	if o.inPlace != "" && o.inPlace != "auto" && o.inPlace != "off" {
		fmt.Fprintf(stderr, "bench: --in-place %q: want auto or off\n", o.inPlace)
		return 2
	}
	if o.cgroups != "" && o.cgroups != "auto" && o.cgroups != "off" {
		fmt.Fprintf(stderr, "bench: --cgroups %q: want auto or off\n", o.cgroups)
		return 2
	}
	if o.trials < 1 || o.stormCalls < 1 || o.stormTrials < 1 {
		fmt.Fprintln(stderr, "bench: --trials, --storm-calls and --storm-trials must be at least 1")
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	b, err := newBench(ctx, o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	res, runErr := b.all(ctx)
	b.cleanup()
	if runErr != nil {
		fmt.Fprintf(stderr, "bench: %v\n", runErr)
		return 1
	}
	res.Command = cmdline
	res.fill()
	if err := writeJSON(o.out, res); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "bench: wrote %s\n", o.out)
	if _, err := io.WriteString(stdout, res.markdown()); err != nil {
		fmt.Fprintf(stderr, "bench: write the table: %v\n", err)
		return 1
	}
	if res.Failures > 0 {
		fmt.Fprintf(stderr, "bench: %d trial(s) failed; see above\n", res.Failures)
		return 1
	}
	return 0
}

// tracked is a process the bench caused to exist, to be checked at the end.
type tracked struct {
	pid  int
	tok  proc.Token
	what string
}

type bench struct {
	o      options
	log    io.Writer
	dir    string
	bin    string
	lean   string // supervisor-run beside bin; "" when there is none
	paths  api.Paths
	env    []string
	hostLn string // the binary under a non-launcher name
	errLog *os.File

	daemonPID int // the warm daemon of the spawn storms

	mu      sync.Mutex
	started []tracked
	byPID   map[int][]int // indices into started
}

func newBench(ctx context.Context, o options, log io.Writer) (*bench, error) {
	dir, err := os.MkdirTemp("", "supervisor-bench-")
	if err != nil {
		return nil, fmt.Errorf("create a temporary directory: %w", err)
	}
	b := &bench{o: o, log: log, dir: dir}
	b.paths = api.Paths{StateDir: filepath.Join(dir, "state"), Socket: filepath.Join(dir, "s.sock")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUPERVISOR_") && !strings.HasPrefix(kv, "CLAUDE_CODE_SESSION_ID=") {
			b.env = append(b.env, kv)
		}
	}
	b.env = append(b.env, api.EnvStateDir+"="+b.paths.StateDir, api.EnvSocket+"="+b.paths.Socket)
	if o.cgroups != "" {
		b.env = append(b.env, "SUPERVISOR_CGROUPS="+o.cgroups)
	}
	if o.inPlace != "" {
		b.env = append(b.env, "SUPERVISOR_IN_PLACE="+o.inPlace)
	}
	if b.errLog, err = os.Create(filepath.Join(dir, "stderr.log")); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	b.bin = o.bin
	if b.bin == "" {
		b.bin = filepath.Join(dir, "supervisor")
		b.progress("building %s", mainPkg)
		// Without cgo, as releases are built (scripts/release): a cgo
		// build of net is a dynamic binary, which loads libc at every
		// start.
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b.bin, mainPkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			b.errLog.Close()
			os.RemoveAll(dir)
			return nil, fmt.Errorf("go build %s: %w", mainPkg, err)
		}
		cmd = exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "supervisor-run"), leanPkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			b.errLog.Close()
			os.RemoveAll(dir)
			return nil, fmt.Errorf("go build %s: %w", leanPkg, err)
		}
	} else if b.bin, err = filepath.Abs(b.bin); err != nil {
		return nil, err
	}
	if lean := filepath.Join(filepath.Dir(b.bin), "supervisor-run"); fileExists(lean) {
		b.lean = lean
	}
	b.hostLn = filepath.Join(dir, "bench-host")
	if err := os.Symlink(b.bin, b.hostLn); err != nil {
		return nil, err
	}
	b.progress("temporary directory %s", dir)
	return b, nil
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.log, "bench: "+format+"\n", args...)
}

// track records pid (with its token, read now) for the final check.
func (b *bench) track(pid int, what string) {
	tok, err := proc.TokenOf(pid)
	if err != nil {
		return // already gone
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, i := range b.byPID[pid] {
		if b.started[i].tok.Matches(tok) {
			return
		}
	}
	if b.byPID == nil {
		b.byPID = map[int][]int{}
	}
	b.byPID[pid] = append(b.byPID[pid], len(b.started))
	b.started = append(b.started, tracked{pid, tok, what})
}

// cleanup stops the daemon through its own cascade, then SIGKILLs, by pid
// and verified token, anything the bench started that still runs.
func (b *bench) cleanup() {
	if b.daemonAnswers() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		cmd := b.cmd(ctx, "daemon", "stop")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.progress("daemon stop: %v: %s", err, strings.TrimSpace(string(out)))
		}
		cancel()
	}
	b.mu.Lock()
	started := append([]tracked(nil), b.started...)
	b.mu.Unlock()
	left := 0
	for _, t := range started {
		if proc.Verify(t.pid, t.tok) != nil {
			continue
		}
		h, err := proc.OpenHandle(t.pid, t.tok)
		if err != nil {
			continue
		}
		left++
		b.progress("leftover %s pid %d: SIGKILL", t.what, t.pid)
		h.Signal(unix.SIGKILL)
		if !h.Wait(5 * time.Second) {
			b.progress("leftover %s pid %d still running 5s after SIGKILL", t.what, t.pid)
		}
		h.Close()
	}
	b.progress("cleanup: %d processes tracked, %d left running and killed", len(started), left)
	b.errLog.Close()
	if b.o.keep {
		b.progress("kept %s", b.dir)
		return
	}
	os.RemoveAll(b.dir)
}

func (b *bench) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, b.bin, args...)
	cmd.Env = b.env
	return cmd
}

func (b *bench) daemonAnswers() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := api.Dial(ctx, b.paths.Socket)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// status asks the daemon for its status (and tracks its pid).
func (b *bench) status(ctx context.Context) (api.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := api.Dial(ctx, b.paths.Socket)
	if err != nil {
		return api.Status{}, err
	}
	defer c.Close()
	b.track(c.Daemon.PID, "daemon")
	var st api.Status
	err = c.Call(api.TypeStatus, nil, &st)
	return st, err
}

func (b *bench) startDaemon(ctx context.Context) error {
	if out, err := b.cmd(ctx, "daemon").CombinedOutput(); err != nil {
		return fmt.Errorf("supervisor daemon: %w: %s", err, out)
	}
	_, err := b.status(ctx)
	return err
}

func (b *bench) stopDaemon(ctx context.Context) error {
	if out, err := b.cmd(ctx, "daemon", "stop").CombinedOutput(); err != nil {
		return fmt.Errorf("supervisor daemon stop: %w: %s", err, out)
	}
	return nil
}

// figureNames name the steps of all, in order, for --only.
var figureNames = []string{"host-death-overhead", "spawn-overhead", "cold-start", "pipe-holder-eof", "spawn-storm", "recovery", "scale", "peers", "shared-memory", "relay-cost", "lazy-start", "npx-chain"}

// all runs every figure.
func (b *bench) all(ctx context.Context) (*Results, error) {
	res := &Results{Trials: b.o.trials, Quick: b.o.quick, StormCalls: b.o.stormCalls, StormTrials: b.o.stormTrials}
	res.Machine = machine()
	if err := b.startDaemon(ctx); err != nil {
		return nil, err
	}
	st, err := b.status(ctx)
	if err != nil {
		return nil, err
	}
	res.Machine.Supervisor = st.Version
	res.Machine.Features = st.Features

	steps := []func(context.Context, *Results) error{b.hostDeath, b.spawn, b.coldStart, b.pipeHolder, b.storm, b.recovery, b.scale, b.peers, b.sharedMemory, b.relayCost, b.lazyStart, b.npxChain}
	for i, step := range steps {
		if b.o.only != nil && !b.o.only[figureNames[i]] {
			continue
		}
		if err := step(ctx, res); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// spawn: supervised /bin/true on a warm daemon against a direct one.
func (b *bench) spawn(ctx context.Context, res *Results) error {
	trueBin, err := exec.LookPath("true")
	if err != nil {
		return err
	}
	b.progress("spawn-overhead: %d trials (%s vs supervisor run -- %s)", b.o.trials, trueBin, trueBin)
	timeRun := func(cmd *exec.Cmd) (time.Duration, error) {
		t0 := time.Now()
		err := cmd.Run()
		return time.Since(t0), err
	}
	for range 3 { // warm up: page cache, the daemon's first spawns
		if err := b.cmd(ctx, "run", "--", trueBin).Run(); err != nil {
			return fmt.Errorf("warm-up supervisor run -- %s: %w", trueBin, err)
		}
		if err := exec.Command(trueBin).Run(); err != nil {
			return fmt.Errorf("warm-up %s: %w", trueBin, err)
		}
	}
	emptyGo, err := b.buildEmptyGo(ctx)
	if err != nil {
		return err
	}
	direct := res.figure("spawn-overhead", "`/bin/true` run directly", "ms")
	sup := res.figure("spawn-overhead", "`supervisor run -- /bin/true`, warm daemon", "ms")
	added := res.figure("spawn-overhead", "**added by `supervisor run`** (goal ≤ 3 ms)", "ms")
	// What host configs launch (cmd/supervisor-run), in the same
	// alternation: it hands every run but the fast path to supervisor run.
	var lean, leanAdded *Figure
	if b.lean != "" {
		lean = res.figure("spawn-overhead", "`supervisor-run -- /bin/true` (the lean entry), warm daemon", "ms")
		leanAdded = res.figure("spawn-overhead", "**added by the lean entry** (goal ≤ 3 ms)", "ms")
	} else {
		b.progress("  no supervisor-run beside %s: the lean entry is not measured", b.bin)
	}
	// A sandboxed run (issue 31) beside the plain one, in the same trial:
	// what planning the rules, filtering the environment and confining
	// the forking or exec'ing thread add.
	var boxed, boxedAdded, leanBoxed, leanBoxedAdded *Figure
	// Its temporary directory apart from the bench's state directory, as
	// a user's /tmp is apart from ~/.local/state: a temp dir holding the
	// supervisor's state would be split around it into a rule per entry
	// (docs/sandbox.md), a cost no real layout pays.
	serverTmp := filepath.Join(b.dir, "server-tmp")
	if err := os.MkdirAll(serverTmp, 0o700); err != nil {
		return err
	}
	boxedCmd := func(args ...string) *exec.Cmd {
		cmd := b.cmd(ctx, args...)
		cmd.Env = append(slices.Clone(cmd.Env), "TMPDIR="+serverTmp)
		return cmd
	}
	if err := boxedCmd("run", "--sandbox", "--", trueBin).Run(); err != nil {
		b.progress("  supervisor run --sandbox fails here (%v): the sandbox is not measured", err)
	} else {
		boxed = res.figure("spawn-overhead", "`supervisor run --sandbox -- /bin/true`, warm daemon", "ms")
		boxedAdded = res.figure("spawn-overhead", "**added by --sandbox** to `supervisor run` (goal ≤ 1 ms)", "ms")
		if lean != nil {
			leanBoxed = res.figure("spawn-overhead", "`supervisor-run --sandbox -- /bin/true`, warm daemon", "ms")
			leanBoxedAdded = res.figure("spawn-overhead", "**added by --sandbox** to the lean entry (goal ≤ 1 ms)", "ms")
		}
	}
	ratio := res.figure("spawn-overhead", "ratio supervised / direct", "x")
	version := res.figure("spawn-overhead", "  `supervisor version` (the binary's own start, no daemon)", "ms")
	empty := res.figure("spawn-overhead", "  an empty Go program (the floor of any Go shim)", "ms")
	floor := res.figure("spawn-overhead", "  empty Go program − `/bin/true` (what any Go shim adds at least)", "ms")
	binStart := res.figure("spawn-overhead", "  `supervisor version` − empty Go program (the binary's own start beyond Go's)", "ms")
	for i := range b.o.trials {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var d, s time.Duration
		var errD, errS error
		if i%2 == 0 {
			d, errD = timeRun(exec.Command(trueBin))
			s, errS = timeRun(b.cmd(ctx, "run", "--", trueBin))
		} else {
			s, errS = timeRun(b.cmd(ctx, "run", "--", trueBin))
			d, errD = timeRun(exec.Command(trueBin))
		}
		if err := errors.Join(errD, errS); err != nil {
			b.progress("  trial %d failed: %v", i+1, err)
			res.Failures++
			continue
		}
		if lean != nil {
			cmd := b.cmd(ctx, "--", trueBin)
			cmd.Path, cmd.Args[0] = b.lean, b.lean
			l, err := timeRun(cmd)
			if err != nil {
				b.progress("  trial %d: supervisor-run: %v", i+1, err)
				res.Failures++
				continue
			}
			lean.add(ms(l))
			leanAdded.add(ms(l - d))
			if leanBoxed != nil {
				cmd := boxedCmd("--sandbox", "--", trueBin)
				cmd.Path, cmd.Args[0] = b.lean, b.lean
				lb, err := timeRun(cmd)
				if err != nil {
					b.progress("  trial %d: supervisor-run --sandbox: %v", i+1, err)
					res.Failures++
					continue
				}
				leanBoxed.add(ms(lb))
				leanBoxedAdded.add(ms(lb - l))
			}
		}
		if boxed != nil {
			sb, err := timeRun(boxedCmd("run", "--sandbox", "--", trueBin))
			if err != nil {
				b.progress("  trial %d: supervisor run --sandbox: %v", i+1, err)
				res.Failures++
				continue
			}
			boxed.add(ms(sb))
			boxedAdded.add(ms(sb - s))
		}
		v, errV := timeRun(b.cmd(ctx, "version"))
		e, errE := timeRun(exec.Command(emptyGo))
		if err := errors.Join(errV, errE); err != nil {
			b.progress("  trial %d: supervisor version or the empty Go program: %v", i+1, err)
			res.Failures++
			continue
		}
		version.add(ms(v))
		empty.add(ms(e))
		floor.add(ms(e - d))
		binStart.add(ms(v - e))
		direct.add(ms(d))
		sup.add(ms(s))
		added.add(ms(s - d))
		ratio.add(float64(s) / float64(d))
	}
	b.progress("  direct median %.2fms, supervised median %.2fms", median(direct.Samples), median(sup.Samples))
	return b.spawnCrowded(ctx, res, trueBin, median(sup.Samples))
}

// buildEmptyGo builds `package main; func main() {}` with this Go: the
// start-up floor of any shim written in Go, side by side with ours.
func (b *bench) buildEmptyGo(ctx context.Context) (string, error) {
	return b.buildGoProgram(ctx, "emptygo", "package main\n\nfunc main() {}\n")
}

// buildIdleGo builds a Go program that blocks reading its stdin: the
// least any resident Go process costs.
func (b *bench) buildIdleGo(ctx context.Context) (string, error) {
	return b.buildGoProgram(ctx, "idlego", "package main\n\nimport \"os\"\n\nfunc main() { os.Stdin.Read(make([]byte, 1)) }\n")
}

// buildGoProgram builds the one-file program main in the bench's
// directory.
func (b *bench) buildGoProgram(ctx context.Context, name, main string) (string, error) {
	src := filepath.Join(b.dir, name)
	if err := os.MkdirAll(src, 0o700); err != nil {
		return "", err
	}
	for file, text := range map[string]string{"go.mod": "module " + name + "\n\ngo 1.22\n", "main.go": main} {
		if err := os.WriteFile(filepath.Join(src, file), []byte(text), 0o600); err != nil {
			return "", err
		}
	}
	out := filepath.Join(b.dir, name+".bin")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the Go program %s: %w: %s", name, err, msg)
	}
	return out, nil
}

// crowd is how many unrelated processes of this user spawnCrowded starts
// (crowdQuick with --quick).
const (
	crowd      = 2000
	crowdQuick = 200
)

// spawnCrowded (issue 16): `supervisor run -- /bin/true` again with
// thousands of unrelated `sleep` processes of the same user on the
// machine: every stop (a server's normal exit too) scans /proc and reads
// the environment of each same-uid process, so their number shows in the
// spawn cost. base is the uncrowded median.
func (b *bench) spawnCrowded(ctx context.Context, res *Results, trueBin string, base float64) error {
	sleepBin, err := exec.LookPath("sleep")
	if err != nil {
		return err
	}
	n := crowd
	if b.o.quick {
		n = crowdQuick
	}
	b.progress("spawn-overhead: %d trials again with %d unrelated `%s 3600` of this user", b.o.trials, n, sleepBin)
	var sleepers []*exec.Cmd
	defer func() {
		for _, c := range sleepers {
			c.Process.Kill()
		}
		for _, c := range sleepers {
			_ = c.Wait() // reaps the sleep killed above: its status is that SIGKILL
		}
	}()
	for range n {
		c := exec.Command(sleepBin, "3600")
		if err := c.Start(); err != nil {
			return fmt.Errorf("start unrelated process %d of %d: %w", len(sleepers)+1, n, err)
		}
		b.track(c.Process.Pid, "crowd sleep")
		sleepers = append(sleepers, c)
	}
	crowded := res.figure("spawn-overhead", fmt.Sprintf("`supervisor run -- /bin/true` with %d unrelated processes of this user", n), "ms")
	added := res.figure("spawn-overhead", fmt.Sprintf("  added by the %d (the stop scans /proc once; it reads the environment only of processes no older than the server)", n), "ms")
	for i := range b.o.trials {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t0 := time.Now()
		if err := b.cmd(ctx, "run", "--", trueBin).Run(); err != nil {
			b.progress("  trial %d failed: %v", i+1, err)
			res.Failures++
			continue
		}
		d := ms(time.Since(t0))
		crowded.add(d)
		added.add(d - base)
	}
	b.progress("  crowded median %.2fms (uncrowded %.2fms)", median(crowded.Samples), base)
	return nil
}

// coldStart: the first supervised run when no daemon runs.
func (b *bench) coldStart(ctx context.Context, res *Results) error {
	b.progress("cold-start: %d trials (daemon stop, then supervisor run -- /bin/true)", b.o.trials)
	cold := res.figure("cold-start", "`supervisor run -- /bin/true`, no daemon running", "ms")
	for i := range b.o.trials {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if b.daemonAnswers() {
			if err := b.stopDaemon(ctx); err != nil {
				return err
			}
		}
		if b.daemonAnswers() {
			return errors.New("cold-start: the daemon still answers after daemon stop")
		}
		t0 := time.Now()
		err := b.cmd(ctx, "run", "--", "/bin/true").Run()
		d := time.Since(t0)
		if _, serr := b.status(ctx); serr != nil { // tracks the new daemon
			return fmt.Errorf("cold-start: no daemon after supervisor run: %w", serr)
		}
		if err != nil {
			b.progress("  trial %d failed: %v", i+1, err)
			res.Failures++
			continue
		}
		cold.add(ms(d))
	}
	b.progress("  median %.1fms", median(cold.Samples))
	// Leave the daemon warm for what follows.
	if err := b.cmd(ctx, "run", "--", "/bin/true").Run(); err != nil {
		return fmt.Errorf("supervisor run after cold start: %w", err)
	}
	return nil
}

// readLines delivers the lines of r on a channel, closed at EOF.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string, 8)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

func nextLine(ctx context.Context, ch <-chan string, limit time.Duration) (string, error) {
	select {
	case l, ok := <-ch:
		if !ok {
			return "", io.EOF
		}
		return l, nil
	case <-time.After(limit):
		return "", fmt.Errorf("no line within %v", limit)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// children lists pid's direct children, those of every thread of it: the kernel
// lists a child under the thread that forked it.
func children(pid int) []int {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		bs, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(bs)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// watched is a process whose exit a trial times.
type watched struct {
	name string
	pid  int
	fd   int
	gone time.Time
}

// errStillRunning is waitAll's error when limit passed with some of ws
// still running (those whose gone is zero).
var errStillRunning = errors.New("still running")

// waitAll polls the pidfds of ws until every process exited or limit
// passed, recording each one's exit time.
func waitAll(ws []*watched, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var pfds []unix.PollFd
		var idx []int
		for i, w := range ws {
			if w.gone.IsZero() {
				pfds = append(pfds, unix.PollFd{Fd: int32(w.fd), Events: unix.POLLIN})
				idx = append(idx, i)
			}
		}
		if len(pfds) == 0 {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			var names []string
			for _, i := range idx {
				names = append(names, fmt.Sprintf("%s (pid %d)", ws[i].name, ws[i].pid))
			}
			return fmt.Errorf("%w after %v: %s", errStillRunning, limit, strings.Join(names, ", "))
		}
		n, err := unix.Poll(pfds, int(left.Milliseconds())+1)
		now := time.Now()
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll pidfds: %w", err)
		}
		if n == 0 {
			continue
		}
		for j, p := range pfds {
			if p.Revents != 0 {
				ws[idx[j]].gone = now
			}
		}
	}
}

func openWatch(name string, pid int) (*watched, error) {
	tok, err := proc.TokenOf(pid)
	if err != nil {
		return nil, fmt.Errorf("%s (pid %d): %w", name, pid, err)
	}
	h, err := proc.OpenHandle(pid, tok)
	if err != nil {
		return nil, fmt.Errorf("%s (pid %d): %w", name, pid, err)
	}
	return &watched{name: name, pid: pid, fd: h.Fd()}, nil // closed by fd in closeWatches
}

func closeWatches(ws []*watched) {
	for _, w := range ws {
		if w != nil && w.fd >= 0 {
			unix.Close(w.fd)
			w.fd = -1
		}
	}
}

// waitGoneTracked waits (bounded) for processes to exit, by pid and token.
func waitGoneTracked(pids []int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for _, pid := range pids {
		tok, err := proc.TokenOf(pid)
		if err != nil {
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		proc.WaitExit(pid, tok, left)
	}
}

// hostDeath: SIGKILL a fake host with three servers and time the cleanup.
func (b *bench) hostDeath(ctx context.Context, res *Results) error {
	b.progress("host-death-overhead: 1 warm-up + %d trials (3 servers + 1 escaped grandchild, graces %v)", b.o.trials, graces)
	over := res.figure("host-death-overhead", "**overhead**: raw − 700 ms of graces (500 ms EOF + 200 ms --grace)", "ms")
	raw := res.figure("host-death-overhead", "raw: host SIGKILL → last of the 4 processes gone", "ms")
	names := []string{"escape", "grandchild", "plain", "stubborn"}
	what := map[string]string{
		"escape":     "escape server gone (exits on stdin EOF)",
		"grandchild": "escaped setsid grandchild gone",
		"plain":      "plain server gone (exits on SIGTERM)",
		"stubborn":   "SIGTERM-ignoring server gone (--grace 200ms)",
	}
	per := map[string]*Figure{}
	for _, n := range names {
		per[n] = res.figure("host-death-overhead", "  "+what[n], "ms")
	}
	return b.trials(ctx, res, func(trial int) error {
		times, total, err := b.hostDeathTrial(ctx)
		if err != nil {
			return err
		}
		if trial == 0 {
			b.progress("  warm-up: last gone after %.1fms", ms(total))
			return nil
		}
		raw.add(ms(total))
		over.add(ms(total - graces))
		for _, n := range names {
			per[n].add(ms(times[n]))
		}
		b.progress("  trial %d: last gone after %.1fms (escape %.1f, grandchild %.1f, plain %.1f, stubborn %.1f)",
			trial, ms(total), ms(times["escape"]), ms(times["grandchild"]), ms(times["plain"]), ms(times["stubborn"]))
		return nil
	})
}

// trials runs one warm-up (trial 0) and b.o.trials measured trials of
// run. A failed trial is reported, and counted unless it was the warm-up.
func (b *bench) trials(ctx context.Context, res *Results, run func(trial int) error) error {
	for trial := 0; trial <= b.o.trials; trial++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := run(trial); err != nil {
			b.progress("  trial %d failed: %v", trial, err)
			if trial > 0 {
				res.Failures++
			}
		}
	}
	return nil
}

func (b *bench) hostDeathTrial(ctx context.Context) (map[string]time.Duration, time.Duration, error) {
	args := []string{"_fixture", "host-multi", b.bin,
		"run", "--name", "plain", "--", b.bin, "_fixture", "sleep", "::",
		"run", "--name", "escape", "--", b.bin, "_fixture", "escape", "::",
		"run", "--name", "stubborn", "--grace", stubbornDur.String(), "--", b.bin, "_fixture", "ignore-term"}
	host := exec.Command(b.hostLn, args...)
	host.Env = b.env
	host.Stderr = b.errLog
	stdin, err := host.StdinPipe() // held open: the host lives until killed
	if err != nil {
		return nil, 0, err
	}
	defer stdin.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, 0, err
	}
	host.Stdout = outW
	if err := host.Start(); err != nil {
		outR.Close()
		outW.Close()
		return nil, 0, fmt.Errorf("start fake host: %w", err)
	}
	outW.Close()
	defer outR.Close()
	b.track(host.Process.Pid, "host")
	hostDone := make(chan struct{})
	// The host dies of the trial's SIGKILL (or killHost's): its status says
	// only that; when it is reaped is what counts.
	go func() { _ = host.Wait(); close(hostDone) }()
	killHost := func() {
		host.Process.Kill()
		<-hostDone
	}

	lines := readLines(outR)
	pids := map[string]int{}
	for i, n := range []string{"plain", "escape", "stubborn"} {
		l, err := nextLine(ctx, lines, 10*time.Second)
		if err != nil {
			killHost()
			return nil, 0, fmt.Errorf("fake host: server %s: %w", n, err)
		}
		f := strings.Fields(l) // child I ready PID [GRANDCHILD]
		if len(f) < 4 || f[0] != "child" || f[1] != strconv.Itoa(i) || f[2] != "ready" {
			killHost()
			return nil, 0, fmt.Errorf("fake host: unexpected line %q", l)
		}
		pids[n], _ = strconv.Atoi(f[3])
		b.track(pids[n], n+" server")
		if n == "escape" && len(f) == 5 {
			pids["grandchild"], _ = strconv.Atoi(f[4])
			b.track(pids["grandchild"], "escape grandchild")
		}
	}
	if pids["grandchild"] == 0 {
		killHost()
		return nil, 0, errors.New("fake host: the escape server named no grandchild")
	}
	shims := children(host.Process.Pid)
	for _, s := range shims {
		b.track(s, "shim")
	}
	var ws []*watched
	defer func() { closeWatches(ws) }()
	for _, n := range []string{"escape", "grandchild", "plain", "stubborn"} {
		w, err := openWatch(n, pids[n])
		if err != nil {
			killHost()
			return nil, 0, err
		}
		ws = append(ws, w)
	}

	t0 := time.Now()
	host.Process.Signal(syscall.SIGKILL)
	err = waitAll(ws, trialLimit)
	<-hostDone
	// Let the shims report and exit before the next trial, so the daemon's
	// bookkeeping of this one does not overlap it.
	waitGoneTracked(shims, 5*time.Second)
	if err != nil {
		return nil, 0, err
	}
	times := map[string]time.Duration{}
	var last time.Duration
	for _, w := range ws {
		d := w.gone.Sub(t0)
		times[w.name] = d
		last = max(last, d)
	}
	time.Sleep(50 * time.Millisecond)
	return times, last, nil
}

// pipeHolder: the bench is the host of an escaping server on pipes.
func (b *bench) pipeHolder(ctx context.Context, res *Results) error {
	b.progress("pipe-holder-eof: 1 warm-up + %d trials (close the server's stdin, wait for EOF on its stdout)", b.o.trials)
	eof := res.figure("pipe-holder-eof", "server exit → EOF on the host's stdout read end", "ms")
	exit := res.figure("pipe-holder-eof", "  host closes server's stdin → server exit", "ms")
	return b.trials(ctx, res, func(trial int) error {
		toExit, toEOF, err := b.pipeHolderTrial(ctx)
		if err != nil {
			return err
		}
		if trial == 0 {
			b.progress("  warm-up: EOF %.1fms after the server's exit", ms(toEOF))
			return nil
		}
		eof.add(ms(toEOF))
		exit.add(ms(toExit))
		b.progress("  trial %d: server exit %.1fms after stdin close, EOF %.1fms after that", trial, ms(toExit), ms(toEOF))
		return nil
	})
}

func (b *bench) pipeHolderTrial(ctx context.Context) (toExit, toEOF time.Duration, err error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return 0, 0, err
	}
	defer inW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		return 0, 0, err
	}
	defer outR.Close()
	shim := b.cmd(context.Background(), "run", "--name", "holder", "--", b.bin, "_fixture", "escape")
	shim.Stdin, shim.Stdout, shim.Stderr = inR, outW, b.errLog
	err = shim.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		return 0, 0, fmt.Errorf("start supervisor run: %w", err)
	}
	b.track(shim.Process.Pid, "shim")
	shimDone := make(chan struct{})
	// The trial times the server's exit and the EOF; the shim's status adds
	// nothing (and one still running after 5s is SIGKILLed below).
	go func() { _ = shim.Wait(); close(shimDone) }()
	defer func() {
		select {
		case <-shimDone:
		case <-time.After(5 * time.Second):
			shim.Process.Kill()
			<-shimDone
		}
	}()

	r := bufio.NewReader(outR)
	type line struct {
		s   string
		err error
	}
	first := make(chan line, 1)
	eofAt := make(chan time.Time, 1)
	go func() {
		s, err := r.ReadString('\n')
		first <- line{s, err}
		if err != nil {
			return
		}
		// A read error ends the stream for the host as EOF does: when
		// it ends is what the trial measures.
		_, _ = io.Copy(io.Discard, r)
		eofAt <- time.Now()
	}()
	var l line
	select {
	case l = <-first:
	case <-time.After(10 * time.Second):
		shim.Process.Kill()
		return 0, 0, errors.New("no ready line within 10s")
	}
	f := strings.Fields(l.s) // ready PID GRANDCHILD
	if l.err != nil || len(f) != 3 || f[0] != "ready" {
		shim.Process.Kill()
		return 0, 0, fmt.Errorf("server said %q (%v)", l.s, l.err)
	}
	pid, _ := strconv.Atoi(f[1])
	gc, _ := strconv.Atoi(f[2])
	b.track(pid, "holder server")
	b.track(gc, "holder grandchild")
	w, err := openWatch("holder server", pid)
	if err != nil {
		return 0, 0, err
	}
	defer closeWatches([]*watched{w})

	t0 := time.Now()
	inW.Close()
	if err := waitAll([]*watched{w}, trialLimit); err != nil {
		return 0, 0, err
	}
	select {
	case at := <-eofAt:
		time.Sleep(50 * time.Millisecond)
		return w.gone.Sub(t0), at.Sub(w.gone), nil
	case <-time.After(trialLimit):
		if tok, err := proc.TokenOf(gc); err == nil {
			if h, err := proc.OpenHandle(gc, tok); err == nil {
				h.Signal(unix.SIGKILL)
				h.Close()
			}
		}
		return 0, 0, fmt.Errorf("no EOF on the host's stdout %v after the server exited (grandchild %d holds it)", trialLimit, gc)
	}
}

// Machine describes where the numbers come from.
type Machine struct {
	NProc      int             `json:"nproc"`
	Kernel     string          `json:"kernel"`
	Go         string          `json:"go"`
	Supervisor string          `json:"supervisor_version"`
	Features   map[string]bool `json:"daemon_features"`
}

func machine() Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return m
}

// Figure is one row: samples over the trials, their median and maximum,
// and their p99 only where there are minP99 samples or more: over 20
// trials the "p99" would be the maximum under another name.
type Figure struct {
	Figure string  `json:"figure"`
	Metric string  `json:"metric"`
	Unit   string  `json:"unit"`
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	// P99 is nil below minP99 samples.
	P99     *float64  `json:"p99,omitempty"`
	Samples []float64 `json:"samples"`
}

// minP99 is the fewest samples a p99 is reported for.
const minP99 = 100

func (f *Figure) add(v float64) { f.Samples = append(f.Samples, v) }

// Results is the whole run, as written to --out.
type Results struct {
	Command  string  `json:"command"`
	Date     string  `json:"date"`
	Trials   int     `json:"trials"`
	Quick    bool    `json:"quick"`
	Failures int     `json:"failures"`
	Machine  Machine `json:"machine"`
	// The spawn-storm figure's own sizes: calls per storm, storms.
	StormCalls  int       `json:"storm_calls"`
	StormTrials int       `json:"storm_trials"`
	Figures     []*Figure `json:"figures"`
}

func (r *Results) figure(name, metric, unit string) *Figure {
	f := &Figure{Figure: name, Metric: metric, Unit: unit, Samples: []float64{}}
	r.Figures = append(r.Figures, f)
	return f
}

func (r *Results) fill() {
	r.Date = time.Now().UTC().Format(time.RFC3339)
	for _, f := range r.Figures {
		f.N = len(f.Samples)
		f.Median = round(median(f.Samples))
		f.Max = round(percentile(f.Samples, 100))
		if f.N >= minP99 {
			p := round(percentile(f.Samples, 99))
			f.P99 = &p
		}
		for i, v := range f.Samples {
			f.Samples[i] = round(v)
		}
	}
}

func round(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return math.Round(v*1000) / 1000
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile is the nearest-rank percentile.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	k := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(k, 1)-1]
}

func fmtValue(v float64, unit string, n int) string {
	if n == 0 {
		return "—"
	}
	switch {
	case unit == "x":
		return fmt.Sprintf("%.1f×", v)
	case unit == "count":
		return strconv.FormatFloat(v, 'f', -1, 64)
	case unit == "MiB":
		return fmt.Sprintf("%.1f MiB", v)
	case unit == "KiB":
		return fmt.Sprintf("%.1f KiB", v)
	case unit == "µs":
		return fmt.Sprintf("%.0f µs", v)
	case unit == "MB/s":
		return fmt.Sprintf("%.0f MB/s", v)
	case math.Abs(v) < 10:
		return fmt.Sprintf("%.2f ms", v)
	default:
		return fmt.Sprintf("%.1f ms", v)
	}
}

func (r *Results) markdown() string {
	var sb strings.Builder
	m := r.Machine
	cg, ip := "off", "off"
	if m.Features["cgroup"] {
		cg = "on"
	}
	if m.Features["in_place"] {
		ip = "on"
	}
	fmt.Fprintf(&sb, "Machine: %d CPUs (nproc), Linux %s, %s; supervisor %s, cgroups %s, exec in the shim's place %s. Command: `%s` (%d trials; spawn-storm: %d storms of %d calls; p99 = nearest rank, given only over %d samples or more).\n\n",
		m.NProc, m.Kernel, m.Go, m.Supervisor, cg, ip, r.Command, r.Trials, r.StormTrials, r.StormCalls, minP99)
	sb.WriteString("| figure | metric | median | p99 | max | n |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, f := range r.Figures {
		metric := f.Metric
		if strings.HasPrefix(metric, "  ") {
			metric = "↳ " + strings.TrimSpace(metric)
		}
		p99 := "—"
		if f.P99 != nil {
			p99 = fmtValue(*f.P99, f.Unit, f.N)
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %d |\n", f.Figure, metric,
			fmtValue(f.Median, f.Unit, f.N), p99, fmtValue(f.Max, f.Unit, f.N), f.N)
	}
	return sb.String()
}

func writeJSON(path string, r *Results) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	bs, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(bs, '\n'), 0o644)
}

// Storm sizes: calls per storm, and storms per run when --trials is not
// given. A storm of 200 supervisor processes takes about half a second on 2
// cores, so the storms keep the other figures' 20 trials.
const (
	stormCalls      = 200
	stormCallsQuick = 20
	stormLimit      = 60 * time.Second
)

// freePort picks a port nothing listens on: listen on 127.0.0.1:0, close.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port, nil
}

// probeDialer connects from 127.0.0.2, so that a probe of a port nobody
// listens on yet can never connect to itself (TCP self-connect, when the
// kernel hands out the probed port as the probe's own ephemeral port) and
// so hold the port the server is about to bind.
var probeDialer = func() *net.Dialer {
	d := &net.Dialer{Timeout: time.Second}
	if l, err := net.Listen("tcp", "127.0.0.2:0"); err == nil {
		l.Close()
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	}
	return d
}()

// waitAccept probes 127.0.0.1:port every pause until a connection is
// accepted, and returns when that was.
func waitAccept(ctx context.Context, port int, pause time.Duration) (time.Time, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for {
		c, err := probeDialer.DialContext(ctx, "tcp", addr)
		if err == nil {
			at := time.Now()
			c.Close()
			return at, nil
		}
		if ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("port %d accepted no connection: %w", port, ctx.Err())
		}
		time.Sleep(pause)
	}
}

// storm: N concurrent `supervisor ensure` calls for one port start one
// shared server and all return once it is healthy.
func (b *bench) storm(ctx context.Context, res *Results) error {
	n, trials := b.o.stormCalls, b.o.stormTrials
	b.progress("spawn-storm: 1 warm-up + %d storms of %d concurrent `supervisor ensure --port P -- %s _fixture listen P`", trials, n, filepath.Base(b.bin))
	sfx := fmt.Sprintf(" (%d calls)", n)
	// Within a storm of fewer than minP99 calls the slowest one is what
	// there is: it is called that.
	tail, tailPct := "p99", 99.0
	if n < minP99 {
		tail, tailPct = "max", 100
	}
	servers := res.figure("spawn-storm", "servers started per storm (must be 1)", "count")
	failed := res.figure("spawn-storm", "calls failed per storm (must be 0)", "count")
	p50 := res.figure("spawn-storm", "call latency, p50 within a storm"+sfx, "ms")
	p99 := res.figure("spawn-storm", "call latency, "+tail+" within a storm"+sfx, "ms")
	over50 := res.figure("spawn-storm", "**call p50 − server readiness**", "ms")
	over99 := res.figure("spawn-storm", "call "+tail+" − server readiness", "ms")
	ready := res.figure("spawn-storm", "  server readiness: direct `_fixture listen P2` start → P2 accepts", "ms")
	up := res.figure("spawn-storm", "  first call's start → P accepts a probe (every 1 ms; lags under load)", "ms")
	v50 := res.figure("spawn-storm", fmt.Sprintf("  %d concurrent `supervisor version` (no daemon), p50 within the burst", n), "ms")
	v99 := res.figure("spawn-storm", fmt.Sprintf("  %d concurrent `supervisor version` (no daemon), %s within the burst", n, tail), "ms")
	end := res.figure("spawn-storm", "  `session end` → shared server gone (--linger 1ms)", "ms")
	st, err := b.status(ctx)
	if err != nil {
		return fmt.Errorf("spawn-storm: the daemon does not answer: %w", err)
	}
	b.daemonPID = st.PID
	for i := -1; i < trials; i++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A storm that goes wrong counts even in the warm-up: one server
		// per port and no failed call is what the figure is about.
		t, err := b.stormTrial(ctx, i+1, n)
		if err != nil {
			b.progress("  storm %d FAILED: %v", i+1, err)
			res.Failures++
			continue
		}
		if t.servers != 1 {
			b.progress("  storm %d FAILED: %d servers started for port %d, want exactly 1", i+1, t.servers, t.port)
			res.Failures++
		}
		if t.failed > 0 {
			b.progress("  storm %d FAILED: %d of %d calls failed; first: %s", i+1, t.failed, n, t.firstErr)
			res.Failures++
		}
		lp50, lp99 := median(t.lat), percentile(t.lat, tailPct)
		if i < 0 {
			b.progress("  warm-up: latency p50 %.1fms %s %.1fms", lp50, tail, lp99)
			continue
		}
		servers.add(float64(t.servers))
		failed.add(float64(t.failed))
		if len(t.lat) > 0 {
			p50.add(lp50)
			p99.add(lp99)
			over50.add(lp50 - ms(t.ready))
			over99.add(lp99 - ms(t.ready))
		}
		ready.add(ms(t.ready))
		up.add(ms(t.up))
		v50.add(median(t.version))
		v99.add(percentile(t.version, tailPct))
		end.add(ms(t.end))
		b.progress("  storm %d: port %d, %d server(s), %d failed; latency p50 %.1fms %s %.1fms max %.1fms (version burst p50 %.1fms %s %.1fms); readiness %.1fms, port up %.1fms after the first call",
			i+1, t.port, t.servers, t.failed, lp50, tail, lp99, percentile(t.lat, 100), median(t.version), tail, percentile(t.version, tailPct), ms(t.ready), ms(t.up))
		b.progress("    calls started before the probe saw the port up: %s, the first of them exited %+.1fms from then; after: %s; launched over %.0fms, all done %.0fms after the first; daemon CPU %.0fms; session end → gone %.1fms",
			latencies(t.early), ms(t.release), latencies(t.late), ms(t.launch), ms(t.wall), ms(t.daemonCPU), ms(t.end))
	}
	return nil
}

type stormResult struct {
	port      int
	servers   int // the daemon's records for the port
	failed    int
	firstErr  string
	lat       []float64     // ms, successful calls only
	early     []float64     // ms, those started before P accepted
	late      []float64     // ms, those started after
	daemonCPU time.Duration // the daemon's user+system time in the storm
	release   time.Duration // P accepts → the first waiting call has exited
	version   []float64     // ms, the `supervisor version` burst
	ready     time.Duration // direct fixture start → accepts
	up        time.Duration // first call's start → P accepts
	launch    time.Duration // first call's start → last call's start
	wall      time.Duration // first call's start → last call's exit
	end       time.Duration // session end → server gone
}

// burstCall is one process of a burst.
type burstCall struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	errb bytes.Buffer
	t0   time.Time // the process exists and has exec'd
	gone time.Time // it has exited and been reaped
	err  error
}

// burst starts n processes of argv as fast as it can and waits for all of
// them. Each is waited for by its own goroutine from its start, so one
// that is done before the last is launched is timed as such. Its latency
// runs from its start (exec done) to its reaping; bounded by ctx.
func (b *bench) burst(ctx context.Context, n int, what string, argv ...string) []*burstCall {
	calls := make([]*burstCall, n)
	var wg sync.WaitGroup
	for i := range calls {
		c := &burstCall{}
		calls[i] = c
		c.cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
		c.cmd.Env = b.env
		c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.errb
		if c.err = c.cmd.Start(); c.err != nil {
			continue
		}
		c.t0 = time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.err = c.cmd.Wait()
			c.gone = time.Now()
		}()
		b.track(c.cmd.Process.Pid, what)
	}
	wg.Wait()
	return calls
}

// readiness times a directly started `_fixture listen P2` from its start to
// the first accepted connection: the server's own readiness floor.
func (b *bench) readiness(ctx context.Context) (time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(b.bin, "_fixture", "listen", strconv.Itoa(port))
	cmd.Env = b.env
	cmd.Stderr = b.errLog
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start _fixture listen: %w", err)
	}
	b.track(cmd.Process.Pid, "readiness fixture")
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	at, err := waitAccept(wctx, port, 200*time.Microsecond)
	cancel()
	cmd.Process.Kill() // our unreaped child: the pid is still its own
	_ = cmd.Wait()     // reaps it: its status is that SIGKILL
	if err != nil {
		return 0, err
	}
	return at.Sub(t0), nil
}

func (b *bench) stormTrial(ctx context.Context, trial, n int) (stormResult, error) {
	var r stormResult
	var err error
	if r.ready, err = b.readiness(ctx); err != nil {
		return r, fmt.Errorf("server readiness: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, stormLimit)
	defer cancel()

	// The same burst of bare binary starts, for what N processes starting
	// at once on this machine cost without the daemon.
	for _, c := range b.burst(cctx, n, "version call", b.bin, "version") {
		if c.err != nil {
			return r, fmt.Errorf("supervisor version: %w: %s", c.err, strings.TrimSpace(c.errb.String()))
		}
		r.version = append(r.version, ms(c.gone.Sub(c.t0)))
	}
	time.Sleep(50 * time.Millisecond)

	if r.port, err = freePort(); err != nil {
		return r, err
	}
	sess := fmt.Sprintf("storm-%d", trial)
	p := strconv.Itoa(r.port)
	// Probe P from before the first call's start until it accepts.
	upAt := make(chan time.Time, 1)
	probeCtx, stopProbe := context.WithCancel(cctx)
	defer stopProbe()
	go func() {
		at, _ := waitAccept(probeCtx, r.port, time.Millisecond)
		upAt <- at
	}()
	cpu0 := cpuTime(b.daemonPID)
	calls := b.burst(cctx, n, "ensure call", b.bin, "ensure", "--json", "--session", sess, "--port", p, "--linger", "1ms",
		"--", b.bin, "_fixture", "listen", p)

	var first, lastStart, last time.Time
	pids := map[int]bool{}          // server pids the calls named
	servers := map[int]proc.Token{} // server pids, to see them gone
	addServer := func(pid int) {
		if _, ok := servers[pid]; ok || pid <= 0 {
			return
		}
		b.track(pid, "storm server")
		if tok, err := proc.TokenOf(pid); err == nil {
			servers[pid] = tok
		}
	}
	started := 0
	for _, c := range calls {
		if !c.t0.IsZero() {
			if first.IsZero() || c.t0.Before(first) {
				first = c.t0
			}
			if c.t0.After(lastStart) {
				lastStart = c.t0
			}
			if c.gone.After(last) {
				last = c.gone
			}
		}
		var e api.Ensured
		if c.err == nil {
			if err := json.Unmarshal(c.out.Bytes(), &e); err != nil || e.PID == 0 {
				c.err = fmt.Errorf("unexpected output %q", c.out.String())
			}
		}
		if c.err != nil {
			r.failed++
			if r.firstErr == "" {
				r.firstErr = fmt.Sprintf("%v: %s", c.err, strings.TrimSpace(c.errb.String()))
			}
			continue
		}
		r.lat = append(r.lat, ms(c.gone.Sub(c.t0)))
		if e.Started {
			started++
		}
		pids[e.PID] = true
		addServer(e.PID)
	}
	r.daemonCPU = cpuTime(b.daemonPID) - cpu0
	r.launch, r.wall = lastStart.Sub(first), last.Sub(first)
	stopProbe()
	at := <-upAt
	if at.IsZero() || first.IsZero() {
		return r, fmt.Errorf("port %d accepted no connection during the storm", r.port)
	}
	r.up = at.Sub(first)
	for _, c := range calls {
		if c.err != nil {
			continue
		}
		if c.t0.Before(at) {
			r.early = append(r.early, ms(c.gone.Sub(c.t0)))
			if len(r.early) == 1 || c.gone.Sub(at) < r.release {
				r.release = c.gone.Sub(at)
			}
		} else {
			r.late = append(r.late, ms(c.gone.Sub(c.t0)))
		}
	}
	if started != 1 || len(pids) != 1 {
		b.progress("  storm %d: %d calls say they started the server, %d distinct server pids", trial, started, len(pids))
	}

	// The daemon's own record: how many servers it started for P.
	psOut, err := b.cmd(ctx, "ps", "--all", "--json").Output()
	if err != nil {
		return r, fmt.Errorf("supervisor ps --all --json: %w", err)
	}
	var procs []struct {
		PID  int `json:"pid"`
		Port int `json:"port"`
	}
	if err := json.Unmarshal(psOut, &procs); err != nil {
		return r, fmt.Errorf("supervisor ps --all --json: %w", err)
	}
	for _, pr := range procs {
		if pr.Port == r.port {
			r.servers++
			addServer(pr.PID)
		}
	}

	// End the storm's session; with --linger 1ms that stops the server.
	t0 := time.Now()
	if out, err := b.cmd(ctx, "session", "end", sess).CombinedOutput(); err != nil {
		return r, fmt.Errorf("supervisor session end %s: %w: %s", sess, err, out)
	}
	for pid, tok := range servers {
		if !proc.WaitExit(pid, tok, 10*time.Second) {
			return r, fmt.Errorf("shared server pid %d still running 10s after session end %s", pid, sess)
		}
	}
	r.end = time.Since(t0)
	time.Sleep(50 * time.Millisecond)
	return r, nil
}

// latencies summarizes call latencies for the progress log.
func latencies(xs []float64) string {
	if len(xs) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d (p50 %.1fms, max %.1fms)", len(xs), median(xs), percentile(xs, 100))
}

// cpuTime is the user+system time pid has used (clock-tick resolution).
func cpuTime(pid int) time.Duration {
	bs, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(bs), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(bs[i+1:])) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)        // field 14, utime
	st, _ := strconv.ParseInt(f[12], 10, 64)        // field 15, stime
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// fileExists says whether path names a regular file.
func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
