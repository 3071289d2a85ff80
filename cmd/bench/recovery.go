//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/spawn"
	"github.com/seed-86a41135/supervisor/store"
)

// Sizes of the recovery figure. A trial starts N real processes, so the
// full run keeps fewer trials than the other figures.
const (
	recoveryRecords      = 4000
	recoveryRecordsQuick = 40
	recoveryTrials       = 5
	recoveryTrialsQuick  = 2
	// recoveryPerSession records share one session, as the servers of one
	// agent host do.
	recoveryPerSession = 4
	// recoveryLimit bounds each wait of a trial: the daemon answering, it
	// going idle, `daemon stop` and the processes it stops. Generous: it
	// is there for hangs, not for timing.
	recoveryLimit = 180 * time.Second
	// idlePoll is the window of the idle check: the daemon is idle once it
	// used at most one clock tick (10 ms) of CPU over one window.
	idlePoll = 100 * time.Millisecond
)

// recovery: a daemon starts on a registry of N records, half of them live
// processes carrying this instance's markers, half dead, as after a daemon
// crash on a busy host. Per trial, in a private state directory:
//
//   - a daemon on the empty store (fresh directory) gives the "before" RSS,
//     then `daemon stop`;
//   - N `sleep 3600` start, each in its own process group (as spawn does)
//     with the marker environment of its record; every other one is then
//     SIGKILLed and reaped, so the dead records name real PIDs that existed
//     and whose tokens match nothing alive (a PID the kernel hands out again
//     gets another token);
//   - registry.db gets N/4 active sessions hosted by the bench itself (alive,
//     so no session ends at recovery) with 2 live and 2 dead running records
//     each (no shim: a dead shim would stop its server);
//   - `supervisor daemon --foreground` starts; timed from exec to a status
//     answered on the socket, which the daemon opens once reconcile is done,
//     and its own recovery.duration_ms; its VmRSS is read at once, then again
//     once its CPU is idle (the lost records' leftover sweeps run in the
//     background after the socket opens);
//   - `daemon stop` ends every session through the cascade; timed until the
//     adopted processes and the daemon are all gone.
//
// recovery.adopted and recovery.lost must both be N/2, and no process the
// trial started may outlive it; anything else fails the run.
func (b *bench) recovery(ctx context.Context, res *Results) error {
	n, trials := b.o.recRecords, b.o.recTrials
	sleepBin, err := exec.LookPath("sleep")
	if err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	b.progress("recovery: %d trials of %d records (%d live `%s 3600`, %d dead) in %d sessions", trials, n, n/2, sleepBin, n/2, sessionsFor(n))
	sfx := fmt.Sprintf(" (%d records: %d live, %d dead; %d trials)", n, n/2, n/2, trials)
	reconcile := res.figure("recovery", "**reconcile**: the daemon's recovery.duration_ms"+sfx, "ms")
	answer := res.figure("recovery", "daemon exec → socket answers status", "ms")
	rssEmpty := res.figure("recovery", "  daemon RSS, empty store", "MiB")
	rssAfter := res.figure("recovery", "  daemon RSS right after recovery", "MiB")
	idle := res.figure("recovery", fmt.Sprintf("  socket answers → daemon idle (≤ 1 CPU tick per %v; lost records' leftover sweeps)", idlePoll), "ms")
	rssIdle := res.figure("recovery", "  daemon RSS once idle", "MiB")
	stop := res.figure("recovery", fmt.Sprintf("`daemon stop` → all %d adopted and the daemon gone", n/2), "ms")
	adopted := res.figure("recovery", fmt.Sprintf("recovery.adopted (must be %d)", n/2), "count")
	lost := res.figure("recovery", fmt.Sprintf("recovery.lost (must be %d)", n/2), "count")
	for i := range trials {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r, err := b.recoveryTrial(ctx, i+1, n, sleepBin)
		if r.answered {
			adopted.add(float64(r.rec.Adopted))
			lost.add(float64(r.rec.Lost))
		}
		if err != nil {
			b.progress("  trial %d FAILED: %v", i+1, err)
			res.Failures++
			continue
		}
		reconcile.add(r.rec.DurationMS)
		answer.add(ms(r.answer))
		rssEmpty.add(r.rssEmpty)
		rssAfter.add(r.rssAfter)
		idle.add(ms(r.idle))
		rssIdle.add(r.rssIdle)
		stop.add(ms(r.stop))
		b.progress("  trial %d: reconcile %.1fms, socket answered %.1fms after exec; RSS %.1f MiB empty, %.1f MiB after recovery (peak %.1f), %.1f MiB idle %.0fms later (daemon CPU %.0fms); daemon stop → all gone %.1fms",
			i+1, r.rec.DurationMS, ms(r.answer), r.rssEmpty, r.rssAfter, r.hwm, r.rssIdle, ms(r.idle), ms(r.idleCPU), ms(r.stop))
	}
	return nil
}

func sessionsFor(n int) int { return (n + recoveryPerSession - 1) / recoveryPerSession }

type recoveryResult struct {
	answered bool // the daemon answered: rec is its summary
	rec      api.Recovery
	answer   time.Duration // exec → status answered
	rssEmpty float64       // MiB
	rssAfter float64
	hwm      float64 // VmHWM right after recovery
	idle     time.Duration
	idleCPU  time.Duration // the daemon's CPU from the answer to idle
	rssIdle  float64
	stop     time.Duration
}

// kid is a process the trial started: its unreaped child, so its PID
// stays its own until reaped and signalling it by PID is safe.
type kid struct {
	cmd *exec.Cmd
	pid int
	fd  int // pidfd, -1 once reaped and closed
	// reaped: waited for; fd stays open until reap closes it, so no fd
	// number in a wait set is reused meanwhile.
	reaped bool
	live   bool
	id     string
	sess   string
	tok    proc.Token
	start  time.Time
}

// recDaemon is a `daemon --foreground` the trial started.
type recDaemon struct {
	cmd  *exec.Cmd
	pid  int
	fd   int // pidfd
	log  *os.File
	done bool
}

func (b *bench) recoveryTrial(ctx context.Context, trial, n int, sleepBin string) (r recoveryResult, err error) {
	dir := filepath.Join(b.dir, fmt.Sprintf("recovery-%d", trial))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return r, err
	}
	// The daemon's own resolution of its paths, so the markers carry the
	// instance it computes.
	vars := map[string]string{api.EnvStateDir: filepath.Join(dir, "state"), api.EnvSocket: filepath.Join(dir, "s.sock")}
	paths, err := api.ResolvePaths(func(k string) string { return vars[k] })
	if err != nil {
		return r, err
	}
	var base []string // the bench's environment without any daemon's paths
	for _, kv := range b.env {
		if !strings.HasPrefix(kv, api.EnvStateDir+"=") && !strings.HasPrefix(kv, api.EnvSocket+"=") {
			base = append(base, kv)
		}
	}
	env := append(append([]string(nil), base...), api.EnvStateDir+"="+paths.StateDir, api.EnvSocket+"="+paths.Socket)

	var kids []*kid
	var daemons []*recDaemon
	defer func() {
		// Whatever happened, nothing this trial started outlives it.
		if cerr := b.recoveryCleanup(kids, daemons); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()

	// Before: the same daemon on an empty store.
	d, st, _, err := b.startRecDaemon(ctx, env, paths, filepath.Join(dir, "daemon-empty.log"))
	if d != nil {
		daemons = append(daemons, d)
	}
	if err != nil {
		return r, fmt.Errorf("daemon on an empty store: %w", err)
	}
	if st.Recovery == nil || st.Recovery.Adopted+st.Recovery.Lost != 0 {
		return r, fmt.Errorf("daemon on an empty store recovered %+v", st.Recovery)
	}
	if r.rssEmpty, _, err = rssOf(d.pid); err != nil {
		return r, err
	}
	if _, err := b.stopRecDaemon(ctx, env, d, nil); err != nil {
		return r, fmt.Errorf("daemon on an empty store: %w", err)
	}

	// The processes: all N first, then every other one killed, so no dead
	// record's PID can have been handed to a live one.
	t0 := time.Now()
	inst := paths.Instance()
	for i := range n {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		k := &kid{fd: -1, live: i%2 == 0, id: fmt.Sprintf("p-%010x", trial<<24|i), sess: fmt.Sprintf("bench-recovery-%d-%04d", trial, i/recoveryPerSession)}
		k.cmd = exec.Command(sleepBin, "3600")
		k.cmd.Env = append(append([]string(nil), base...),
			spawn.EnvInstance+"="+inst, spawn.EnvProcID+"="+k.id, spawn.EnvSessionID+"="+k.sess)
		// Own group, as spawn does: the cascade signals a target's group
		// only when the target leads it. Pdeathsig: a killed bench leaves
		// no hour-long sleeps behind.
		k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := k.cmd.Start(); err != nil {
			return r, fmt.Errorf("start %s (%d of %d): %w", sleepBin, i+1, n, err)
		}
		k.pid, k.start = k.cmd.Process.Pid, time.Now()
		kids = append(kids, k)
		if k.fd, err = unix.PidfdOpen(k.pid, 0); err != nil {
			return r, fmt.Errorf("pidfd of pid %d: %w", k.pid, err)
		}
		if k.tok, err = proc.TokenOf(k.pid); err != nil {
			return r, fmt.Errorf("token of pid %d: %w", k.pid, err)
		}
		if (i+1)%1000 == 0 {
			b.progress("  trial %d: started %d of %d", trial, i+1, n)
		}
	}
	started := time.Since(t0)
	for _, k := range kids {
		if !k.live {
			k.cmd.Process.Kill()
			k.reap()
		}
	}
	b.progress("  trial %d: started %d processes in %.0fms, killed and reaped %d of them", trial, n, ms(started), n-n/2)

	t1 := time.Now()
	if err := writeRecords(paths.DB(), kids, sleepBin); err != nil {
		return r, err
	}
	b.progress("  trial %d: wrote %d records and %d sessions in %.0fms", trial, n, sessionsFor(n), ms(time.Since(t1)))

	// After: the daemon reconciles them.
	d, st, r.answer, err = b.startRecDaemon(ctx, env, paths, filepath.Join(dir, "daemon.log"))
	if d != nil {
		daemons = append(daemons, d)
	}
	if err != nil {
		return r, fmt.Errorf("daemon on %d records: %w (log %s)", n, err, d.logTail())
	}
	r.rssAfter, r.hwm, _ = rssOf(d.pid)
	if st.Recovery == nil {
		return r, errors.New("status has no recovery summary")
	}
	r.answered, r.rec = true, *st.Recovery
	b.progress("  trial %d: daemon pid %d answered %.1fms after exec: adopted %d, lost %d, stopped %d, sessions ended %d in %.1fms",
		trial, d.pid, ms(r.answer), r.rec.Adopted, r.rec.Lost, r.rec.Stopped, r.rec.SessionsEnded, r.rec.DurationMS)
	if r.rec.Adopted != n/2 || r.rec.Lost != n/2 {
		return r, fmt.Errorf("recovery adopted %d and lost %d, want %d each (log %s)", r.rec.Adopted, r.rec.Lost, n/2, d.logTail())
	}

	if r.idle, r.idleCPU, err = waitIdle(ctx, d.pid, recoveryLimit); err != nil {
		return r, err
	}
	r.rssIdle, _, _ = rssOf(d.pid)

	var live []*kid
	for _, k := range kids {
		if k.live {
			live = append(live, k)
		}
	}
	if r.stop, err = b.stopRecDaemon(ctx, env, d, live); err != nil {
		return r, fmt.Errorf("stop the daemon with %d adopted: %w (log %s)", len(live), err, d.logTail())
	}
	return r, nil
}

// writeRecords writes one active session per recoveryPerSession kids, hosted
// by the bench, and a running record per kid into a fresh registry.db.
func writeRecords(db string, kids []*kid, sleepBin string) error {
	self, err := proc.TokenOf(os.Getpid())
	if err != nil {
		return err
	}
	cwd, _ := os.Getwd()
	// NoSync: the next reader is the daemon on this boot, through the page
	// cache; one fsync per batch would only slow the setup down.
	s, err := store.Open(db, store.Options{NoSync: true})
	if err != nil {
		return err
	}
	// Concurrent puts: the store batches concurrent writes into one
	// transaction, where sequential ones cost a transaction each.
	now := time.Now().UTC()
	seen := map[string]bool{}
	var puts []func() error
	for _, k := range kids {
		if !seen[k.sess] {
			seen[k.sess] = true
			sess := registry.Session{ID: k.sess, HostPID: os.Getpid(), HostToken: self,
				HostCommand: strings.Join(os.Args, " "), State: registry.SessionActive, StartedAt: now}
			puts = append(puts, func() error { return s.PutSession(sess) })
		}
		p := registry.Process{ID: k.id, Session: k.sess, Name: filepath.Base(sleepBin),
			Argv: []string{sleepBin, "3600"}, Path: sleepBin, Cwd: cwd, PID: k.pid, PGID: k.pid, Token: k.tok,
			State: registry.StateRunning, StartedAt: k.start.UTC(), Health: "none"}
		puts = append(puts, func() error { return s.PutProcess(p) })
	}
	const workers = 64
	ch := make(chan func() error)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for put := range ch {
				if errs[w] == nil {
					errs[w] = put()
				}
			}
		}()
	}
	for _, put := range puts {
		ch <- put
	}
	close(ch)
	wg.Wait()
	return errors.Join(append(errs, s.Close())...)
}

// startRecDaemon execs `daemon --foreground` and polls the socket until a
// status call is answered; answer runs from just before the exec.
func (b *bench) startRecDaemon(ctx context.Context, env []string, paths api.Paths, logPath string) (*recDaemon, api.Status, time.Duration, error) {
	var st api.Status
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, st, 0, err
	}
	d := &recDaemon{fd: -1, log: logf}
	d.cmd = exec.Command(b.bin, "daemon", "--foreground")
	d.cmd.Env = env
	if b.o.pprof != "" {
		d.cmd.Env = append(slices.Clone(env), "SUPERVISOR_METRICS_ADDR="+b.o.pprof, "SUPERVISOR_PPROF=1")
	}
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	t0 := time.Now()
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return nil, st, 0, fmt.Errorf("start supervisor daemon --foreground: %w", err)
	}
	d.pid = d.cmd.Process.Pid
	if d.fd, err = unix.PidfdOpen(d.pid, 0); err != nil {
		return d, st, 0, fmt.Errorf("pidfd of daemon %d: %w", d.pid, err)
	}
	b.track(d.pid, "recovery daemon")
	deadline := t0.Add(recoveryLimit)
	for {
		if st, err = statusOnce(ctx, paths.Socket); err == nil {
			answer := time.Since(t0)
			if st.PID != d.pid {
				return d, st, answer, fmt.Errorf("socket answered by daemon %d, not %d", st.PID, d.pid)
			}
			return d, st, answer, nil
		}
		if exited(d.fd) {
			return d, st, 0, fmt.Errorf("daemon %d exited during start: %s", d.pid, d.logTail())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return d, st, 0, fmt.Errorf("daemon %d did not answer within %v: %w", d.pid, recoveryLimit, err)
		}
		time.Sleep(500 * time.Microsecond)
	}
}

func statusOnce(ctx context.Context, socket string) (api.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var st api.Status
	c, err := api.Dial(ctx, socket)
	if err != nil {
		return st, err
	}
	defer c.Close()
	err = c.Call(api.TypeStatus, nil, &st)
	return st, err
}

// stopRecDaemon runs `daemon stop` and times it until the daemon and every
// one of procs (which it was to stop) are gone.
func (b *bench) stopRecDaemon(ctx context.Context, env []string, d *recDaemon, procs []*kid) (time.Duration, error) {
	fds := []int{d.fd}
	byFd := map[int]*kid{}
	for _, k := range procs {
		fds = append(fds, k.fd)
		byFd[k.fd] = k
	}
	// Reap each as it exits, as the subreaper or init that adopted a
	// crashed daemon's servers would: a zombie left in /proc would weigh
	// on every scan the daemon's cascade makes.
	reap := func(fd int) {
		if k := byFd[fd]; k != nil {
			_ = k.cmd.Wait() // a sleep the cascade stopped: its status is that signal
			k.reaped = true
		}
	}
	sctx, cancel := context.WithTimeout(ctx, recoveryLimit)
	defer cancel()
	stop := exec.CommandContext(sctx, b.bin, "daemon", "stop")
	stop.Env = env
	t0 := time.Now()
	out, err := stop.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("supervisor daemon stop: %w: %s", err, bytes.TrimSpace(out))
	}
	last, pending, err := waitPidfds(fds, reap, time.Until(t0.Add(recoveryLimit)))
	if err != nil {
		return 0, err
	}
	if len(pending) > 0 {
		var left []string
		if pending[d.fd] {
			left = append(left, fmt.Sprintf("daemon %d", d.pid))
		}
		for _, k := range procs {
			if pending[k.fd] {
				left = append(left, strconv.Itoa(k.pid))
			}
		}
		return 0, fmt.Errorf("still running %v after daemon stop: %d processes (%s)", recoveryLimit, len(left), strings.Join(left[:min(len(left), 10)], ", "))
	}
	derr := d.reap()
	for _, k := range procs {
		k.reap()
	}
	if derr != nil {
		return 0, fmt.Errorf("daemon %d after daemon stop: %w (log %s)", d.pid, derr, d.logTail())
	}
	return last.Sub(t0), nil
}

// recoveryCleanup SIGKILLs, by PID, whatever the trial started that still
// runs (its own unreaped children, so the PIDs are theirs) and reaps it.
// Any such leftover is an error: the daemon's stop should have ended it.
func (b *bench) recoveryCleanup(kids []*kid, daemons []*recDaemon) error {
	var left []string
	for _, d := range daemons {
		if !d.done {
			if !exited(d.fd) {
				left = append(left, fmt.Sprintf("daemon %d", d.pid))
				d.cmd.Process.Kill()
			}
			// Unreaped only if the trial failed before it stopped the
			// daemon, and says why: its status (SIGKILL above, or its own
			// end) adds nothing.
			_ = d.reap()
		}
		d.log.Close()
	}
	for _, k := range kids {
		if k.fd < 0 {
			continue
		}
		if !exited(k.fd) {
			left = append(left, strconv.Itoa(k.pid))
			k.cmd.Process.Kill()
		}
		k.reap()
	}
	if len(left) == 0 {
		return nil
	}
	b.progress("  leftover: %d processes still running at the end of the trial, SIGKILLed: %s", len(left), strings.Join(left[:min(len(left), 20)], ", "))
	return fmt.Errorf("%d processes outlived the trial", len(left))
}

func (k *kid) reap() {
	if k.fd < 0 {
		return
	}
	if !k.reaped {
		_ = k.cmd.Wait() // a sleep killed by the trial or the cascade: its status is that signal
		k.reaped = true
	}
	unix.Close(k.fd)
	k.fd = -1
}

// reap waits for the daemon and returns its exit status as an error, once:
// nil if it exited 0 or was reaped before.
func (d *recDaemon) reap() error {
	if d.done {
		return nil
	}
	err := d.cmd.Wait()
	if d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
	d.done = true
	return err
}

// logTail is the last lines of the daemon's stderr, for an error.
func (d *recDaemon) logTail() string {
	if d == nil {
		return ""
	}
	bs, err := os.ReadFile(d.log.Name())
	if err != nil {
		return d.log.Name()
	}
	lines := strings.Split(strings.TrimSpace(string(bs)), "\n")
	return d.log.Name() + ":\n    " + strings.Join(lines[max(0, len(lines)-8):], "\n    ")
}

// exited reports whether the pidfd's process has exited (readable).
func exited(fd int) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	return err == nil && n == 1
}

// waitFd waits up to limit for a pidfd to become readable (its process
// exited) and reports whether it did.
func waitFd(fd int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, int(left.Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		if n == 1 {
			return true
		}
	}
}

// waitPidfds waits until every pidfd is readable (its process has exited)
// or limit passes, calling onExit with each as it becomes readable, and
// returns when the last one did and the ones still pending. epoll rather
// than poll: thousands of fds, a few ready at a time.
func waitPidfds(fds []int, onExit func(fd int), limit time.Duration) (last time.Time, pending map[int]bool, err error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return last, nil, fmt.Errorf("epoll_create1: %w", err)
	}
	defer unix.Close(ep)
	pending = map[int]bool{}
	for _, fd := range fds {
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			return last, nil, fmt.Errorf("epoll_ctl add pidfd %d: %w", fd, err)
		}
		pending[fd] = true
	}
	evs := make([]unix.EpollEvent, 256)
	deadline := time.Now().Add(limit)
	for len(pending) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return last, pending, nil
		}
		n, err := unix.EpollWait(ep, evs, int(left.Milliseconds())+1)
		now := time.Now()
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return last, pending, fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range evs[:n] {
			fd := int(ev.Fd)
			if pending[fd] {
				delete(pending, fd)
				if err := unix.EpollCtl(ep, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
					return last, pending, fmt.Errorf("epoll_ctl del pidfd %d: %w", fd, err)
				}
				last = now
				onExit(fd)
			}
		}
	}
	return last, pending, nil
}

// waitIdle waits until pid used at most one clock tick of CPU over one
// idlePoll window, and returns how long that took (to the start of the
// idle window) and the CPU it used until then.
func waitIdle(ctx context.Context, pid int, limit time.Duration) (time.Duration, time.Duration, error) {
	t0 := time.Now()
	c0 := cpuTime(pid)
	prevT, prevC := t0, c0
	for {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(idlePoll):
		}
		c := cpuTime(pid)
		if c-prevC <= 10*time.Millisecond {
			return prevT.Sub(t0), prevC - c0, nil
		}
		if time.Since(t0) > limit {
			return 0, 0, fmt.Errorf("daemon %d still busy %v after recovery (%.0fms CPU)", pid, limit, ms(c-c0))
		}
		prevT, prevC = time.Now(), c
	}
}

// rssOf reads VmRSS and VmHWM of pid, in MiB.
func rssOf(pid int) (rss, hwm float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s %q: %w", pid, key, val, err)
		}
		if key == "VmRSS" {
			rss = kb / 1024
		} else {
			hwm = kb / 1024
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
	}
	return rss, hwm, sc.Err()
}
