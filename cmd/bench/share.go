//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/config"
	"github.com/seed-86a41135/supervisor/internal/jsonrpc"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/spawn"
)

// Sizes of the shared-server figures (issue 14).
const (
	shareTrials      = 3
	shareTrialsQuick = 1
	relayCalls       = 10000
	relayCallsQuick  = 200
	relayArgBytes    = 1024
	relayBlobBytes   = 1 << 20
	// relayBlobs is how many 1 MiB results each block fetches per mode:
	// enough that one slow call (a GC, a page-fault burst) does not make
	// the block's throughput (10 did).
	relayBlobs      = 100
	relayBlobsQuick = 3
	relayWarmup     = 200
	// relayBlobWarmup 1 MiB answers per client before timing: the first
	// ones fault in fresh pages and grow heaps in every process of the
	// chain and took up to 40 ms each, which is start-up, not the relay.
	relayBlobWarmup = 5
	// relayDepth is how many 1 MiB calls the pipelined throughput keeps
	// in flight: 2 stays under the broker's 4 MiB queue per client.
	relayDepth = 2
	// shareSettle lets the servers finish what they do after answering
	// tools/list (module loading, the first GC) before their memory is read.
	shareSettle = time.Second
	// shareSamples readings of every process, shareEvery apart, make one
	// trial's figure: the median of their totals, so one reading taken
	// while a V8 or Go heap grows or shrinks does not decide it.
	shareSamples = 5
	shareEvery   = 200 * time.Millisecond
	// shareQuiet is how long the readings wait for node processes not
	// ours to exit (see shareMemTrial).
	shareQuiet = 30 * time.Second
	shareLimit = 120 * time.Second
)

// shareN is the number of sessions per size of the shared-memory figure.
func (b *bench) shareN() []int {
	if b.o.quick {
		return []int{1, 2}
	}
	return []int{1, 5, 10}
}

// shareInst is a private daemon for the shared-server figures: its own
// state directory with a linger of 1s, so a broker whose last client went
// is gone before the next round, and no cap on instances per session.
type shareInst struct {
	env   []string
	paths api.Paths
	d     *recDaemon
	dir   string
}

func (b *bench) startShareInst(ctx context.Context, name string) (*shareInst, error) {
	dir := filepath.Join(b.dir, name)
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o700); err != nil {
		return nil, err
	}
	// Every client is the bench's, so all are one session: max_instances
	// = 0 lifts the per-session cap of one instance per --name, which
	// would stop the older direct servers (N hosts would each have one).
	conf := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(conf, []byte("linger = \"1s\"\nmax_instances = 0\n"), 0o600); err != nil {
		return nil, err
	}
	vars := map[string]string{api.EnvStateDir: filepath.Join(dir, "state"), api.EnvSocket: filepath.Join(dir, "s.sock")}
	paths, err := api.ResolvePaths(func(k string) string { return vars[k] })
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	// One environment for every client: any difference would give each
	// its own upstream (the server key). HOME is private, npm offline.
	var env []string
	for _, kv := range b.env {
		if !strings.HasPrefix(kv, api.EnvStateDir+"=") && !strings.HasPrefix(kv, api.EnvSocket+"=") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, api.EnvStateDir+"="+paths.StateDir, api.EnvSocket+"="+paths.Socket, config.EnvConfig+"="+conf, "HOME="+home,
		"npm_config_offline=true", "npm_config_update_notifier=false")
	d, _, _, err := b.startRecDaemon(ctx, env, paths, filepath.Join(dir, "daemon.log"))
	si := &shareInst{env: env, paths: paths, d: d, dir: dir}
	if err != nil {
		si.stop(ctx, b)
		return nil, fmt.Errorf("%s daemon: %w", name, err)
	}
	return si, nil
}

// stop stops the private daemon (brokers and servers go with it) and
// SIGKILLs it if it did not exit.
func (si *shareInst) stop(ctx context.Context, b *bench) {
	if si.d == nil {
		return
	}
	if !exited(si.d.fd) {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(sctx, b.bin, "daemon", "stop")
		cmd.Env = si.env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.progress("  daemon stop (%s): %v: %s", si.dir, err, strings.TrimSpace(string(out)))
		}
		cancel()
		if !waitFd(si.d.fd, 10*time.Second) {
			si.d.cmd.Process.Kill()
		}
	}
	if err := si.d.reap(); err != nil {
		b.progress("  daemon %d (%s) ended: %v", si.d.pid, si.dir, err)
	}
	si.d.log.Close()
	si.d = nil
}

// mkdir makes the directory name in the instance's own.
func (si *shareInst) mkdir(name string) (string, error) {
	dir := filepath.Join(si.dir, name)
	return dir, os.MkdirAll(dir, 0o700)
}

// shareRec is what the figures need of a daemon's record.
type shareRec struct {
	ID      string
	PID     int
	Broker  bool
	Clients int
	State   string
}

func (si *shareInst) procs(ctx context.Context) ([]shareRec, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := api.Dial(ctx, si.paths.Socket)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ps, err := c.Processes(api.PsRequest{})
	if err != nil {
		return nil, fmt.Errorf("ps: %w", err)
	}
	out := make([]shareRec, 0, len(ps))
	for _, p := range ps {
		out = append(out, shareRec{ID: p.ID, PID: p.PID, Broker: p.Broker, Clients: len(p.Clients), State: string(p.State)})
	}
	return out, nil
}

// npmOrSkip is npmServers for figure, with what else it needs (need, may
// be nil). Without them the figure is skipped with a note (npm "", err
// nil), except under CI=true, where .ci/run installs them and their
// absence is the figure's error.
func (b *bench) npmOrSkip(res *Results, figure, unit string, need func() error) (npm string, err error) {
	npm, err = npmServers()
	if err == nil && need != nil {
		err = need()
	}
	if err == nil {
		return npm, nil
	}
	if os.Getenv("CI") == "true" {
		return "", fmt.Errorf("%s: %w", figure, err)
	}
	b.progress("%s: SKIPPED: %v", figure, err)
	res.figure(figure, "SKIPPED: "+err.Error(), unit)
	return "", nil
}

// npmServers finds testdata/npm/node_modules from the working directory
// (the repository root for `go run ./cmd/bench`, bench/ for go test) and
// says what is missing when it or node is not there.
func npmServers() (string, error) {
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node is not on PATH")
	}
	var dir string
	for _, d := range []string{filepath.Join("testdata", "npm"), filepath.Join("..", "..", "testdata", "npm")} {
		if _, err := os.Stat(filepath.Join(d, "node_modules", "@modelcontextprotocol")); err == nil {
			dir, _ = filepath.Abs(d)
			break
		}
	}
	if dir == "" {
		missing = append(missing, "testdata/npm/node_modules is not installed")
	} else {
		for _, pkg := range []string{"server-everything", "server-filesystem"} {
			if _, err := os.Stat(npmEntry(dir, pkg)); err != nil {
				missing = append(missing, "testdata/npm/node_modules lacks @modelcontextprotocol/"+pkg)
			}
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s; run `npm ci --prefix testdata/npm` (or `bash .ci/run`)", strings.Join(missing, ", "))
	}
	return dir, nil
}

func npmEntry(npm, pkg string) string {
	return filepath.Join(npm, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
}

// sharedMemory: N sessions (1, 5, 10; 1, 2 with --quick) each connect to
// the two real npm servers (server-everything, server-filesystem) with the
// Go SDK (initialize + tools/list), once direct (`supervisor run --name X
// -- node ...`: a server per client) and once shared (`run --share`: a
// broker per server, relaying every client to one upstream). Then the
// memory of every process either mode costs is summed: every process
// carrying the marker of one of the daemon's records (direct: the servers,
// their log writers; shared: the brokers, their upstreams and log writers)
// and every shim that stays resident. Since exec in place, direct has no
// shims left (each became its server) while shared keeps one per client:
// leaving them out made sharing look 10 MiB cheaper than it is at N = 1.
//
// Two measures, from smaps_rollup: PSS (the issue's) and USS (private
// pages). PSS divides a page among all the processes that map it, so the
// file-backed part (node's text, the supervisor's) falls as more copies
// run: each of 20 node processes carries 1/20 of node's text, and a
// foreign node on the machine lowers ours too. USS counts only pages no
// other process maps: additive over processes, blind to the neighbours.
//
// Goals: the as written, shared ≤ direct / N + 5 MiB, which PSS
// cannot meet even with a free broker (direct / N at N = 10 carries a
// tenth of the text one lone session carries whole); and the fair one,
// shared(N) ≤ direct(1) + 5 MiB: N sessions sharing cost one session
// plus at most 5 MiB.
func (b *bench) sharedMemory(ctx context.Context, res *Results) error {
	npm, err := b.npmOrSkip(res, "shared-memory", "MiB", nil)
	if npm == "" {
		return err
	}
	trials := shareTrials
	if b.o.quick {
		trials = shareTrialsQuick
	}
	si, err := b.startShareInst(ctx, "shared-memory")
	if err != nil {
		return err
	}
	defer si.stop(ctx, b)
	root, err := si.mkdir("root")
	if err != nil {
		return err
	}
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return err
	}
	servers := []shareServer{
		{"everything", []string{"node", npmEntry(npm, "server-everything"), "stdio"}},
		{"filesystem", []string{"node", npmEntry(npm, "server-filesystem"), root}},
	}
	b.progress("shared-memory: %d trials of N = %v sessions × 2 npm servers (everything, filesystem), direct vs shared; median of %d readings %v apart",
		trials, b.shareN(), shareSamples, shareEvery)
	type rows struct {
		direct, shared, brokers, fileD, fileS, ussD, ussS, ussBrokers *Figure
		ratio, margin, goal, fair, fairGoal, ussMargin, shimD, shimS  *Figure
	}
	byN := map[int]rows{}
	for _, n := range b.shareN() {
		sfx := fmt.Sprintf(", N = %d", n)
		byN[n] = rows{
			direct:     res.figure("shared-memory", "direct: PSS of every process it costs (servers, log writers, shims that stayed)"+sfx, "MiB"),
			shared:     res.figure("shared-memory", "**shared: PSS of every process it costs (brokers, upstreams, log writers, shims)**"+sfx, "MiB"),
			brokers:    res.figure("shared-memory", "  of which the 2 brokers"+sfx, "MiB"),
			fileD:      res.figure("shared-memory", "  direct: file-backed part of the PSS (text, split among all mappers)"+sfx, "MiB"),
			fileS:      res.figure("shared-memory", "  shared: file-backed part of the PSS"+sfx, "MiB"),
			ussD:       res.figure("shared-memory", "direct: USS (private pages) of every process it costs"+sfx, "MiB"),
			ussS:       res.figure("shared-memory", "shared: USS of every process it costs"+sfx, "MiB"),
			ussBrokers: res.figure("shared-memory", "  of which the 2 brokers, USS"+sfx, "MiB"),
			ratio:      res.figure("shared-memory", "  direct / shared (PSS)"+sfx, "x"),
			margin:     res.figure("shared-memory", fmt.Sprintf("  issue's goal: shared − direct / %d (≤ 5 MiB), PSS%s", n, sfx), "MiB"),
			goal:       res.figure("shared-memory", fmt.Sprintf("  issue's goal shared ≤ direct / %d + 5 MiB holds (1 = yes), PSS%s", n, sfx), "count"),
			fair:       res.figure("shared-memory", "  **fair goal: shared − direct at N = 1 (≤ 5 MiB), PSS**"+sfx, "MiB"),
			fairGoal:   res.figure("shared-memory", "  fair goal shared ≤ direct(N = 1) + 5 MiB holds (1 = yes), PSS"+sfx, "count"),
			ussMargin:  res.figure("shared-memory", fmt.Sprintf("  USS: shared − direct / %d (≤ 5 MiB)%s", n, sfx), "MiB"),
			shimD:      res.figure("shared-memory", "  of which resident shims, direct, PSS"+sfx, "MiB"),
			shimS:      res.figure("shared-memory", "  of which resident shims, shared, PSS"+sfx, "MiB"),
		}
	}
	for trial := range trials {
		// direct1 is this trial's direct total at N = 1 (shareN starts
		// there): the one session the fair goal compares with.
		direct1 := -1.0
		for _, n := range b.shareN() {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r := byN[n]
			var m [2]shareMem
			failed := false
			for k := range 2 {
				share := (k+trial)%2 == 1 // alternate which mode goes first
				got, err := b.shareMemTrial(ctx, si, root, servers, n, share)
				if err != nil {
					b.progress("  trial %d N=%d share=%v FAILED: %v", trial+1, n, share, err)
					res.Failures++
					failed = true
					break
				}
				m[btoi(share)] = got
			}
			if failed {
				continue
			}
			d, s := m[0], m[1]
			if n == 1 {
				direct1 = d.total.pss
			}
			r.direct.add(d.total.pss)
			r.shared.add(s.total.pss)
			r.brokers.add(s.brokers.pss)
			r.fileD.add(d.total.pssFile)
			r.fileS.add(s.total.pssFile)
			r.ussD.add(d.total.uss)
			r.ussS.add(s.total.uss)
			r.ussBrokers.add(s.brokers.uss)
			r.ratio.add(d.total.pss / s.total.pss)
			r.margin.add(s.total.pss - d.total.pss/float64(n))
			r.goal.add(float64(btoi(s.total.pss <= d.total.pss/float64(n)+5)))
			if direct1 >= 0 {
				r.fair.add(s.total.pss - direct1)
				r.fairGoal.add(float64(btoi(s.total.pss <= direct1+5)))
			}
			r.ussMargin.add(s.total.uss - d.total.uss/float64(n))
			r.shimD.add(d.shims.pss)
			r.shimS.add(s.shims.pss)
			b.progress("  trial %d N=%d: direct %s; shared %s; shims %.1f / %.1f MiB",
				trial+1, n, d, s, d.shims.pss, s.shims.pss)
		}
	}
	return nil
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

type shareServer struct {
	name string
	argv []string
}

// shareMem is one trial's memory in one mode: the median over the
// readings of each sum.
type shareMem struct {
	total   memStat // every server-side process
	brokers memStat // of total: the brokers'
	logw    memStat // of total: the log writers'
	shims   memStat // of total: the resident shims
	count   int     // server-side processes
	per     string  // PSS per server name, for the log
	spread  string  // the readings' range of the total PSS, for the log
	foreign int     // node processes not ours: they share node's text
}

func (m shareMem) String() string {
	return fmt.Sprintf("PSS %.1f MiB (readings %s; file-backed %.1f, brokers %.1f, log writers %.1f; %s), USS %.1f (brokers %.1f) in %d processes, %d foreign node processes",
		m.total.pss, m.spread, m.total.pssFile, m.brokers.pss, m.logw.pss, m.per, m.total.uss, m.brokers.uss, m.count, m.foreign)
}

// shareMemTrial connects n sessions to every server (direct or shared),
// reads the memory, and closes them again until every server-side
// process is gone.
func (b *bench) shareMemTrial(ctx context.Context, si *shareInst, root string, servers []shareServer, n int, share bool) (m shareMem, err error) {
	ctx, cancel := context.WithTimeout(ctx, shareLimit)
	defer cancel()
	var mu sync.Mutex
	var sessions []*mcp.ClientSession
	var shims []int
	var side []tracked // server-side processes, to see them gone
	defer func() {
		var wg sync.WaitGroup
		closeErrs := make([]error, len(sessions))
		for i, cs := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Closes the shim's stdin and waits for it (SIGTERM after
				// 5s): a shim that does not leave cleanly fails the trial.
				if cerr := cs.Close(); cerr != nil {
					closeErrs[i] = fmt.Errorf("client %d of %d: close: %w", i+1, len(sessions), cerr)
				}
			}()
		}
		wg.Wait()
		if cerr := errors.Join(closeErrs...); cerr != nil && err == nil {
			err = cerr
		}
		for _, t := range side {
			if !proc.WaitExit(t.pid, t.tok, 30*time.Second) && err == nil {
				err = fmt.Errorf("%s (pid %d) still running 30s after its clients left", t.what, t.pid)
			}
		}
		// The next round starts once the daemon, too, has seen them go: a
		// client arriving between a lingering broker's exit and the
		// daemon's noticing is handed the dead broker's socket (a race of
		// its own, not what this figure measures).
		for deadline := time.Now().Add(30 * time.Second); err == nil; time.Sleep(20 * time.Millisecond) {
			ps, perr := si.procs(context.Background())
			if perr == nil && len(ps) == 0 {
				break
			}
			if time.Now().After(deadline) {
				err = fmt.Errorf("the daemon still lists %d live records 30s after the clients left (%v)", len(ps), perr)
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, n*len(servers))
	for i := range n {
		for _, s := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				args := []string{"run"}
				if share {
					args = append(args, "--share")
				}
				args = append(append(args, "--name", s.name, "--"), s.argv...)
				cmd := exec.Command(b.bin, args...)
				cmd.Dir, cmd.Env, cmd.Stderr = root, si.env, b.errLog
				client := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("bench-%d", i), Version: "0.0.0"}, nil)
				cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
				if cmd.Process != nil {
					b.track(cmd.Process.Pid, "shim")
				}
				if err != nil {
					errs <- fmt.Errorf("session %d, %s: connect: %w", i, s.name, err)
					return
				}
				mu.Lock()
				sessions = append(sessions, cs)
				shims = append(shims, cmd.Process.Pid)
				mu.Unlock()
				if _, err := cs.ListTools(ctx, nil); err != nil {
					errs <- fmt.Errorf("session %d, %s: tools/list: %w", i, s.name, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return m, err
	}

	// Every record the daemon keeps now is this round's: direct, one per
	// client; shared, one broker per server with n clients.
	want := n * len(servers)
	if share {
		want = len(servers)
	}
	var ids map[string]string // record id -> server name
	for {
		ps, err := si.procs(ctx)
		if err != nil {
			return m, err
		}
		ids = map[string]string{}
		ok := 0
		for _, p := range ps {
			if p.PID > 0 && p.State == "running" && p.Broker == share && (!share || p.Clients == n) {
				ok++
			}
			ids[p.ID] = p.ID
		}
		if ok == want && len(ps) == want {
			break
		}
		if ctx.Err() != nil {
			return m, fmt.Errorf("ps lists %d records, %d as expected; want %d", len(ps), ok, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(shareSettle)
	// Every node process on the machine maps node's text, and PSS splits
	// those pages among all of them: foreign ones (another test's servers)
	// lower ours, 11 of them by 33 MiB at N = 1 direct. The readings wait
	// for them to go, up to shareQuiet; the log says how many were left.
	// Not a smoke run's (--quick): its figures are not kept, and beside the
	// tests' real hosts it waited out all four readings, 2 of its 4 minutes.
	quiet := shareQuiet
	if b.o.quick {
		quiet = 0
	}
	for deadline := time.Now().Add(quiet); ; time.Sleep(500 * time.Millisecond) {
		n, err := foreignNodes(ids)
		if err != nil || n == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	infos, err := proc.Scan()
	if err != nil {
		return m, err
	}
	// The server-side processes, by role: what each reading sums.
	type sideProc struct {
		pid        int
		broker     bool
		logWriter  bool
		serverName string // of servers, "" for none
	}
	var procs []sideProc
	nodes := 0
	for _, info := range infos {
		argv, _ := proc.Cmdline(info.PID)
		env, err := proc.Environ(info.PID)
		if err != nil {
			continue
		}
		id, _ := proc.EnvValue(env, spawn.EnvProcID)
		if ids[id] == "" {
			if len(argv) > 0 && filepath.Base(argv[0]) == "node" {
				m.foreign++
			}
			continue
		}
		what := "server-side process"
		if len(argv) > 0 {
			what = filepath.Base(argv[0])
		}
		if what == "node" {
			nodes++
		}
		b.track(info.PID, "shared-memory "+what)
		side = append(side, tracked{info.PID, info.Token, what})
		p := sideProc{pid: info.PID}
		if len(argv) > 1 {
			p.broker, p.logWriter = argv[1] == "_broker", argv[1] == "_log-writer"
		}
		for _, s := range servers {
			if slicesContain(argv, s.argv[1]) {
				p.serverName = s.name
			}
		}
		procs = append(procs, p)
	}
	wantNodes := n * len(servers)
	if share {
		wantNodes = len(servers)
	}
	if nodes != wantNodes {
		return m, fmt.Errorf("%d node processes carry the records' markers, want %d (share %v)", nodes, wantNodes, share)
	}
	m.count = len(procs)

	var totals, brokers, logws, shimSums []memStat
	perName := map[string][]float64{}
	for i := range shareSamples {
		if i > 0 {
			time.Sleep(shareEvery)
		}
		var total, br, lw, sh memStat
		per := map[string]float64{}
		for _, p := range procs {
			st, err := smapsRollup(p.pid)
			if err != nil {
				return m, err
			}
			total = total.plus(st)
			if p.broker {
				br = br.plus(st)
			}
			if p.logWriter {
				lw = lw.plus(st)
			}
			per[p.serverName] += st.pss
		}
		for _, pid := range shims {
			if slices.ContainsFunc(procs, func(p sideProc) bool { return p.pid == pid }) {
				continue // exec'd its server in its own place: counted as the server
			}
			st, err := smapsRollup(pid)
			if err != nil {
				return m, fmt.Errorf("shim: %w", err)
			}
			sh = sh.plus(st)
		}
		total = total.plus(sh)
		totals, brokers, logws, shimSums = append(totals, total), append(brokers, br), append(logws, lw), append(shimSums, sh)
		for _, s := range servers {
			perName[s.name] = append(perName[s.name], per[s.name])
		}
	}
	m.total, m.brokers, m.logw, m.shims = medianMem(totals), medianMem(brokers), medianMem(logws), medianMem(shimSums)
	lo, hi := totals[0].pss, totals[0].pss
	for _, t := range totals {
		lo, hi = min(lo, t.pss), max(hi, t.pss)
	}
	m.spread = fmt.Sprintf("%.1f–%.1f", lo, hi)
	var parts []string
	for _, s := range servers {
		parts = append(parts, fmt.Sprintf("%s %.1f", s.name, median(perName[s.name])))
	}
	m.per = strings.Join(parts, ", ")
	return m, nil
}

// foreignNodes counts the node processes that carry none of ids' markers.
func foreignNodes(ids map[string]string) (int, error) {
	infos, err := proc.Scan()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, info := range infos {
		argv, _ := proc.Cmdline(info.PID)
		if len(argv) == 0 || filepath.Base(argv[0]) != "node" {
			continue
		}
		env, err := proc.Environ(info.PID)
		if err != nil {
			continue
		}
		if id, _ := proc.EnvValue(env, spawn.EnvProcID); ids[id] == "" {
			n++
		}
	}
	return n, nil
}

func slicesContain(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// memStat is what the memory figure reads of a process's smaps_rollup,
// in MiB.
type memStat struct {
	pss     float64 // proportional set size: shared pages by their share
	pssFile float64 // of pss: file-backed pages (text, libraries)
	uss     float64 // Private_Clean + Private_Dirty: pages no other maps
}

func (a memStat) plus(b memStat) memStat {
	return memStat{a.pss + b.pss, a.pssFile + b.pssFile, a.uss + b.uss}
}

// medianMem is the median of each field over readings.
func medianMem(readings []memStat) memStat {
	var pss, file, uss []float64
	for _, r := range readings {
		pss, file, uss = append(pss, r.pss), append(file, r.pssFile), append(uss, r.uss)
	}
	return memStat{median(pss), median(file), median(uss)}
}

// smapsRollup reads pid's /proc/PID/smaps_rollup.
func smapsRollup(pid int) (memStat, error) {
	bs, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return memStat{}, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	kb := map[string]float64{}
	for _, l := range strings.Split(string(bs), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || !strings.HasSuffix(v, " kB") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(v, " kB")))
		if err != nil {
			return memStat{}, fmt.Errorf("memory of pid %d: %q: %w", pid, l, err)
		}
		kb[k] = float64(n)
	}
	for _, k := range []string{"Pss", "Pss_File", "Private_Clean", "Private_Dirty"} {
		if _, ok := kb[k]; !ok {
			return memStat{}, fmt.Errorf("memory of pid %d: no %s line in smaps_rollup", pid, k)
		}
	}
	return memStat{pss: kb["Pss"] / 1024, pssFile: kb["Pss_File"] / 1024, uss: (kb["Private_Clean"] + kb["Private_Dirty"]) / 1024}, nil
}

// relayCost: one client of `supervisor _fixture mcp`, direct and shared
// at once, speaking raw newline-delimited JSON-RPC over the shim's pipes
// (the fixture and this client cost little, so the difference is the
// relay). --relay-calls (10,000; 200 with --quick) tools/call echo of 1 KiB
// in --trials blocks, each block direct then shared (alternating which
// first): p50 and p99 of the round trip within each block; then per block
// 100 (3) calls of the fixture's blob tool answering 1 MiB of text, one at
// a time and then 2 in flight: bytes received over the time taken. Goals (issue 14): ≤ 50 µs added
// p50, ≥ 200 MB/s shared.
func (b *bench) relayCost(ctx context.Context, res *Results) error {
	calls, blobs := relayCalls, relayBlobs
	if b.o.quick {
		calls, blobs = relayCallsQuick, relayBlobsQuick
	}
	if b.o.relayCalls > 0 {
		calls = b.o.relayCalls
	}
	blocks := min(b.o.trials, calls)
	per := (calls + blocks - 1) / blocks
	si, err := b.startShareInst(ctx, "relay-cost")
	if err != nil {
		return err
	}
	defer si.stop(ctx, b)
	b.progress("relay-cost: %d blocks of %d echo calls (1 KiB) and %d blob calls (1 MiB), direct vs shared, on `%s _fixture mcp`",
		blocks, per, blobs, filepath.Base(b.bin))
	sfx := fmt.Sprintf(" (%d calls, blocks of %d)", blocks*per, per)
	tail, tailPct := "p99", 99.0
	if per < minP99 {
		tail, tailPct = "max", 100
	}
	d50 := res.figure("relay-cost", "echo 1 KiB round trip, direct: p50 within a block"+sfx, "µs")
	d99 := res.figure("relay-cost", "  direct: "+tail+" within a block", "µs")
	s50 := res.figure("relay-cost", "echo 1 KiB round trip, shared: p50 within a block", "µs")
	s99 := res.figure("relay-cost", "  shared: "+tail+" within a block", "µs")
	a50 := res.figure("relay-cost", "**added p50, shared − direct** (goal ≤ 50 µs)", "µs")
	a99 := res.figure("relay-cost", "  added "+tail+", shared − direct", "µs")
	dTP := res.figure("relay-cost", fmt.Sprintf("1 MiB results, one call at a time (%d per block), direct: throughput", blobs), "MB/s")
	sTP := res.figure("relay-cost", "**1 MiB results, one call at a time, shared: throughput** (goal ≥ 200 MB/s)", "MB/s")
	ratio := res.figure("relay-cost", "  throughput shared / direct", "x")
	dTP2 := res.figure("relay-cost", fmt.Sprintf("1 MiB results, %d calls in flight, direct: throughput", relayDepth), "MB/s")
	sTP2 := res.figure("relay-cost", fmt.Sprintf("1 MiB results, %d calls in flight, shared: throughput", relayDepth), "MB/s")
	r50 := res.figure("relay-cost", "echo 1 KiB round trip through the reference relay (a perl select loop): p50 within a block", "µs")
	ra50 := res.figure("relay-cost", "  added p50, reference relay − direct: one more process on the path", "µs")
	rTP := res.figure("relay-cost", "  1 MiB results, one call at a time, reference relay: throughput", "MB/s")

	root, err := si.mkdir("root")
	if err != nil {
		return err
	}
	// The third client reaches the same fixture through the least a relay
	// can be: a select loop in perl that copies bytes both ways. What it
	// adds is what one more process on the path costs on this machine,
	// whatever the relay's code; the broker's added p50 is read against it.
	var clients [3]*rawClient
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.close(b)
			}
		}
	}()
	for i, share := range []bool{false, true} {
		args := []string{b.bin, "run"}
		if share {
			args = append(args, "--share")
		}
		what := map[bool]string{false: "direct", true: "shared"}[share]
		args = append(args, "--name", "fixture-"+what, "--", b.bin, "_fixture", "mcp")
		c, err := b.startRaw(ctx, si, root, what, args)
		if err != nil {
			return fmt.Errorf("relay-cost: %w", err)
		}
		clients[i] = c
	}
	n := 2
	if perl, err := exec.LookPath("perl"); err != nil {
		b.progress("relay-cost: no perl on PATH, so no reference relay: %v", err)
	} else {
		c, err := b.startRaw(ctx, si, root, "reference relay", []string{perl, "-e", perlRelay, b.bin, "_fixture", "mcp"})
		if err != nil {
			return fmt.Errorf("relay-cost: %w", err)
		}
		clients[2] = c
		n = 3
	}
	arg := strings.Repeat("a", relayArgBytes)
	for _, c := range clients[:n] {
		for range relayWarmup {
			if _, err := c.call("echo", `{"text":"`+arg+`"}`, relayArgBytes); err != nil {
				return fmt.Errorf("relay-cost warm-up (%s): %w", c.what, err)
			}
		}
	}
	blobArgs := `{"bytes":` + strconv.Itoa(relayBlobBytes) + `}`
	for _, c := range clients[:n] {
		if _, _, err := c.stream("blob", blobArgs, relayBlobWarmup, 1, relayBlobBytes); err != nil {
			return fmt.Errorf("relay-cost warm-up (%s): %w", c.what, err)
		}
	}
	for blk := range blocks {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var p50, p99 [3]float64
		var tp [2][3]float64 // [depth 1, relayDepth][direct, shared, reference]
		failed := false
		for k := range n {
			i := (k + blk) % n
			c := clients[i]
			lat := make([]float64, 0, per)
			for range per {
				d, err := c.call("echo", `{"text":"`+arg+`"}`, relayArgBytes)
				if err != nil {
					b.progress("  block %d (%s) FAILED: %v", blk+1, c.what, err)
					failed = true
					break
				}
				lat = append(lat, float64(d)/float64(time.Microsecond))
			}
			if failed {
				break
			}
			p50[i], p99[i] = median(lat), percentile(lat, tailPct)
			for j, depth := range []int{1, relayDepth} {
				n, d, err := c.stream("blob", blobArgs, blobs, depth, relayBlobBytes)
				if err != nil {
					b.progress("  block %d (%s) blob FAILED: %v", blk+1, c.what, err)
					failed = true
					break
				}
				tp[j][i] = float64(n) / 1e6 / d.Seconds()
			}
			if failed {
				break
			}
		}
		if failed {
			res.Failures++
			// A client whose call failed is in an unknown state.
			return errors.New("relay-cost: a call failed; see above")
		}
		d50.add(p50[0])
		d99.add(p99[0])
		s50.add(p50[1])
		s99.add(p99[1])
		a50.add(p50[1] - p50[0])
		a99.add(p99[1] - p99[0])
		dTP.add(tp[0][0])
		sTP.add(tp[0][1])
		ratio.add(tp[0][1] / tp[0][0])
		dTP2.add(tp[1][0])
		sTP2.add(tp[1][1])
		if n == 3 {
			r50.add(p50[2])
			ra50.add(p50[2] - p50[0])
			rTP.add(tp[0][2])
		}
		ref := "no reference relay"
		if n == 3 {
			ref = fmt.Sprintf("reference relay p50 %.0fµs p99 %.0fµs, 1 MiB %.0f MB/s", p50[2], p99[2], tp[0][2])
		}
		b.progress("  block %d: p50 direct %.0fµs shared %.0fµs, p99 %.0f / %.0fµs; 1 MiB results %.0f / %.0f MB/s, %d in flight %.0f / %.0f MB/s; %s",
			blk+1, p50[0], p50[1], p99[0], p99[1], tp[0][0], tp[0][1], relayDepth, tp[1][0], tp[1][1], ref)
	}
	return nil
}

// perlRelay is the reference relay: it starts its arguments as a child and
// copies bytes between its own stdio and the child's until either side
// ends, with nothing parsed.
const perlRelay = `use IPC::Open2; use IO::Select;
my $pid = open2(my $out, my $in, @ARGV);
my $sel = IO::Select->new(\*STDIN, $out); my $buf;
while (my @r = $sel->can_read) {
  for my $fh (@r) {
    my $n = sysread($fh, $buf, 65536);
    if (!$n) { close $in; waitpid($pid, 0); exit 0 }
    my $to = $fh == $out ? \*STDOUT : $in;
    for (my $o = 0; $o < $n; ) { my $w = syswrite($to, $buf, $n - $o, $o); exit 1 unless defined $w; $o += $w }
  }
}`

// rawClient is a newline-delimited JSON-RPC client on a shim's pipes.
type rawClient struct {
	what  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	w     *bufio.Writer
	r     *bufio.Reader
	next  int
	done  chan struct{}
	line  []byte // the last answer (reused)
	bytes int    // answer bytes counted by stream
}

func (b *bench) startRaw(ctx context.Context, si *shareInst, dir, what string, argv []string) (*rawClient, error) {
	return b.startRawEnv(ctx, si, dir, what, argv, nil)
}

// startRawEnv is startRaw with env added to the instance's environment.
func (b *bench) startRawEnv(ctx context.Context, si *shareInst, dir, what string, argv, env []string) (*rawClient, error) {
	c := &rawClient{what: what, done: make(chan struct{})}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Dir, c.cmd.Env, c.cmd.Stderr = dir, append(slices.Clone(si.env), env...), b.errLog
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.what, err)
	}
	b.track(c.cmd.Process.Pid, what)
	c.w = bufio.NewWriterSize(c.in, 64<<10)
	c.r = bufio.NewReaderSize(out, 1<<20)
	// The handshake answers within the limit, or the shim is killed.
	timer := time.AfterFunc(30*time.Second, func() { c.cmd.Process.Kill() })
	defer timer.Stop()
	if _, err := c.request("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}`); err != nil {
		c.close(b)
		return nil, fmt.Errorf("%s: initialize: %w", c.what, err)
	}
	if err := c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		c.close(b)
		return nil, fmt.Errorf("%s: %w", c.what, err)
	}
	if _, err := c.request("tools/list", `{}`); err != nil {
		c.close(b)
		return nil, fmt.Errorf("%s: tools/list: %w", c.what, err)
	}
	return c, nil
}

func (c *rawClient) send(msg string) error {
	c.w.WriteString(msg)
	c.w.WriteByte('\n')
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("write to the shim: %w", err)
	}
	return nil
}

// request sends one request and reads lines until its answer, which it
// returns (valid until the next call).
func (c *rawClient) request(method, params string) ([]byte, error) {
	id, err := c.sendRequest(method, params)
	if err != nil {
		return nil, err
	}
	return c.answer(method, id)
}

// sendRequest sends one request and returns its id.
func (c *rawClient) sendRequest(method, params string) (string, error) {
	c.next++
	id := strconv.Itoa(c.next)
	return id, c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`)
}

// answer reads lines until the answer to request id (notifications are
// skipped), which it returns (valid until the next read).
func (c *rawClient) answer(method, id string) ([]byte, error) {
	for {
		line, err := c.readLine()
		if err != nil {
			return nil, err
		}
		// The usual answer, checked without scanning a 1 MiB body: the
		// fixture writes the id first, and the broker splices the
		// client's own back in its place.
		if bytes.HasPrefix(line, []byte(`{"id":`+id+`,"jsonrpc":"2.0","result":`)) {
			return line, nil
		}
		env, err := jsonrpc.Parse(line)
		if err != nil {
			return nil, fmt.Errorf("answer to %s: %w", method, err)
		}
		if !env.IsResponse() {
			continue // a notification
		}
		if got := string(line[env.ID.Start:env.ID.End]); got != id {
			return nil, fmt.Errorf("answer to %s with id %s, want %s", method, got, id)
		}
		if env.HasError {
			return nil, fmt.Errorf("%s: error %s", method, truncate(line, 300))
		}
		return line, nil
	}
}

// readLine reads one whole line, without its newline.
func (c *rawClient) readLine() ([]byte, error) {
	c.line = c.line[:0]
	for {
		part, err := c.r.ReadSlice('\n')
		c.line = append(c.line, part...)
		if err == nil {
			return c.line[:len(c.line)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("read from the shim: %w", err)
		}
	}
}

// call is one tools/call round trip, timed from the write to the whole
// answer read; the answer is checked after the clock stops.
func (c *rawClient) call(tool, args string, minLen int) (time.Duration, error) {
	t0 := time.Now()
	line, err := c.request("tools/call", `{"name":"`+tool+`","arguments":`+args+`}`)
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if len(line) < minLen || !bytes.Contains(line, []byte(`"result"`)) {
		return 0, fmt.Errorf("%s: short answer %s", tool, truncate(line, 300))
	}
	return d, nil
}

// stream makes count tools/call requests with depth of them in flight
// (the next is sent as each answer arrives) and returns the bytes of the
// answers (newlines too) and the time from the first request to the last
// answer.
func (c *rawClient) stream(tool, args string, count, depth, minLen int) (int, time.Duration, error) {
	params := `{"name":"` + tool + `","arguments":` + args + `}`
	var ids []string
	sent, got := 0, 0
	t0 := time.Now()
	for got < count {
		for sent < count && sent-got < depth {
			id, err := c.sendRequest("tools/call", params)
			if err != nil {
				return 0, 0, err
			}
			ids = append(ids, id)
			sent++
		}
		line, err := c.answer("tools/call", ids[got])
		if err != nil {
			return 0, 0, err
		}
		if len(line) < minLen {
			return 0, 0, fmt.Errorf("%s: answer of %d bytes, want at least %d", tool, len(line), minLen)
		}
		got++
		c.bytes += len(line) + 1
	}
	d := time.Since(t0)
	n := c.bytes
	c.bytes = 0
	return n, d, nil
}

// close closes the shim's stdin (the client leaves) and waits for it.
func (c *rawClient) close(b *bench) {
	c.in.Close()
	done := make(chan struct{})
	// The relay figure times round trips, not the way the shim leaves
	// (SIGKILLed below if it lingers): its status adds nothing.
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		b.progress("  %s: shim still running 10s after its stdin closed: SIGKILL", c.what)
		c.cmd.Process.Kill()
		<-done
	}
}

func truncate(bs []byte, n int) string {
	if len(bs) <= n {
		return string(bs)
	}
	return string(bs[:n]) + "…"
}

// npmVersion is the installed version of @modelcontextprotocol/pkg.
func npmVersion(npm, pkg string) (string, error) {
	b, err := os.ReadFile(filepath.Join(npm, "node_modules", "@modelcontextprotocol", pkg, "package.json"))
	if err != nil {
		return "", err
	}
	var m struct{ Version string }
	if err := json.Unmarshal(b, &m); err != nil || m.Version == "" {
		return "", fmt.Errorf("%s's package.json has no version", pkg)
	}
	return m.Version, nil
}
