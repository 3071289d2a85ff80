//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/spawn"
)

// lazyServers is how many servers the lazy-start session has configured
// (lazyServersQuick with --quick).
const (
	lazyServers      = 10
	lazyServersQuick = 3
)

// lazyStart (issue 15): a session with 10 configured servers (the real
// server-filesystem on 10 roots), each connected at once the way a host
// starts them (spawn the shim, initialize, tools/list) over raw JSON-RPC:
// direct (`run`) against lazy with a warm cache (`run --lazy`, after one
// cold session filled it). Per server: connect to tools/list answered;
// per session: all 10 answered, and how many server processes run then
// (goal: ≤ 5 ms each and 0 processes). Then the first tools/call of a
// lazy server (it starts the server) against a call on a running one and
// against the direct start (spawn to initialize answered). Goal: the
// first call adds ≤ the server's own start + 10 ms.
func (b *bench) lazyStart(ctx context.Context, res *Results) error {
	npm, err := b.npmOrSkip(res, "lazy-start", "ms", nil)
	if npm == "" {
		return err
	}
	trials := max(1, min(b.o.trials, 5))
	si, err := b.startShareInst(ctx, "lazy-start")
	if err != nil {
		return err
	}
	defer si.stop(ctx, b)
	dir := filepath.Join(si.dir, "roots")
	n := lazyServers
	if b.o.quick {
		n = lazyServersQuick
	}
	var argvs [][]string
	for i := range n {
		root := filepath.Join(dir, fmt.Sprintf("root-%d", i))
		if err := os.MkdirAll(root, 0o700); err != nil {
			return err
		}
		argvs = append(argvs, []string{"node", npmEntry(npm, "server-filesystem"), root})
	}
	// The lazy kinds: `run --lazy`, whose process answers its host from
	// the cache (a front); the lean entry's front; and the path before
	// fronts, a broker per client from the start (SUPERVISOR_LAZY_FRONT=off).
	kinds := []string{"lazy", "broker"}
	if b.lean != "" {
		kinds = []string{"lazy", "lean", "broker"}
	} else {
		b.progress("  no supervisor-run beside %s: the lean entry's front is not measured", b.bin)
	}
	kindName := map[string]string{"lazy": "lazy (`run --lazy`, its front)", "lean": "lazy (`supervisor-run --lazy`, its front)", "broker": "lazy through a broker from the start (fronts off, as before)"}
	b.progress("lazy-start: %d trials of a session with %d server-filesystem servers, direct vs %s (warm cache)", trials, n, strings.Join(kinds, ", "))
	dEach := res.figure("lazy-start", "direct: connect → tools/list answered, per server", "ms")
	dAll := res.figure("lazy-start", fmt.Sprintf("direct: all %d answered (session start)", n), "ms")
	dProcs := res.figure("lazy-start", "direct: server processes once listed", "count")
	lEach, lAll, lProcs, resident, residentN, aloneL := map[string]*Figure{}, map[string]*Figure{}, map[string]*Figure{}, map[string]*Figure{}, map[string]*Figure{}, map[string]*Figure{}
	for _, k := range kinds {
		bold := func(s string) string {
			if k == "lazy" {
				return "**" + s + "**"
			}
			return s
		}
		lEach[k] = res.figure("lazy-start", bold(kindName[k]+" (warm cache): connect → tools/list answered, per server")+" (goal ≤ 5 ms)", "ms")
		lAll[k] = res.figure("lazy-start", fmt.Sprintf("%s: all %d answered (session start)", kindName[k], n), "ms")
		lProcs[k] = res.figure("lazy-start", bold(kindName[k]+": server processes once listed")+" (goal 0)", "count")
		resident[k] = res.figure("lazy-start", bold(kindName[k]+": PSS resident per server once listed (its own process, brokers, log writers)")+" (goal ≤ 0.5 MiB)", "MiB")
		residentN[k] = res.figure("lazy-start", "  "+kindName[k]+": processes resident per server once listed", "count")
		aloneL[k] = res.figure("lazy-start", "one server alone, "+kindName[k]+" (warm cache): connect → tools/list answered", "ms")
	}
	first := map[string]*Figure{}
	for _, k := range []string{"lazy", "broker"} {
		first[k] = res.figure("lazy-start", kindName[k]+": first tools/call (starts the server)", "ms")
	}
	running := res.figure("lazy-start", "  a tools/call on a running server", "ms")
	own := res.figure("lazy-start", "  the server's own start (direct: spawn → initialize answered)", "ms")
	margin := map[string]*Figure{}
	for _, k := range []string{"lazy", "broker"} {
		margin[k] = res.figure("lazy-start", "**first call − running call − own start**, "+kindName[k]+" (goal ≤ 10 ms)", "ms")
	}
	aloneD := res.figure("lazy-start", "one server alone, direct: connect → tools/list answered", "ms")
	// The baselines without the supervisor: what a host gets spawning the
	// servers itself. "direct" above is a supervised start.
	rEach := res.figure("lazy-start", "raw server, no supervisor: connect → tools/list answered, per server", "ms")
	rAll := res.figure("lazy-start", fmt.Sprintf("raw servers, no supervisor: all %d answered (session start)", n), "ms")
	aloneR := res.figure("lazy-start", "one server alone, raw (no supervisor): connect → tools/list answered", "ms")

	// The floors any Go process meets, measured beside: what n of them
	// started at once take to run, and what one that waits costs resident.
	floorEach := res.figure("lazy-start", fmt.Sprintf("floor: an empty Go program, %d started at once: start → exit, per process", n), "ms")
	floorPSS := res.figure("lazy-start", fmt.Sprintf("floor: an idle Go program (blocked reading stdin), PSS per process, %d running", n), "MiB")
	emptyGo, err := b.buildEmptyGo(ctx)
	if err != nil {
		return err
	}
	idleGo, err := b.buildIdleGo(ctx)
	if err != nil {
		return err
	}

	// command is how a host starts server argv in mode ("direct", a lazy
	// kind, or "raw": no supervisor), and the environment it adds.
	command := func(mode, name string, argv []string) (full, env []string) {
		switch mode {
		case "raw":
			return argv, nil
		case "lean":
			return append([]string{b.lean, "--lazy", "--name", name, "--"}, argv...), nil
		case "direct":
			return append([]string{b.bin, "run", "--name", name, "--"}, argv...), nil
		case "broker":
			env = []string{"SUPERVISOR_LAZY_FRONT=off"}
		}
		return append([]string{b.bin, "run", "--lazy", "--name", name, "--"}, argv...), env
	}
	session := func(mode string) (each []float64, all time.Duration, clients []*rawClient, err error) {
		clients = make([]*rawClient, len(argvs))
		each = make([]float64, len(argvs))
		errs := make([]error, len(argvs))
		var wg sync.WaitGroup
		t0 := time.Now()
		for i, argv := range argvs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				full, env := command(mode, fmt.Sprintf("fs%d", i), argv)
				s := time.Now()
				clients[i], errs[i] = b.startRawEnv(ctx, si, dir, mode+" "+full[0], full, env)
				each[i] = ms(time.Since(s))
			}()
		}
		wg.Wait()
		all = time.Since(t0)
		for _, e := range errs {
			if e != nil {
				closeAll(b, clients)
				return nil, 0, nil, e
			}
		}
		return each, all, clients, nil
	}
	// One cold lazy session fills the cache (and warms the page cache).
	_, _, cs, err := session("lazy")
	if err != nil {
		return fmt.Errorf("lazy-start: the cold session: %w", err)
	}
	closeAll(b, cs)
	if err := si.waitEmpty(ctx); err != nil {
		return err
	}
	modes := append(append([]string{"direct"}, kinds...), "raw")
	for trial := range trials {
		var ownD float64
		firstD, runningD := map[string]float64{}, map[string]float64{}
		for k := range modes {
			mode := modes[(k+trial)%len(modes)] // rotate which goes first
			each, all, cs, err := session(mode)
			if err != nil {
				return fmt.Errorf("lazy-start (%s): %w", mode, err)
			}
			slices.Sort(each)
			switch mode {
			case "raw":
				rEach.add(each[len(each)/2])
				rAll.add(ms(all))
				closeAll(b, cs)
				continue
			case "direct":
				dEach.add(each[len(each)/2])
				dAll.add(ms(all))
			default:
				mem, count, err := si.residentMem(ctx, cs)
				if err != nil {
					closeAll(b, cs)
					return err
				}
				resident[mode].add(mem / float64(len(cs)))
				residentN[mode].add(float64(count) / float64(len(cs)))
				lEach[mode].add(each[len(each)/2])
				lAll[mode].add(ms(all))
			}
			n, err := si.serverProcs(ctx)
			if err != nil {
				closeAll(b, cs)
				return err
			}
			if mode == "direct" {
				dProcs.add(float64(n))
			} else {
				lProcs[mode].add(float64(n))
			}
			if first[mode] != nil {
				f, err := cs[0].call("list_allowed_directories", "{}", 10)
				if err == nil {
					var r time.Duration
					if r, err = cs[0].call("list_allowed_directories", "{}", 10); err == nil {
						first[mode].add(ms(f))
						if mode == "lazy" {
							running.add(ms(r)) // one sample a trial
						}
						firstD[mode], runningD[mode] = ms(f), ms(r)
					}
				}
				if err != nil {
					closeAll(b, cs)
					return fmt.Errorf("lazy-start: first call (%s): %w", mode, err)
				}
			}
			if mode == "direct" {
				// The direct server's own start: a fresh one, spawn to
				// initialize answered (startRaw also lists; time to that).
				s := time.Now()
				c, err := b.startRaw(ctx, si, dir, "own", append([]string{b.bin, "run", "--name", "own", "--"}, argvs[0]...))
				if err != nil {
					closeAll(b, cs)
					return err
				}
				ownD = ms(time.Since(s))
				own.add(ownD)
				c.close(b)
			}
			closeAll(b, cs)
			if err := si.waitEmpty(ctx); err != nil {
				return err
			}
		}
		for k, f := range firstD {
			margin[k].add(f - runningD[k] - ownD)
		}
		each, pss, err := goFloors(b, emptyGo, idleGo, n)
		if err != nil {
			return fmt.Errorf("lazy-start: the Go floors: %w", err)
		}
		floorEach.add(each)
		floorPSS.add(pss)
		// One server with the machine to itself: what a lazy connection
		// costs without nine others starting beside it.
		alone := map[string]float64{}
		for k := range modes {
			mode := modes[(k+trial)%len(modes)]
			full, env := command(mode, "fs0", argvs[0])
			s := time.Now()
			c, err := b.startRawEnv(ctx, si, dir, mode+" alone", full, env)
			if err != nil {
				return fmt.Errorf("lazy-start: one server alone (%s): %w", mode, err)
			}
			alone[mode] = ms(time.Since(s))
			c.close(b)
			if err := si.waitEmpty(ctx); err != nil {
				return err
			}
			switch mode {
			case "direct":
				aloneD.add(alone[mode])
			case "raw":
				aloneR.add(alone[mode])
			default:
				aloneL[mode].add(alone[mode])
			}
		}
		b.progress("  trial %d: first call %.1f ms (broker from the start %.1f), own start %.1f ms; one server alone raw %.1f / direct %.1f / lazy %.1f / lean %.1f / broker %.1f ms",
			trial+1, firstD["lazy"], firstD["broker"], ownD, alone["raw"], alone["direct"], alone["lazy"], alone["lean"], alone["broker"])
	}
	return nil
}

// goFloors starts n empty Go programs at once (the median time each
// takes to exit) and then n idle ones (their PSS each, once all run).
func goFloors(b *bench, emptyGo, idleGo string, n int) (each, pss float64, err error) {
	times := make([]float64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := time.Now()
			errs[i] = exec.Command(emptyGo).Run()
			times[i] = ms(time.Since(s))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	slices.Sort(times)
	var cmds []*exec.Cmd
	var stdins []io.Closer
	defer func() {
		for _, in := range stdins {
			in.Close()
		}
		for _, c := range cmds {
			_ = c.Wait() // each ends at its stdin's EOF; how does not matter
		}
	}()
	for range n {
		c := exec.Command(idleGo)
		in, err := c.StdinPipe()
		if err != nil {
			return 0, 0, err
		}
		if err := c.Start(); err != nil {
			return 0, 0, err
		}
		b.track(c.Process.Pid, "idle Go program")
		cmds, stdins = append(cmds, c), append(stdins, in)
	}
	// Each is blocked in its read well within this.
	time.Sleep(300 * time.Millisecond)
	var sum memStat
	for _, c := range cmds {
		st, err := smapsRollup(c.Process.Pid)
		if err != nil {
			return 0, 0, err
		}
		sum = sum.plus(st)
	}
	return times[n/2], sum.pss / float64(n), nil
}

func closeAll(b *bench, cs []*rawClient) {
	var wg sync.WaitGroup
	for _, c := range cs {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.close(b) }()
		}
	}
	wg.Wait()
}

// waitEmpty waits until the daemon lists no live record (lingers over).
func (si *shareInst) waitEmpty(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ps, err := si.procs(ctx)
		if err == nil && len(ps) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the daemon still lists %d live records 30s after the clients left (%v)%s", len(ps), err, si.dump(err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serverProcs counts the node processes carrying the markers of the
// daemon's live records: servers, direct or under a broker.
// residentMem sums the PSS of what a session keeps resident: the clients'
// shims and every process carrying one of the daemon's records' markers
// (brokers, log writers, servers), and counts them.
func (si *shareInst) residentMem(ctx context.Context, cs []*rawClient) (float64, int, error) {
	ps, err := si.procs(ctx)
	if err != nil {
		return 0, 0, err
	}
	ids := map[string]bool{}
	for _, p := range ps {
		ids[p.ID] = true
	}
	pids := map[int]bool{}
	for _, c := range cs {
		pids[c.cmd.Process.Pid] = true
	}
	infos, err := proc.Scan()
	if err != nil {
		return 0, 0, err
	}
	for _, info := range infos {
		env, err := proc.Environ(info.PID)
		if err != nil {
			continue
		}
		if id, _ := proc.EnvValue(env, spawn.EnvProcID); ids[id] {
			pids[info.PID] = true
		}
	}
	var sum memStat
	for pid := range pids {
		st, err := smapsRollup(pid)
		if err != nil {
			return 0, 0, err
		}
		sum = sum.plus(st)
	}
	return sum.pss, len(pids), nil
}

func (si *shareInst) serverProcs(ctx context.Context) (int, error) {
	ps, err := si.procs(ctx)
	if err != nil {
		return 0, err
	}
	ids := map[string]bool{}
	for _, p := range ps {
		ids[p.ID] = true
	}
	infos, err := proc.Scan()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, info := range infos {
		env, err := proc.Environ(info.PID)
		if err != nil {
			continue
		}
		if id, _ := proc.EnvValue(env, spawn.EnvProcID); !ids[id] {
			continue
		}
		if argv, _ := proc.Cmdline(info.PID); len(argv) > 0 && filepath.Base(argv[0]) == "node" {
			n++
		}
	}
	return n, nil
}

// dump is what an unresponsive daemon was doing: its goroutines, which a
// SIGQUIT makes it write to its log (and exit), the daemon's own frames
// only. Nothing when the daemon answered (err nil).
func (si *shareInst) dump(err error) string {
	if err == nil || si.d == nil || si.d.pid <= 0 {
		return ""
	}
	syscall.Kill(si.d.pid, syscall.SIGQUIT)
	time.Sleep(2 * time.Second)
	bs, rerr := os.ReadFile(si.d.log.Name())
	if rerr != nil {
		return ""
	}
	var keep []string
	for _, l := range strings.Split(string(bs), "\n") {
		if strings.HasPrefix(l, "goroutine ") || strings.Contains(l, "supervisor/") && !strings.HasPrefix(l, "\t") {
			keep = append(keep, l)
		}
	}
	return "; the daemon's goroutines (SIGQUIT):\n    " + strings.Join(keep[max(0, len(keep)-400):], "\n    ")
}
