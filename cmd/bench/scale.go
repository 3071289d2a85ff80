//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Sizes of the scale figure. A trial starts sessions × (1 host + 4 shims +
// 4 servers) real processes, so it has its own trial count: the trials
// alternate between the two ways of ending every session at once.
const (
	scaleSessions      = 1000
	scaleSessionsQuick = 10
	scalePerSession    = 4
	scaleTrials        = 2
	scaleTrialsQuick   = 2
	scalePsCalls       = 20
	scalePsCallsQuick  = 5
	// scaleBatch hosts start together; the next batch waits until the
	// daemon runs all servers of the previous ones.
	scaleBatch = 25
	scaleLimit = 180 * time.Second
	// usageExpiry outlasts the daemon's usage sample (a second).
	usageExpiry = 1100 * time.Millisecond
	// scaleEndLimit bounds the end of all sessions: generous, for hangs
	// (before hosts dying together shared one cascade, it took minutes).
	scaleEndLimit = 10 * time.Minute
	// Budget per session, to scale the run down (visibly) on a machine
	// that cannot hold it: TIDs (a host and the bench's own thread blocked
	// in wait4 for it; 4 Go shims of ~6 threads where shims stay; 4
	// servers; the log hub is one for all) and memory (a shim's private
	// memory is ~2.3 MiB, its kernel side and a server's a little more).
	scaleTIDsPerSession        = 2 + scalePerSession*6 + scalePerSession
	scaleTIDsPerSessionInPlace = 2 + scalePerSession
	scaleMiBPerSession         = scalePerSession * 4
	// In its shim's place a server of `sleep` costs about half a MiB,
	// kernel side included, and the host shell one.
	scaleMiBPerSessionInPlace = 1 + scalePerSession
)

// scale: 1,000 agent hosts with 4 servers each on one daemon. Per trial, in
// a private state directory with its own `daemon --foreground`:
//
//   - N hosts start (in batches of 25), each a /bin/sh under the name
//     "bench-sh" (so the shim takes it for the host, not for a launcher
//     shell) that starts 4 `supervisor run --name sN -- sleep 3600` in the
//     background and waits: 4N shims, 4N supervised servers, N sessions;
//   - once the daemon's CPU is idle: its VmRSS, 20 runs of
//     `supervisor ps --json` (all 4N running processes, decoded by the CLI
//     and printed), and the size of registry.db;
//   - every session ends at once, by turns: `supervisor daemon stop` (the
//     cascade stops every session) or SIGKILL of all N hosts (each shim sees
//     its host die; the daemon stops a dead host's servers after the 500 ms
//     EOF grace): timed until the last of the 4N servers is gone (pidfds).
func (b *bench) scale(ctx context.Context, res *Results) error {
	n, trials := b.o.scaleSessions, b.o.scaleTrials
	sleepBin, err := exec.LookPath("sleep")
	if err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	if fit := scaleFit(b.o.inPlace != "off" && proc.ExitInfoSupported()); fit < n {
		b.progress("scale: NOTE this machine holds about %d sessions × %d (pid_max and TIDs in use, MemAvailable), not %d: running %d", fit, scalePerSession, n, fit)
		n = fit
	}
	if n < 1 {
		return errors.New("scale: no room for even one session on this machine")
	}
	psCalls := scalePsCalls
	if b.o.quick {
		psCalls = scalePsCallsQuick
	}
	servers := n * scalePerSession
	b.progress("scale: %d trials of %d sessions × %d `supervisor run -- %s 3600` (%d shims, %d servers)", trials, n, scalePerSession, sleepBin, servers, servers)
	sfx := fmt.Sprintf(" (%d sessions × %d servers)", n, scalePerSession)
	rss := res.figure("scale", "**daemon RSS** at "+strconv.Itoa(servers)+" supervised processes"+sfx, "MiB")
	rssEmpty := res.figure("scale", "  daemon RSS, empty store", "MiB")
	ps := res.figure("scale", fmt.Sprintf("**`supervisor ps --json`** listing %d processes (median/p99 of %d calls per trial)", servers, psCalls), "ms")
	ps99 := res.figure("scale", "  `supervisor ps --json`, p99 within a trial", "ms")
	store := res.figure("scale", "store size: registry.db (+ -wal, -shm)", "MiB")
	startup := res.figure("scale", fmt.Sprintf("  start: %d hosts (batches of %d) → all %d servers running", n, scaleBatch, servers), "ms")
	shimMem := res.figure("scale", "  one shim's private memory (Private_Clean + Private_Dirty, median of the shims; 0: none stayed)", "MiB")
	shimCount := res.figure("scale", "  shim processes per server (0: each exec'd its server in its own place)", "count")
	tids := res.figure("scale", "  thread ids per direct server: its shim (if any) + its share of the log hub + the server (medians)", "count")
	fits := res.figure("scale", "  direct servers kernel.pid_max holds at that rate, the hosts apart (goal ≥ 4000)", "count")
	hubMem := res.figure("scale", "  the log hubs' private memory per server (all hubs' USS / servers)", "KiB")
	stopEnd := res.figure("scale", fmt.Sprintf("**end all %d sessions at once**: `daemon stop` → last of the %d servers gone", n, servers), "ms")
	killEnd := res.figure("scale", fmt.Sprintf("end all %d sessions at once: SIGKILL all %d hosts → last server gone", n, n), "ms")
	killOver := res.figure("scale", "  the same minus the 500 ms EOF grace of a dead host's servers", "ms")
	usageCPU := res.figure("scale", fmt.Sprintf("  daemon CPU for a `ps` that samples all %d servers' usage (median of 3 per trial)", servers), "ms")
	usageCached := res.figure("scale", "  daemon CPU for a `ps` reusing that sample (within a second)", "ms")
	usagePer := res.figure("scale", "**usage sampling per 1,000 servers**: the two's difference × 1,000 / servers (goal ≤ 50 ms)", "ms")
	psFresh := res.figure("scale", "  `supervisor ps --json` that samples every server's usage, wall time", "ms")
	for i := range trials {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		kill := i%2 == 1
		r, err := b.scaleTrial(ctx, i+1, n, sleepBin, psCalls, kill)
		if err != nil {
			b.progress("  trial %d FAILED: %v", i+1, err)
			res.Failures++
			continue
		}
		rss.add(r.rss)
		rssEmpty.add(r.rssEmpty)
		if len(r.usageFresh) > 0 {
			usageCPU.add(median(r.usageFresh))
			usageCached.add(median(r.usageCached))
			usagePer.add((median(r.usageFresh) - median(r.usageCached)) * 1000 / float64(servers))
			psFresh.add(median(r.psFresh))
		}
		ps.add(median(r.ps))
		ps99.add(percentile(r.ps, 99))
		store.add(r.store / (1 << 20))
		startup.add(ms(r.startup))
		shimCount.add(float64(r.shims) / float64(servers))
		shimMem.add(r.shimMem) // 0 where every shim exec'd its server in its own place
		if r.hubKiB > 0 {
			hubMem.add(r.hubKiB)
		}
		if r.tids > 0 {
			tids.add(r.tids)
			if pm, err := pidMax(); err == nil {
				fits.add(float64(pm) / r.tids)
			}
		}
		how := "daemon stop"
		if kill {
			how = "SIGKILL hosts"
			killEnd.add(ms(r.end))
			killOver.add(ms(r.end - eofGrace))
		} else {
			stopEnd.add(ms(r.end))
		}
		b.progress("  trial %d: %d servers up in %.0fms; daemon RSS %.1f MiB (empty %.1f, peak %.1f, %d threads, %d fds); ps --json p50 %.1fms p99 %.1fms; registry %.0f KiB; shim private %.2f MiB; %s → all gone %.1fms",
			i+1, servers, ms(r.startup), r.rss, r.rssEmpty, r.hwm, r.threads, r.fds, median(r.ps), percentile(r.ps, 99), r.store/1024, r.shimMem, how, ms(r.end))
	}
	return nil
}

// scaleFit is how many sessions this machine can hold: what is left of
// pid_max (TIDs count against it) and of MemAvailable, keeping half of
// each for everything else.
func scaleFit(inPlace bool) int {
	fit := 1 << 30
	if max, err := pidMax(); err == nil {
		used := 0
		if ents, err := os.ReadDir("/proc"); err == nil {
			for _, e := range ents {
				if _, err := strconv.Atoi(e.Name()); err != nil {
					continue
				}
				if ts, err := os.ReadDir("/proc/" + e.Name() + "/task"); err == nil {
					used += len(ts)
				}
			}
		}
		per := scaleTIDsPerSession
		if inPlace {
			per = scaleTIDsPerSessionInPlace
		}
		fit = min(fit, (max-used)*3/4/per)
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
				kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				per := scaleMiBPerSession
				if inPlace {
					per = scaleMiBPerSessionInPlace
				}
				fit = min(fit, kb/1024/2/per)
			}
		}
		f.Close()
	}
	return fit
}

type scaleResult struct {
	rssEmpty, rss, hwm float64 // MiB
	threads, fds       int
	ps                 []float64 // ms
	store              float64   // bytes
	shims              int       // shim processes left beside the servers
	shimMem            float64   // MiB
	tids               float64   // per server, shim and log writer included
	hubKiB             float64   // the log hubs' USS per server
	// the daemon's CPU for a ps that samples every server's usage, and
	// for one that reuses the sample; a fresh ps's wall time (ms)
	usageFresh, usageCached, psFresh []float64
	startup, end                     time.Duration
}

// scaleHost is one fake agent host: an unreaped child of the bench, so
// SIGKILL by its PID is safe until reaped.
type scaleHost struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (b *bench) scaleTrial(ctx context.Context, trial, n int, sleepBin string, psCalls int, kill bool) (r scaleResult, err error) {
	dir := filepath.Join(b.dir, fmt.Sprintf("scale-%d", trial))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return r, err
	}
	vars := map[string]string{api.EnvStateDir: filepath.Join(dir, "state"), api.EnvSocket: filepath.Join(dir, "s.sock")}
	paths, err := api.ResolvePaths(func(k string) string { return vars[k] })
	if err != nil {
		return r, err
	}
	var env []string
	for _, kv := range b.env {
		if !strings.HasPrefix(kv, api.EnvStateDir+"=") && !strings.HasPrefix(kv, api.EnvSocket+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, api.EnvStateDir+"="+paths.StateDir, api.EnvSocket+"="+paths.Socket)
	sh := filepath.Join(b.dir, "bench-sh")
	if _, err := os.Lstat(sh); err != nil {
		if err := os.Symlink("/bin/sh", sh); err != nil {
			return r, err
		}
	}

	var hosts []*scaleHost
	var daemons []*recDaemon
	var ws []*watched
	defer func() {
		// Whatever happened, nothing this trial started outlives it.
		left := 0
		for _, h := range hosts {
			select {
			case <-h.done:
			default:
				left++
				h.cmd.Process.Kill()
				<-h.done
			}
		}
		for _, w := range ws {
			if !exited(w.fd) {
				left++
				unix.PidfdSendSignal(w.fd, unix.SIGKILL, nil, 0)
			}
		}
		closeWatches(ws)
		for _, d := range daemons {
			if !d.done && !exited(d.fd) {
				left++
				d.cmd.Process.Kill()
			}
			// Unreaped only if the trial failed before it stopped the
			// daemon, and says why: its status (SIGKILL above, or its own
			// end) adds nothing.
			_ = d.reap()
			d.log.Close()
		}
		if left > 0 {
			b.progress("  leftover: %d hosts, servers or daemons still running at the end of the trial, SIGKILLed", left)
			if err == nil {
				err = fmt.Errorf("%d processes outlived the trial", left)
			}
		}
	}()

	d, _, _, err := b.startRecDaemon(ctx, env, paths, filepath.Join(dir, "daemon.log"))
	if d != nil {
		daemons = append(daemons, d)
	}
	if err != nil {
		return r, fmt.Errorf("daemon: %w", err)
	}
	if r.rssEmpty, _, err = rssOf(d.pid); err != nil {
		return r, err
	}

	// Each host starts its 4 shims in the background and waits for them.
	script := `s=$1 sl=$2; for i in 1 2 3 4; do "$s" run --name "s$i" -- "$sl" 3600 </dev/null >/dev/null & done; wait`
	want := n * scalePerSession
	t0 := time.Now()
	nextReport := 250
	for started := 0; started < n; {
		batch := min(scaleBatch, n-started)
		for range batch {
			h := &scaleHost{done: make(chan struct{})}
			h.cmd = exec.Command(sh, "-c", script, "bench-sh", b.bin, sleepBin)
			h.cmd.Env = env
			h.cmd.Stderr = b.errLog
			// A killed bench takes its hosts along, and so all sessions.
			h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := h.cmd.Start(); err != nil {
				return r, fmt.Errorf("start host %d: %w", started+1, err)
			}
			hosts = append(hosts, h)
			b.track(h.cmd.Process.Pid, "scale host")
			// done says when it is gone: a host ends by SIGKILL or when
			// its shims do, and the trial judges the servers, not it.
			go func() { _ = h.cmd.Wait(); close(h.done) }()
			started++
		}
		if err := b.scaleWaitRunning(ctx, paths.Socket, started*scalePerSession, d); err != nil {
			return r, fmt.Errorf("after %d hosts: %w (log %s)", started, err, d.logTail())
		}
		if started >= nextReport || started == n {
			if started < n {
				b.progress("  trial %d: %d of %d sessions running (%.1fs)", trial, started, n, time.Since(t0).Seconds())
			}
			nextReport += 250
		}
	}

	// The servers, by the daemon's own list; watched by pidfd.
	// (status counts a record from its start; wait for every pid.)
	var procs []psEntry
	for deadline := time.Now().Add(scaleLimit); ; time.Sleep(20 * time.Millisecond) {
		if procs, err = psOnce(ctx, paths.Socket); err != nil {
			return r, err
		}
		running := 0
		for _, p := range procs {
			if p.PID > 0 && p.State == "running" {
				running++
			}
		}
		if running == want && len(procs) == want {
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("ps lists %d processes, %d of them running, want %d", len(procs), running, want)
		}
	}
	r.startup = time.Since(t0)
	sessions := map[string]bool{}
	for _, p := range procs {
		sessions[p.Session] = true
		w, err := openWatch("server", p.PID)
		if err != nil {
			return r, err
		}
		ws = append(ws, w)
		b.track(p.PID, "scale server")
	}
	if len(sessions) != n {
		return r, fmt.Errorf("the %d servers are in %d sessions, want %d", want, len(sessions), n)
	}
	var serverPIDs []int
	for _, p := range procs {
		serverPIDs = append(serverPIDs, p.PID)
	}
	// A host's children are its shims, or, where a shim exec'd its server
	// in its own place, the servers themselves.
	var shims []int
	for _, h := range hosts {
		for _, s := range children(h.cmd.Process.Pid) {
			if !slices.Contains(serverPIDs, s) {
				b.track(s, "scale shim")
				shims = append(shims, s)
			}
		}
	}
	r.shims = len(shims)
	r.shimMem = privateMiB(shims)
	if writers := logWriters(d.pid, serverPIDs); len(writers) > 0 {
		total := 0
		var uss float64
		for _, w := range writers {
			total += countDir(fmt.Sprintf("/proc/%d/task", w))
			if m, err := smapsRollup(w); err == nil {
				uss += m.uss
			}
		}
		r.hubKiB = uss * 1024 / float64(len(serverPIDs))
		r.tids = float64(total)/float64(len(serverPIDs)) + medianTasks(serverPIDs)
		if len(shims) > 0 {
			r.tids += medianTasks(shims) * float64(len(shims)) / float64(len(serverPIDs))
		}
	}

	if _, _, err := waitIdle(ctx, d.pid, scaleLimit); err != nil {
		return r, err
	}
	r.rss, r.hwm, _ = rssOf(d.pid)
	r.threads = countDir(fmt.Sprintf("/proc/%d/task", d.pid))
	r.fds = countDir(fmt.Sprintf("/proc/%d/fd", d.pid))

	for i := range psCalls {
		cmd := exec.CommandContext(ctx, b.bin, "ps", "--json")
		cmd.Env = env
		cmd.Stderr = b.errLog
		t := time.Now()
		out, err := cmd.Output()
		d := time.Since(t)
		if err != nil {
			return r, fmt.Errorf("supervisor ps --json (call %d): %w", i+1, err)
		}
		if c := strings.Count(string(out), `"pid":`); c != want {
			return r, fmt.Errorf("supervisor ps --json listed %d processes, want %d", c, want)
		}
		r.ps = append(r.ps, ms(d))
	}

	// Usage sampling (issue 17): a ps once the daemon's sample of every
	// server has expired (it measures them all), then one reusing it; the
	// daemon's CPU for each, three times.
	for range 3 {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(usageExpiry):
		}
		var cpu [3]time.Duration
		var wall time.Duration
		cpu[0] = cpuTime(d.pid)
		for j := range 2 {
			cmd := exec.CommandContext(ctx, b.bin, "ps", "--json")
			cmd.Env = env
			cmd.Stderr = b.errLog
			t := time.Now()
			if err := cmd.Run(); err != nil {
				return r, fmt.Errorf("supervisor ps --json (usage): %w", err)
			}
			if j == 0 {
				wall = time.Since(t)
			}
			cpu[j+1] = cpuTime(d.pid)
		}
		r.usageFresh = append(r.usageFresh, ms(cpu[1]-cpu[0]))
		r.usageCached = append(r.usageCached, ms(cpu[2]-cpu[1]))
		r.psFresh = append(r.psFresh, ms(wall))
	}

	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		if fi, err := os.Stat(paths.DB() + suffix); err == nil {
			r.store += float64(fi.Size())
		}
	}

	// End every session at once.
	fds := make([]int, len(ws))
	for i, w := range ws {
		fds[i] = w.fd
	}
	var stopErr chan error
	t1 := time.Now()
	if kill {
		for _, h := range hosts {
			h.cmd.Process.Signal(syscall.SIGKILL)
		}
	} else {
		stopErr = make(chan error, 1)
		go func() {
			stop := exec.CommandContext(ctx, b.bin, "daemon", "stop")
			stop.Env = env
			out, err := stop.CombinedOutput()
			if err != nil {
				err = fmt.Errorf("supervisor daemon stop: %w: %s", err, lastLine(out))
			}
			stopErr <- err
		}()
	}
	last, pending, err := waitPidfds(fds, func(int) {}, scaleEndLimit)
	if err != nil {
		return r, err
	}
	if len(pending) > 0 {
		return r, fmt.Errorf("%d of %d servers still running %v after the end of all sessions", len(pending), want, scaleEndLimit)
	}
	r.end = last.Sub(t1)
	if stopErr != nil {
		if err := <-stopErr; err != nil {
			return r, err
		}
	}
	for _, h := range hosts {
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			return r, fmt.Errorf("host %d still running 10s after its servers were stopped", h.cmd.Process.Pid)
		}
	}
	waitGoneTracked(shims, 10*time.Second)
	if kill {
		if _, err := b.stopRecDaemon(ctx, env, d, nil); err != nil {
			return r, err
		}
	} else if !waitFd(d.fd, 10*time.Second) {
		return r, fmt.Errorf("daemon %d still running 10s after daemon stop", d.pid)
	}
	if err := d.reap(); err != nil {
		return r, fmt.Errorf("daemon %d after daemon stop: %w (log %s)", d.pid, err, d.logTail())
	}
	return r, nil
}

// scaleWaitRunning polls the daemon's status until it runs want processes.
func (b *bench) scaleWaitRunning(ctx context.Context, socket string, want int, d *recDaemon) error {
	deadline := time.Now().Add(scaleLimit)
	for {
		st, err := statusOnce(ctx, socket)
		if err == nil && st.Processes >= want {
			return nil
		}
		if exited(d.fd) {
			return fmt.Errorf("daemon %d exited", d.pid)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d of %d servers running after %v (%v)", st.Processes, want, scaleLimit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type psEntry struct {
	PID     int
	Session string
	State   string
}

func psOnce(ctx context.Context, socket string) ([]psEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := api.Dial(ctx, socket)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var resp api.Processes
	if resp.Processes, err = c.Processes(api.PsRequest{}); err != nil {
		return nil, fmt.Errorf("ps: %w", err)
	}
	out := make([]psEntry, 0, len(resp.Processes))
	for _, p := range resp.Processes {
		out = append(out, psEntry{p.PID, p.Session, string(p.State)})
	}
	return out, nil
}

// privateMiB is the median private memory (Private_Clean + Private_Dirty of
// smaps_rollup) of up to 50 of pids, in MiB.
func privateMiB(pids []int) float64 {
	return medianOf(pids, func(pid int) (float64, bool) {
		f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
		if err != nil {
			return 0, false
		}
		defer f.Close()
		kb := 0
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ":")
			if k == "Private_Clean" || k == "Private_Dirty" {
				n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				kb += n
			}
		}
		return float64(kb) / 1024, true
	})
}

// medianTasks is the median thread count of (up to 50 of) pids.
func medianTasks(pids []int) float64 {
	return medianOf(pids, func(pid int) (float64, bool) {
		n := countDir(fmt.Sprintf("/proc/%d/task", pid))
		return float64(n), n > 0
	})
}

// medianOf is the median of read over (up to 50 of) pids, those it could
// read; 0 if none.
func medianOf(pids []int, read func(pid int) (float64, bool)) float64 {
	var xs []float64
	for _, pid := range pids[:min(len(pids), 50)] {
		if x, ok := read(pid); ok {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return 0
	}
	return median(xs)
}

// logWriters are the daemon's children that are none of servers: the log
// hub.
func logWriters(daemon int, servers []int) []int {
	var out []int
	for _, c := range children(daemon) {
		if !slices.Contains(servers, c) {
			out = append(out, c)
		}
	}
	return out
}

func pidMax() (int, error) {
	bs, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(bs)))
}

func countDir(path string) int {
	ents, _ := os.ReadDir(path)
	return len(ents)
}

func lastLine(bs []byte) string {
	lines := strings.Split(strings.TrimSpace(string(bs)), "\n")
	return lines[len(lines)-1]
}
