//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// limitsOrSkip starts the instance's daemon and skips a test that needs
// memory_max, cpu_max and pids_max enforced, naming why the daemon cannot
// (status says).
func limitsOrSkip(t *testing.T, in *instance) {
	t.Helper()
	in.mustRun("daemon")
	status := in.mustRun("status")
	for _, k := range []string{"memory_max:", "cpu_max:", "pids_max:"} {
		for _, line := range strings.Split(status, "\n") {
			if v, ok := strings.CutPrefix(line, k); ok && !strings.Contains(v, "cgroup v") {
				t.Skipf("limits cannot be enforced here (needs writable cgroups, usually root): %s%s", k, v)
			}
		}
	}
}

// A server that allocates past its memory_max is OOM-killed by the kernel:
// the host sees it die of SIGKILL, its record says memory_max was hit, an
// event and a metric say so, and its session's other server runs on;
// whether it was exec'd in its shim's place or spawned by the daemon
// (which moves it into cgroup v1 limits after its exec).
func TestMemoryMaxOOMKills(t *testing.T) {
	t.Parallel()
	for _, inPlace := range []string{"auto", "off"} {
		t.Run("in place "+inPlace, func(t *testing.T) { testMemoryMaxOOMKills(t, inPlace) })
	}
}

func testMemoryMaxOOMKills(t *testing.T, inPlace string) {
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_IN_PLACE="+inPlace)
	limitsOrSkip(t, in)
	calm := in.startShim("--session", "lim", "--name", "calm", "--", "sh", "-c", "echo ready $$; exec sleep 600")
	calmPID := calm.readyPID(t)
	calmTok, err := proc.TokenOf(calmPID)
	if err != nil {
		t.Fatal(err)
	}
	// 200 MB through a shell variable, against 64M.
	hog := in.startShim("--session", "lim", "--name", "hog", "--memory-max", "64M", "--", "sh", "-c",
		`echo ready $$; x=$(head -c 200000000 /dev/zero | tr '\0' a); echo survived`)
	hog.readyPID(t)
	if killed, how := hog.endedBy(t, syscall.SIGKILL); !killed {
		t.Fatalf("hog ended %s, want killed by the OOM killer's SIGKILL", how)
	}
	rec := waitRecord(t, in, 0, named("hog", func(p api.Process) bool { return p.State.Final() && len(p.LimitHit) > 0 }))
	if rec.LimitHit[0] != "memory_max" || rec.Limits == nil || rec.Limits.MemoryMax != 64<<20 || rec.Signal != "SIGKILL" {
		t.Errorf("hog's record %+v: want it killed with memory_max 64M hit", rec)
	}
	if out := in.mustRun("ps", "--all"); !strings.Contains(out, "exited(memory_max)") {
		t.Errorf("ps --all:\n%s\nwant hog's state to say memory_max was hit", out)
	}
	in.waitEvents(func(evs []api.Event) bool {
		for _, e := range evs {
			if e.Kind == "process.limit" && e.Process == rec.ID && strings.Contains(e.Detail, "OOM killer") {
				return true
			}
		}
		return false
	})
	if m := in.mustRun("metrics"); !strings.Contains(m, `supervisor_limit_hits_total{limit="memory_max"} 1`) {
		t.Errorf("metrics: want one memory_max hit:\n%s", m)
	}
	if !alive(calmPID, calmTok) {
		t.Errorf("calm (%d), of the same session, died with hog", calmPID)
	}
}

// pids_max stops a fork bomb at its cap: its record says the limit was
// hit, and when it ends every process it forked is gone. The bomb gives
// up after 300 forks: a limit that did not hold fails the test, not the
// machine.
func TestPidsMaxStopsForkBomb(t *testing.T) {
	t.Parallel()
	for _, inPlace := range []string{"auto", "off"} {
		t.Run("in place "+inPlace, func(t *testing.T) {
			in := newInstance(t)
			in.env = append(in.env, "SUPERVISOR_IN_PLACE="+inPlace)
			limitsOrSkip(t, in)
			bomb := in.startShim("--session", "lim", "--name", "bomb", "--pids-max", "20", "--", "sh", "-c",
				`echo ready $$; i=0; while [ $i -lt 300 ]; do sleep 600 & i=$((i+1)); done; echo forked all 300`)
			bomb.readyPID(t)
			// Lists at once while it hits its limit: the hit is still
			// recorded once.
			var wg sync.WaitGroup
			for range 6 {
				wg.Add(1)
				go func() { defer wg.Done(); in.run("ps") }()
			}
			wg.Wait()
			bomb.exitCode(t) // the shell gives up at its first failed fork
			rec := waitRecord(t, in, 0, named("bomb", func(p api.Process) bool { return p.State.Final() && p.Stop != nil }))
			if !slices.Contains(rec.LimitHit, "pids_max") {
				t.Errorf("bomb's record %+v: want pids_max hit", rec)
			}
			hits := 0
			for _, e := range in.eventsJSON() {
				if e.Kind == "process.limit" && e.Process == rec.ID {
					hits++
				}
			}
			if m := in.mustRun("metrics"); hits != 1 || !strings.Contains(m, `supervisor_limit_hits_total{limit="pids_max"} 1`) {
				t.Errorf("%d process.limit events, metrics:\n%s\nwant the hit counted once", hits, m)
			}
			if left := markerHolders(t, rec.ID); len(left) > 0 {
				for _, pid := range left {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Errorf("processes of the bomb left after it ended: %v", left)
			}
		})
	}
}

// A limited server is in its limits from its first instruction: what it
// forks at once is in them too, whether it was exec'd in its shim's place
// or spawned by the daemon.
func TestLimitsHoldFromTheStart(t *testing.T) {
	t.Parallel()
	for _, inPlace := range []string{"auto", "off"} {
		t.Run("in place "+inPlace, func(t *testing.T) {
			in := newInstance(t)
			in.env = append(in.env, "SUPERVISOR_IN_PLACE="+inPlace)
			limitsOrSkip(t, in)
			s := in.startShim("--session", "lim", "--name", "forker", "--pids-max", "50", "--memory-max", "512M", "--", "sh", "-c",
				`for i in 1 2 3 4 5 6 7 8; do sleep 600 & done; echo ready $$; wait`)
			s.readyPID(t)
			rec := waitRecord(t, in, 0, named("forker", func(p api.Process) bool { return p.PID > 0 }))
			// A child caught inside its exec shows no environment for a
			// moment: wait until all nine are seen.
			var mine []int
			waitCond(t, func() error {
				if mine = markerHolders(t, rec.ID); len(mine) < 9 {
					return fmt.Errorf("the server's processes %v: want it and its 8 children", mine)
				}
				return nil
			})
			// The daemon's thread that forked it went back: none of the
			// daemon's threads is in the server's limits.
			d := in.daemonPID()
			tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(d), "task"))
			for _, task := range tasks {
				b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(d), "task", task.Name(), "cgroup"))
				if strings.Contains(string(b), rec.ID) {
					t.Errorf("the daemon's thread %s is in the server's cgroups:\n%s", task.Name(), b)
				}
			}
			if len(rec.LimitCgroups) == 0 {
				return // cgroup v2: its one cgroup holds it all (cgroup.procs of rec.Cgroup)
			}
			for _, dir := range rec.LimitCgroups {
				in := cgroupProcs([]string{dir})
				for _, pid := range mine {
					if !slices.Contains(in, pid) {
						t.Errorf("process %d of the server is outside its limits' cgroup %s (holding %v)", pid, dir, in)
					}
				}
			}
		})
	}
}

// cpu_max holds a spinning server near its share of a CPU.
func TestCPUMaxThrottles(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	limitsOrSkip(t, in)
	spin := in.startShim("--session", "lim", "--name", "spin", "--cpu-max", "0.2", "--", "sh", "-c", `echo ready $$; while :; do :; done`)
	spin.readyPID(t)
	first := waitRecord(t, in, 0, named("spin", func(p api.Process) bool { return p.Usage != nil }))
	time.Sleep(3 * time.Second)
	last := waitRecord(t, in, 0, named("spin", func(p api.Process) bool { return p.Usage != nil }))
	used := last.Usage.CPUSeconds - first.Usage.CPUSeconds
	// 0.2 CPU for 3 s or a little more is about 0.6 s; unthrottled it
	// would be ~3 s. Generous: the machine is shared, and the first sample
	// may be late.
	if used > 1.5 {
		t.Errorf("spin used %.2f s of CPU in about 3 s under cpu_max 0.2, want about 0.6", used)
	}
}

// A run whose limits cannot be enforced is refused, never run unbounded:
// here a daemon without cgroups (as any user), and a shared server.
func TestLimitsRefusedWhenUnenforceable(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_CGROUPS=off")
	_, stderr, code := in.run("run", "--session", "lim", "--memory-max", "64M", "--", "sh", "-c", "echo ran")
	if code != 125 || !strings.Contains(stderr, "memory_max 64M cannot be enforced") || !strings.Contains(stderr, "cgroups") {
		t.Errorf("run --memory-max without cgroups: code %d, stderr %q; want 125 naming the limit and cgroups", code, stderr)
	}
	if strings.Contains(in.mustRun("ps", "--all"), "echo ran") {
		t.Errorf("the refused server ran")
	}
	_, stderr, code = in.run("run", "--session", "lim", "--share", "--pids-max", "100", "--", "sh", "-c", "echo ran")
	if code != 125 || !strings.Contains(stderr, "pids_max 100 cannot be enforced") {
		t.Errorf("run --share --pids-max without cgroups: code %d, stderr %q; want 125 naming the limit", code, stderr)
	}
	for _, tc := range [][]string{{"--memory-max", "lots"}, {"--cpu-max", "0"}, {"--pids-max", "-3"}} {
		_, stderr, code := in.run(append(append([]string{"run", "--session", "lim"}, tc...), "--", "true")...)
		if code == 0 || !strings.Contains(stderr, tc[0]) {
			t.Errorf("run %v: code %d, stderr %q; want an error naming %s", tc, code, stderr, tc[0])
		}
	}
	if st := in.mustRun("status"); !strings.Contains(st, "memory_max: unavailable") {
		t.Errorf("status:\n%s\nwant it to say memory_max is unavailable", st)
	}
}

// ensure starts a shared server within its limits: the record carries
// them and its cgroup holds them; without cgroups ensure is refused.
func TestEnsureLimits(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	limitsOrSkip(t, in)
	ps := strconv.Itoa(freePort(t))
	res, errOut, code := in.ensure(t, "--session", "lim", "--port", ps, "--memory-max", "256M", "--pids-max", "50", "--", bin, "_fixture", "listen", ps)
	if code != 0 {
		t.Fatalf("ensure: exit %d: %s", code, errOut)
	}
	rec := waitRecord(t, in, 0, named(res.Name, func(p api.Process) bool { return p.PID == res.PID }))
	if rec.Limits == nil || rec.Limits.MemoryMax != 256<<20 || rec.Limits.PidsMax != 50 {
		t.Fatalf("record's limits %+v, want 256M and 50 processes", rec.Limits)
	}
	// Where the kernel holds them: v1 directories beside its cgroup, or
	// its v2 cgroup itself.
	found := map[string]string{}
	for _, dir := range append([]string{rec.Cgroup}, rec.LimitCgroups...) {
		for _, f := range []string{"memory.limit_in_bytes", "memory.max", "pids.max"} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
				found[f] = strings.TrimSpace(string(b))
			}
		}
	}
	if mem := found["memory.limit_in_bytes"] + found["memory.max"]; mem != strconv.Itoa(256<<20) || found["pids.max"] != "50" {
		t.Errorf("the cgroups hold %v, want memory 268435456 and pids.max 50", found)
	}
	if pids := cgroupProcs(rec.LimitCgroups); len(rec.LimitCgroups) > 0 && !slices.Contains(pids, rec.PID) {
		t.Errorf("the server %d is not in its limits' cgroups (they hold %v)", rec.PID, pids)
	}

	off := newInstance(t)
	off.env = append(off.env, "SUPERVISOR_CGROUPS=off")
	ps2 := strconv.Itoa(freePort(t))
	if _, errOut, code := off.ensure(t, "--session", "lim", "--port", ps2, "--pids-max", "50", "--", bin, "_fixture", "listen", ps2); code == 0 || !strings.Contains(errOut, "pids_max 50 cannot be enforced") {
		t.Errorf("ensure --pids-max without cgroups: exit %d, %q; want it refused naming the limit", code, errOut)
	}
}

// A limited server outlives a daemon crash within its limits: the next
// daemon adopts it with them, and removes its limits' cgroups once it
// stops.
func TestLimitedServerAcrossDaemonCrash(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	limitsOrSkip(t, in)
	s := in.startShim("--session", "lim", "--name", "kept", "--memory-max", "128M", "--", "sh", "-c", "echo ready $$; exec sleep 600")
	pid := s.readyPID(t)
	before := waitRecord(t, in, 0, named("kept", func(p api.Process) bool { return p.PID == pid }))
	in.killDaemon(t)
	in.mustRun("daemon")
	after := waitRecord(t, in, 0, named("kept", func(p api.Process) bool { return p.PID == pid && p.State == api.StateRunning }))
	if after.Limits == nil || after.Limits.MemoryMax != 128<<20 || !slices.Equal(after.LimitCgroups, before.LimitCgroups) {
		t.Fatalf("adopted record %+v, want its limits and cgroups kept (%v)", after, before.LimitCgroups)
	}
	in.mustRun("stop", "kept")
	waitRecord(t, in, 0, named("kept", func(p api.Process) bool { return p.State.Final() }))
	deadline := time.Now().Add(wait)
	for _, dir := range before.LimitCgroups {
		for {
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the limits' cgroup %s is left after the server stopped", dir)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// A shared server's broker and upstream run within the limits its clients
// asked for, in one cgroup; clients asking other limits get a broker of
// their own.
func TestSharedServerLimits(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	limitsOrSkip(t, in)
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	dir := t.TempDir() // one directory: one server, but for the limits
	connect := func(limit string) *mcp.ClientSession {
		cmd := exec.Command(bin, "run", "--share", "--name", "fixture", "--memory-max", limit, "--", bin, "_fixture", "mcp")
		cmd.Dir, cmd.Env = dir, in.env
		cmd.Stderr = &prefixWriter{t: t, prefix: "client: "}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "limited", Version: "0.0.0"}, nil).
			Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { cs.Close() })
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		return cs
	}
	connect("256M")
	connect("256M")
	connect("512M")
	var brokers []api.Process
	for _, p := range in.mustProcesses(false) {
		if p.Broker {
			brokers = append(brokers, p)
		}
	}
	if len(brokers) != 2 {
		t.Fatalf("brokers %+v: want one per set of limits", brokers)
	}
	var got []uint64
	for _, br := range brokers {
		if br.Limits != nil {
			got = append(got, br.Limits.MemoryMax)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []uint64{256 << 20, 512 << 20}) {
		t.Errorf("the brokers' memory_max %v, want 256M and 512M", got)
	}
	// Limits too small to hold the broker as well are refused, saying so.
	if _, stderr, code := in.run("run", "--share", "--name", "fixture", "--pids-max", "10", "--", bin, "_fixture", "mcp"); code != 125 || !strings.Contains(stderr, "too small for a shared server") {
		t.Errorf("run --share --pids-max 10: code %d, %q; want it refused as too small for the broker too", code, stderr)
	}
	for _, br := range brokers {
		tree := markerHolders(t, br.ID)
		if len(tree) < 2 {
			t.Errorf("broker %s's tree %v: want the broker and its upstream", br.ID, tree)
		}
		for _, dir := range br.LimitCgroups {
			in := cgroupProcs([]string{dir})
			for _, pid := range tree {
				if !slices.Contains(in, pid) {
					t.Errorf("process %d of broker %s is outside its limits' cgroup %s", pid, br.ID, dir)
				}
			}
		}
	}
}

// The daemon thread that forks a server into its cgroup v1 limits does not
// count against them: pids_max 1 runs a server that forks nothing, and a
// server of three processes under pids_max 3 starts every time.
func TestPidsMaxCountsOnlyTheServer(t *testing.T) {
	t.Parallel()
	for _, inPlace := range []string{"auto", "off"} {
		t.Run("in place "+inPlace, func(t *testing.T) {
			in := newInstance(t)
			in.env = append(in.env, "SUPERVISOR_IN_PLACE="+inPlace)
			limitsOrSkip(t, in)
			if _, stderr, code := in.run("run", "--session", "lim", "--pids-max", "1", "--", "sh", "-c", "exec true"); code != 0 {
				t.Errorf("run --pids-max 1 -- exec true: exit %d, %s", code, stderr)
			}
			for i := range 8 {
				if _, stderr, code := in.run("run", "--session", "lim", "--pids-max", "3", "--", "sh", "-c", "sleep 0.1 & sleep 0.1 & wait"); code != 0 {
					t.Fatalf("run %d under pids_max 3: exit %d, %s", i, code, stderr)
				}
			}
		})
	}
}

// A shim in local mode (no daemon can be used) does not run a server the
// config file gives limits: only the daemon could enforce them.
func TestLocalModeRefusesConfigLimits(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	conf := filepath.Join(in.state, "config.toml")
	if err := os.WriteFile(conf, []byte("[servers.capped]\npids_max = 100\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in.env = append(in.env, "SUPERVISOR_STATE_DIR=/dev/null/x", "SUPERVISOR_SOCKET=/dev/null/x.sock", "SUPERVISOR_CONFIG="+conf)
	_, stderr, code := in.run("run", "--session", "local", "--name", "capped", "--", "sh", "-c", "echo ran")
	if code != 125 || !strings.Contains(stderr, "limits need the daemon") {
		t.Errorf("local mode with config limits: exit %d, %q; want 125 saying the limits need the daemon", code, stderr)
	}
	out, stderr, code := in.run("run", "--session", "local", "--name", "free", "--", "sh", "-c", "echo ran")
	if code != 0 || !strings.Contains(out, "ran") {
		t.Errorf("local mode without limits: exit %d, %q %q; want it run", code, out, stderr)
	}
	// A config that cannot be read (what keeps a daemon from starting)
	// but names a limit: the limits may be this server's.
	if err := os.WriteFile(conf, []byte("grace = \"bogus\"\npids_max = 40\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := in.run("run", "--session", "local", "--name", "free", "--", "sh", "-c", "echo ran"); code != 125 || !strings.Contains(stderr, "cannot be read") {
		t.Errorf("local mode with a broken config naming a limit: exit %d, %q; want 125 saying it cannot be read", code, stderr)
	}
	if err := os.WriteFile(conf, []byte("grace = \"bogus\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := in.run("run", "--session", "local", "--name", "free", "--", "sh", "-c", "echo ran"); code != 0 || !strings.Contains(out, "ran") {
		t.Errorf("local mode with a broken config naming no limit: exit %d, %q %q; want it run", code, out, stderr)
	}
}

// A limit the config sets for all servers applies to each, unless the
// server lifts it: none in its [servers.NAME], or on its command line.
func TestLimitNoneLiftsTheConfigs(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	conf := filepath.Join(in.state, "config.toml")
	if err := os.WriteFile(conf, []byte("pids_max = 40\n\n[servers.free]\npids_max = \"none\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	limitsOrSkip(t, in)
	// Sleeps that outlast the loop, however slow the machine forks: all 60
	// are alive at once, which a limit of 40 cannot allow.
	forks := []string{"--", "sh", "-c", `i=0; p=; while [ $i -lt 60 ]; do sleep 60 & p="$p $!"; i=$((i+1)); done; echo forked 60; kill $p`}
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{append([]string{"run", "--session", "lim", "--name", "bound"}, forks...), false},
		{append([]string{"run", "--session", "lim", "--name", "free"}, forks...), true},
		{append([]string{"run", "--session", "lim", "--name", "flagged", "--pids-max", "none"}, forks...), true},
	} {
		out, stderr, code := in.run(tc.args...)
		if ran := code == 0 && strings.Contains(out, "forked 60"); ran != tc.ok {
			t.Errorf("%v: exit %d, %q %q; want the 60 forks to succeed: %v", tc.args[4], code, out, stderr, tc.ok)
		}
	}
}

// A process that asked to be kept (SUPERVISOR_KEEP=1) leaves its server's
// limits with it: it outlives them, and they are removed.
func TestKeptProcessLeavesLimits(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	limitsOrSkip(t, in)
	k := in.startShim("--session", "keepl", "--name", "keeper", "--pids-max", "100", "--", bin, "_fixture", "daemonize", "--keep")
	_, kept := readReady2(t, k.stdout)
	ktok := mustToken(t, kept)
	t.Cleanup(func() { syscall.Kill(kept, syscall.SIGKILL) })
	rec := waitRecord(t, in, 0, named("keeper", func(p api.Process) bool { return len(p.LimitCgroups) > 0 || p.PID > 0 }))
	in.mustRun("session", "end", "keepl", "--grace", "200ms")
	if !alive(kept, ktok) {
		t.Fatalf("the kept process %d was stopped", kept)
	}
	if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(kept), "cgroup")); strings.Contains(string(b), rec.ID) {
		t.Errorf("the kept process is still in its server's cgroups:\n%s", b)
	}
	deadline := time.Now().Add(wait)
	for _, dir := range rec.LimitCgroups {
		for {
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the limits' cgroup %s is left", dir)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// named accepts the record of the server called name that ok accepts.
func named(name string, ok func(api.Process) bool) func(api.Process) bool {
	return func(p api.Process) bool { return p.Name == name && ok(p) }
}

// cgroupProcs lists the processes in cgroup directories.
func cgroupProcs(dirs []string) []int {
	var out []int
	for _, d := range dirs {
		pids, _ := cgroup.Procs(d)
		out = append(out, pids...)
	}
	return out
}

// A server that cannot start (its command does not exist) leaves neither
// its cgroup nor its limits' cgroups: the start's one rollback (start.go)
// removes what was made for it, whichever way it was to start.
func TestFailedStartLeavesNoCgroup(t *testing.T) {
	t.Parallel()
	for _, inPlace := range []string{"auto", "off"} {
		t.Run("in place "+inPlace, func(t *testing.T) {
			in := newInstance(t)
			in.env = append(in.env, "SUPERVISOR_IN_PLACE="+inPlace)
			limitsOrSkip(t, in)
			_, stderr, code := in.run("run", "--session", "fail", "--name", "missing", "--pids-max", "50", "--", "/nonexistent/server")
			if code != 127 {
				t.Fatalf("run of a missing command exited %d, want 127: %s", code, stderr)
			}
			rec := waitRecord(t, in, 0, named("missing", func(p api.Process) bool { return p.State.Final() }))
			if rec.Cgroup == "" && len(rec.LimitCgroups) == 0 {
				t.Fatalf("record %+v names no cgroup: nothing to check", rec)
			}
			for _, dir := range append([]string{rec.Cgroup}, rec.LimitCgroups...) {
				if dir == "" {
					continue
				}
				waitCond(t, func() error {
					if _, err := os.Stat(dir); !os.IsNotExist(err) {
						return fmt.Errorf("the cgroup %s of a server that never started is left (%v)", dir, err)
					}
					return nil
				})
			}
		})
	}
}
