//go:build linux

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/keeper"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

func ppidOf(t *testing.T, pid int) int {
	t.Helper()
	info, err := proc.Stat(pid)
	if err != nil {
		t.Fatalf("stat %d: %v", pid, err)
	}
	return info.PPID
}

// An auto-started daemon runs under a keeper that is nobody's child (not
// the starter's, so never a host's descendant), restarts it at once after
// a SIGKILL, and ends with it when it stops on purpose.
func TestKeeperRestartsAKilledDaemon(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.mustRun("daemon")
	d1 := in.daemonPID()
	keepers := in.keepers()
	if len(keepers) != 1 {
		t.Fatalf("keepers %v, want one", keepers)
	}
	k := keepers[0]
	ktok := mustToken(t, k)
	if p := ppidOf(t, d1); p != k {
		t.Fatalf("daemon %d is the child of %d, want its keeper %d", d1, p, k)
	}
	if p := ppidOf(t, k); p == os.Getpid() {
		t.Fatalf("keeper %d is the child of the process that started it", k)
	}
	if got, want := in.status(t).Restarter, fmt.Sprintf("keeper pid %d ", k); !strings.HasPrefix(got, want) {
		t.Errorf("status says the restarter is %q, want %q...", got, want)
	}
	in.killDaemon(t)
	d2 := in.waitNewDaemon(t, d1)
	if p := ppidOf(t, d2); p != k {
		t.Fatalf("restarted daemon %d is the child of %d, want the keeper %d", d2, p, k)
	}
	log, _ := os.ReadFile(filepath.Join(in.state, keeper.LogFile))
	if want := fmt.Sprintf("keeper: daemon pid %d killed by signal 9", d1); !strings.Contains(string(log), want) {
		t.Errorf("the log does not say %q:\n%s", want, log)
	}
	// SIGTERM is a stop on purpose: the daemon ends its sessions and
	// exits 0, and the keeper goes with it.
	dtok := mustToken(t, d2)
	unix.Kill(d2, unix.SIGTERM)
	waitGonePID(t, d2, dtok)
	waitGonePID(t, k, ktok)
	if pid := in.daemonPID(); pid != 0 {
		t.Fatalf("daemon %d answers after a stop on purpose", pid)
	}
}

// A daemon started by hand in the foreground has no keeper, and says so.
func TestForegroundDaemonSaysNothingRestartsIt(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.startDaemonWith(t, bin)
	if got := in.status(t).Restarter; !strings.HasPrefix(got, "none: ") {
		t.Errorf("status says the restarter is %q, want none", got)
	}
}

// A daemon that refuses to start is reported at once with its status,
// and its keeper does not start it again.
func TestKeeperReportsARefusedStart(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(slices.Clone(in.env), "SUPERVISOR_METRICS_ADDR=127.0.0.1:notaport")
	_, errOut, code := in.run("daemon")
	if code == 0 || !strings.Contains(errOut, "daemon exited during start: exit status 1") {
		t.Fatalf("exit %d, stderr %q; want the refused start reported", code, errOut)
	}
	waitCond(t, func() error {
		if k := in.keepers(); len(k) > 0 {
			return fmt.Errorf("keepers %v still running after a refused start", k)
		}
		return nil
	})
	log, _ := os.ReadFile(filepath.Join(in.state, keeper.LogFile))
	if !strings.Contains(string(log), "not restarting: the daemon refused to start") {
		t.Errorf("the log does not say why the keeper gave up:\n%s", log)
	}
}

// Issue 27: a host starts three servers (one leaves a setsid grandchild,
// one ignores SIGTERM, neither of those reads stdin); the daemon is SIGKILLed at a
// random moment during or after the start; then the host is SIGKILLed.
// With nothing else running, the keeper's next daemon ends the session:
// nothing the host started is left. Ten rounds, in place by default (on
// the daemon's path under SUPERVISOR_IN_PLACE=off).
func TestDaemonCrashThenHostDeathLeavesNothing(t *testing.T) {
	t.Parallel()
	const rounds = 10
	var took []time.Duration
	link := filepath.Join(t.TempDir(), "fakehost")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < rounds; round++ {
		in := newInstance(t)
		tag := "CHAOS_ROUND=" + in.state
		in.env = append(slices.Clone(in.env), tag)
		in.mustRun("daemon")
		// Not a shell: the session's host is the first ancestor that is
		// not a launcher or shell.
		host := exec.Command(link, "_fixture", "host-multi", bin,
			"run", "--", bin, "_fixture", "sleep", "::",
			"run", "--grace", "500ms", "--", bin, "_fixture", "ignore-term", "::",
			"run", "--", bin, "_fixture", "escape")
		host.Env = in.env
		stdin, err := host.StdinPipe() // held open until the end
		if err != nil {
			t.Fatal(err)
		}
		if err := host.Start(); err != nil {
			t.Fatal(err)
		}
		hostDone := make(chan struct{})
		go func() { host.Wait(); close(hostDone) }()
		killAt := time.Duration(rand.IntN(400)) * time.Millisecond
		time.Sleep(killAt)
		if d := in.daemonPID(); d > 0 {
			unix.Kill(d, unix.SIGKILL)
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		tagged := taggedProcesses(tag)
		host.Process.Kill()
		<-hostDone
		start := time.Now()
		deadline := start.Add(wait)
		for {
			left := taggedProcesses(tag)
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				var what []string
				for _, pid := range left {
					argv, _ := proc.Cmdline(pid)
					info, _ := proc.Stat(pid)
					what = append(what, fmt.Sprintf("%d (parent %d, state %c, waits in %q) %q",
						pid, info.PPID, info.State, proc.WaitChannel(pid), argv))
				}
				log, _ := os.ReadFile(filepath.Join(in.state, "supervisor.log"))
				evOut, _, _ := in.run("events")
				t.Logf("events:\n%s\nlog:\n%s", evOut, log)
				for _, pid := range left {
					if tok, err := proc.TokenOf(pid); err == nil {
						killByToken(pid, tok)
					}
				}
				stdin.Close()
				t.Fatalf("round %d (daemon killed at %v): still running %v after the host's death: %s", round, killAt, wait, strings.Join(what, ", "))
			}
			time.Sleep(10 * time.Millisecond)
		}
		took = append(took, time.Since(start))
		stdin.Close()
		t.Logf("round %d: daemon killed %v after the host started, %d processes of the host's, all gone %v after its death",
			round, killAt, len(tagged), took[len(took)-1].Round(time.Millisecond))
		in.cleanup()
	}
	slices.Sort(took)
	t.Logf("host death to nothing left: median %v, max %v over %d rounds", took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), rounds)
}

// taggedProcesses lists the live processes whose environment holds tag:
// what a test's host started, however far it escaped.
func taggedProcesses(tag string) []int {
	infos, _ := proc.Scan()
	var out []int
	for _, info := range infos {
		if info.State == 'Z' {
			continue
		}
		env, _ := proc.Environ(info.PID)
		if slices.Contains(env, tag) {
			out = append(out, info.PID)
		}
	}
	return out
}

// descendants lists the live descendants of pid, as /proc shows them now.
func descendants(pid int) []int {
	infos, _ := proc.Scan()
	kids := map[int][]int{}
	for _, info := range infos {
		if info.State != 'Z' {
			kids[info.PPID] = append(kids[info.PPID], info.PID)
		}
	}
	var out []int
	for queue := kids[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, kids[queue[0]]...)
	}
	return out
}

// Issue 28: a daemon a shim auto-starts is never a descendant of any host,
// on every path: a host that SIGTERMs every descendant of its servers when
// it exits (opencode does) reaches neither the daemon nor another host's
// server beside it.
func TestHostKillingItsTreeSparesTheDaemon(t *testing.T) {
	t.Parallel()
	for _, inPlace := range []string{"auto", "off"} {
		t.Run("in-place="+inPlace, func(t *testing.T) {
			in := newInstance(t)
			in.env = append(slices.Clone(in.env), "SUPERVISOR_IN_PLACE="+inPlace)
			a := in.startHost(t, 1, "--", bin, "_fixture", "sleep") // its shim starts the daemon
			daemon := in.daemonPID()
			if daemon == 0 {
				t.Fatal("no daemon after the first host's start")
			}
			dtok := mustToken(t, daemon)
			b := in.startHost(t, 1, "--", bin, "_fixture", "sleep")
			tree := descendants(a.cmd.Process.Pid)
			if slices.Contains(tree, daemon) {
				t.Fatalf("the daemon %d is a descendant of host %d: %v", daemon, a.cmd.Process.Pid, tree)
			}
			for _, k := range in.keepers() {
				if slices.Contains(tree, k) {
					t.Fatalf("the keeper %d is a descendant of host %d: %v", k, a.cmd.Process.Pid, tree)
				}
			}
			for _, pid := range tree {
				unix.Kill(pid, unix.SIGTERM)
			}
			a.cmd.Process.Kill()
			waitGonePID(t, a.servers[0], a.tokens[0])
			if proc.Verify(daemon, dtok) != nil || in.daemonPID() != daemon {
				t.Fatalf("the daemon %d did not survive host %d killing its tree (now %d)", daemon, a.cmd.Process.Pid, in.daemonPID())
			}
			if !alive(b.servers[0], b.tokens[0]) {
				t.Fatalf("the other host's server %d was stopped", b.servers[0])
			}
		})
	}
}

// The keeper and the daemon watch each other: a keeper SIGKILLed is
// replaced by one that watches the daemon from outside. That one restarts
// a daemon that dies without stopping, and ends with one that stops on
// purpose (it reads daemon.stopped, as it sees no exit status).
func TestKeeperReplacedWhenKilled(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	replaced := func(old int) int {
		t.Helper()
		var k int
		waitCond(t, func() error {
			ks := in.keepers()
			if len(ks) != 1 || ks[0] == old {
				return fmt.Errorf("keepers %v, want one other than %d", ks, old)
			}
			k = ks[0]
			if got := in.status(t).Restarter; !strings.Contains(got, fmt.Sprintf("keeper pid %d, watching", k)) {
				return fmt.Errorf("status says the restarter is %q", got)
			}
			return nil
		})
		return k
	}
	// A stop on purpose ends the watching keeper too.
	in.mustRun("daemon")
	k1 := in.keepers()[0]
	killByPIDNow(t, k1)
	k2 := replaced(k1)
	k2tok := mustToken(t, k2)
	in.mustRun("daemon", "stop")
	waitGonePID(t, k2, k2tok)
	if pid := in.daemonPID(); pid != 0 {
		t.Fatalf("daemon %d answers after a stop on purpose under a watching keeper", pid)
	}
	// A crash is recovered by it.
	in.mustRun("daemon")
	k3 := in.keepers()[0]
	killByPIDNow(t, k3)
	k4 := replaced(k3)
	d1 := in.killDaemon(t)
	d2 := in.waitNewDaemon(t, d1)
	if p := ppidOf(t, d2); p != k4 {
		t.Fatalf("the daemon started after the crash is the child of %d, want the watching keeper %d", p, k4)
	}
}

// A daemon SIGKILLed while it starts is started again by its keeper, and
// the start it was part of succeeds: the launcher is told only of a start
// that is given up on (review of issue 27's keeper).
func TestKilledDuringStartIsNoFailedStart(t *testing.T) {
	t.Parallel()
	exercised := 0
	for round := 0; round < 5; round++ {
		in := newInstance(t)
		killed := make(chan bool, 1)
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					killed <- false
					return
				default:
				}
				for _, d := range daemonsOf(in.state) {
					// The daemon itself, not the `supervisor daemon`
					// launching it.
					if argv, _ := proc.Cmdline(d); len(argv) > 2 && argv[2] == "--foreground" {
						killed <- in.daemonPID() == 0 // not answering yet: mid-start
						unix.Kill(d, unix.SIGKILL)
						return
					}
				}
				time.Sleep(time.Millisecond)
			}
		}()
		out, errOut, code := in.run("daemon")
		close(stop)
		if <-killed {
			exercised++
		}
		if code != 0 {
			log, _ := os.ReadFile(filepath.Join(in.state, keeper.LogFile))
			t.Fatalf("round %d: supervisor daemon exited %d: %s%s\nkeeper log:\n%s", round, code, out, errOut, log)
		}
		waitCond(t, func() error {
			if in.daemonPID() == 0 {
				return fmt.Errorf("no daemon answers after the keeper's restart")
			}
			return nil
		})
		in.cleanup()
	}
	if exercised == 0 {
		t.Skip("no round killed the daemon before it answered (this machine started it too fast to catch)")
	}
	t.Logf("%d of 5 rounds killed the daemon during its start", exercised)
}

// `daemon stop` with no daemon but a keeper about to start one stops the
// keeper: a stop means stopped.
func TestDaemonStopStopsAPausingKeeper(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.mustRun("daemon")
	// Three quick crashes use the free restarts; the fourth pauses 250
	// ms, the fifth 500 ms, ... : catch a keeper without a daemon.
	var k int
	for i := 0; ; i++ {
		if ks := in.keepers(); len(ks) == 1 {
			k = ks[0]
		}
		if in.daemonPID() == 0 && k > 0 && len(foregroundDaemons(in.state)) == 0 {
			break
		}
		if i > 20 {
			t.Skip("never caught the keeper between two daemons")
		}
		if d := in.daemonPID(); d > 0 {
			in.killDaemon(t)
		}
	}
	ktok, err := proc.TokenOf(k)
	if err != nil {
		t.Skip("the keeper ended meanwhile")
	}
	out, errOut, code := in.run("daemon", "stop")
	switch {
	case code == 0 && strings.Contains(out, "stopped its keeper"):
	case code == 0 && strings.Contains(out, "daemon (pid"):
		// The keeper's restart won the race (a free one is immediate): a
		// daemon stopped on purpose ends its keeper all the same, which
		// is what is checked below.
		t.Logf("the keeper had started the next daemon already: %q", out)
	default:
		t.Fatalf("daemon stop between two daemons: exit %d, %q %q; want the keeper stopped", code, out, errOut)
	}
	waitGonePID(t, k, ktok)
	time.Sleep(time.Second) // past the pause it was in: nothing may start now
	if pid := in.daemonPID(); pid != 0 || len(foregroundDaemons(in.state)) > 0 {
		t.Fatalf("a daemon runs after daemon stop stopped its keeper")
	}
}

// foregroundDaemons are the running `daemon --foreground` of state.
func foregroundDaemons(state string) []int {
	var out []int
	for _, d := range daemonsOf(state) {
		if argv, _ := proc.Cmdline(d); len(argv) > 2 && argv[2] == "--foreground" {
			out = append(out, d)
		}
	}
	return out
}

// An instance whose state directory was removed is gone: its keeper does
// not start a daemon again when the daemon dies (it would make the
// directory again and run on, unwatched by anyone: the leak a test's
// cleanup racing a restart left behind).
func TestKeeperLetsARemovedInstanceGo(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.mustRun("daemon")
	d := in.daemonPID()
	keepers := in.keepers()
	if len(keepers) != 1 {
		t.Fatalf("keepers %v, want one", keepers)
	}
	k := keepers[0]
	ktok, dtok := mustToken(t, k), mustToken(t, d)
	if err := os.RemoveAll(in.state); err != nil {
		t.Fatal(err)
	}
	killByPIDNow(t, d)
	waitGonePID(t, d, dtok)
	waitGonePID(t, k, ktok)
	if _, err := os.Stat(in.state); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the state directory %s is back (%v): a daemon was started again in it", in.state, err)
	}
}
