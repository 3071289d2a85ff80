//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/store"
)

// oldVersion is the version of faultBin: an "older release" for the
// upgrade tests.
const oldVersion = "0.0.9-old"

var (
	faultOnce sync.Once
	faultPath string
	faultErr  error
)

// faultBin is the supervisor built with -tags faultinject (its daemon
// SIGKILLs itself at the crash point SUPERVISOR_FAULT names) and an older
// version number. Release builds have neither.
func faultBin(t *testing.T) string {
	t.Helper()
	faultOnce.Do(func() {
		faultPath = filepath.Join(filepath.Dir(bin), "supervisor-fault")
		build := exec.Command("go", "build", "-tags", "faultinject",
			"-ldflags", "-X github.com/seed-86a41135/supervisor/api.Version="+oldVersion, "-o", faultPath, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0") // as bin is
		out, err := build.CombinedOutput()
		if err != nil {
			faultErr = fmt.Errorf("build the fault-injection binary: %v\n%s", err, out)
		}
	})
	if faultErr != nil {
		t.Fatal(faultErr)
	}
	return faultPath
}

var (
	faultLeanOnce sync.Once
	faultLeanPath string
	faultLeanErr  error
)

// faultLean is the lean entry of the fault-injection binary's version,
// with that binary beside it as its `supervisor`: through it
// (SUPERVISOR_TEST_LEAN=1) a fault test's runs take the lean fast path,
// which a lean entry of another version than the daemon hands over.
func faultLean(t *testing.T) string {
	t.Helper()
	fault := faultBin(t)
	faultLeanOnce.Do(func() {
		dir := filepath.Join(filepath.Dir(bin), "fault")
		if faultLeanErr = os.MkdirAll(dir, 0o755); faultLeanErr != nil {
			return
		}
		if faultLeanErr = os.Symlink(fault, filepath.Join(dir, "supervisor")); faultLeanErr != nil {
			return
		}
		faultLeanPath = filepath.Join(dir, "supervisor-run")
		build := exec.Command("go", "build",
			"-ldflags", "-X github.com/seed-86a41135/supervisor/api.Version="+oldVersion, "-o", faultLeanPath, "../supervisor-run")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			faultLeanErr = fmt.Errorf("build the fault-injection lean entry: %v\n%s", err, out)
		}
	})
	if faultLeanErr != nil {
		t.Fatal(faultLeanErr)
	}
	return faultLeanPath
}

// startDaemonWith runs `exe daemon --foreground` for the instance with
// extra environment and waits until it answers. The returned channel is
// closed when it exits.
func (in *instance) startDaemonWith(t *testing.T, exe string, env ...string) (int, chan struct{}) {
	t.Helper()
	if viaLean && exe == faultBin(t) {
		in.lean = faultLean(t) // of the daemon's version, or it hands every run over
	}
	return in.startDaemonCmd(t, exec.Command(exe, "daemon", "--foreground"), env...)
}

// startDaemonCmd is startDaemonWith for a daemon started by cmd (a wrapper
// that execs it, e.g. to set a resource limit first).
func (in *instance) startDaemonCmd(t *testing.T, cmd *exec.Cmd, env ...string) (int, chan struct{}) {
	t.Helper()
	cmd.Env = append(append([]string{}, in.env...), env...)
	cmd.Stderr = &prefixWriter{t: t, prefix: "daemon: "}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(wait)
	for in.daemonPID() != cmd.Process.Pid {
		if time.Now().After(deadline) {
			t.Fatalf("daemon %d did not answer within %v", cmd.Process.Pid, wait)
		}
		select {
		case <-done:
			t.Fatalf("daemon %d exited during start", cmd.Process.Pid)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return cmd.Process.Pid, done
}

// killDaemon SIGKILLs the instance's daemon and waits until it is gone.
func (in *instance) killDaemon(t *testing.T) int {
	t.Helper()
	pid := in.daemonPID()
	if pid == 0 {
		t.Fatal("no daemon to kill")
	}
	tok := mustToken(t, pid)
	unix.Kill(pid, unix.SIGKILL)
	waitGonePID(t, pid, tok)
	return pid
}

// waitNewDaemon waits until a daemon other than old answers.
func (in *instance) waitNewDaemon(t *testing.T, old int) int {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if pid := in.daemonPID(); pid != 0 && pid != old {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new daemon within %v", wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (in *instance) status(t *testing.T) api.Status {
	t.Helper()
	var st api.Status
	if err := json.Unmarshal([]byte(in.mustRun("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// livePIDs maps the running processes' PIDs to their records.
func livePIDs(ps []api.Process) map[int]api.Process {
	out := map[int]api.Process{}
	for _, p := range ps {
		if p.State == api.StateRunning {
			out[p.PID] = p
		}
	}
	return out
}

// waitAdopted waits until every pid is a running record again.
func (in *instance) waitAdopted(t *testing.T, pids []int) map[int]api.Process {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		got := livePIDs(in.mustProcesses(false))
		missing := 0
		for _, pid := range pids {
			if _, ok := got[pid]; !ok {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %d of %v are not running records: %v", wait, missing, pids, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLog waits until the daemon log holds want n times.
func (in *instance) waitLog(t *testing.T, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		b, _ := os.ReadFile(filepath.Join(in.state, "supervisor.log"))
		if strings.Count(string(b), want) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon log has %q %d times, want %d", want, strings.Count(string(b), want), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDaemonCrashServersKeepServing: the daemon is SIGKILLed under two
// live sessions. The servers keep answering their hosts while no daemon
// runs; its keeper (or the shims, after 2 s away) starts a new daemon and
// the shims re-attach; it re-adopts the same PIDs, and stops the server
// whose shim died while it was down; a host killed afterwards is still
// cleaned up.
func TestDaemonCrashServersKeepServing(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	// Shims that stay (the daemon spawns the servers): theirs is the
	// re-attach under test. (In their place: TestInPlaceStatusKnownAfterDaemonCrash.)
	in.env = append(in.env, "SUPERVISOR_IN_PLACE=off")
	a := in.startHost(t, 2, "--", bin, "_fixture", "echo", "--ready")
	b := in.startHost(t, 1, "--", bin, "_fixture", "echo", "--ready")
	// A forked server can say it is ready before the daemon has recorded
	// it running: wait for the records.
	before := in.waitAdopted(t, append(slices.Clone(a.servers), b.servers...))
	if len(before) != 3 {
		t.Fatalf("want 3 running servers, got %v", before)
	}

	// The daemon's keeper starts a killed daemon again at once: it is held
	// (SIGSTOP) until the shim below is dead, so that shim dies while no
	// daemon runs. (Unheld, a busy CI run saw the new daemon recover
	// before the test had killed the shim.)
	keepers := in.keepers()
	if len(keepers) == 0 {
		t.Fatal("no keeper runs beside the daemon")
	}
	for _, k := range keepers {
		unix.Kill(k, unix.SIGSTOP)
	}
	resume := func() {
		for _, k := range keepers {
			unix.Kill(k, unix.SIGCONT)
		}
	}
	defer resume()
	old := in.killDaemon(t)
	if got := a.request(t, 1, "while-down"); got != "while-down" {
		t.Fatalf("server answered %q while the daemon was down", got)
	}
	// A shim that dies while no daemon runs: its server is stopped on
	// recovery (the record names the shim by PID and token).
	orphaned := before[a.servers[2-1]]
	shimTok := mustToken(t, orphaned.ShimPID)
	unix.Kill(orphaned.ShimPID, unix.SIGKILL)
	waitGonePID(t, orphaned.ShimPID, shimTok)
	if d := in.daemonPID(); d != 0 {
		t.Fatalf("daemon %d ran before the shim's death was seen: the shims wait 2 s before they start one", d)
	}
	resume()
	// Nobody starts a daemon by hand: the keeper does, or the shims after
	// 2 s away.
	in.waitNewDaemon(t, old)
	waitGonePID(t, a.servers[1], a.tokens[1])
	after := in.waitAdopted(t, []int{a.servers[0], b.servers[0]})
	for _, pid := range []int{a.servers[0], b.servers[0]} {
		if after[pid].ID != before[pid].ID {
			t.Errorf("pid %d: id %q after the restart, %q before", pid, after[pid].ID, before[pid].ID)
		}
	}
	in.waitLog(t, "shim re-attached", 2)
	st := in.status(t)
	if st.Recovery == nil || st.Recovery.Adopted != 3 || st.Recovery.Stopped != 1 || st.Recovery.Lost != 0 {
		t.Errorf("recovery summary %+v, want 3 adopted (1 of them stopped: its shim died), 0 lost", st.Recovery)
	}
	if got := a.request(t, 0, "after"); got != "after" {
		t.Fatalf("server answered %q after the restart", got)
	}

	// A host killed after the restart is cleaned up by the new daemon.
	b.cmd.Process.Kill()
	waitGonePID(t, b.servers[0], b.tokens[0])
	if !alive(a.servers[0], a.tokens[0]) {
		t.Fatalf("server %d of the live host was stopped", a.servers[0])
	}
	rec := waitRecord(t, in, b.servers[0], func(p api.Process) bool { return p.State.Final() })
	if rec.State != api.StateExited {
		t.Errorf("adopted server of the dead host ended %s, want exited", rec.State)
	}
	a.cmd.Process.Kill()
	waitGonePID(t, a.servers[0], a.tokens[0])
}

// TestDaemonRestartUpgrades: `daemon restart` replaces an older daemon
// under a live session: no server restarts, requests keep being answered,
// the shims re-attach, status shows the mismatch before and not after, and
// a newer shim says once that the daemon is older.
func TestDaemonRestartUpgrades(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_IN_PLACE=off") // shims that stay and re-attach
	old := faultBin(t)
	oldPID, _ := in.startDaemonWith(t, old)
	h := in.startHostArgs(t, 2, []string{"_fixture", "host", "2", "--", old, "run", "--", bin, "_fixture", "echo", "--ready"})

	out := in.mustRun("status")
	if !strings.Contains(out, oldVersion) || !strings.Contains(out, "supervisor daemon restart") {
		t.Errorf("status does not show the version mismatch and its fix:\n%s", out)
	}
	// A newer shim says so once.
	cmd := in.command("run", "--", bin, "_fixture", "exit", "0")
	errOut, _ := cmd.CombinedOutput()
	if n := strings.Count(string(errOut), "the running daemon is version "+oldVersion); n != 1 {
		t.Errorf("newer shim's stderr says the daemon is older %d times, want once:\n%s", n, errOut)
	}

	before := in.waitAdopted(t, h.servers)
	out = in.mustRun("daemon", "restart")
	if !strings.Contains(out, "daemon restarted") || !strings.Contains(out, "2 adopted") {
		t.Errorf("daemon restart said:\n%s", out)
	}
	newPID := in.waitNewDaemon(t, oldPID)
	after := in.waitAdopted(t, h.servers)
	for pid, p := range before {
		if after[pid].ID != p.ID || after[pid].Restarts != p.Restarts {
			t.Errorf("pid %d: %+v after the restart, %+v before", pid, after[pid], p)
		}
	}
	for i := range h.servers {
		if got := h.request(t, i, "still-there"); got != "still-there" {
			t.Fatalf("server %d answered %q after the upgrade", i, got)
		}
	}
	in.waitLog(t, "shim re-attached", 2)
	st := in.status(t)
	if st.PID != newPID || st.Version != api.Version {
		t.Errorf("status after restart: pid %d version %s, want %d %s", st.PID, st.Version, newPID, api.Version)
	}
	if out := in.mustRun("status"); strings.Contains(out, "daemon restart") {
		t.Errorf("status still shows a mismatch:\n%s", out)
	}
	h.cmd.Process.Kill()
	for i, pid := range h.servers {
		waitGonePID(t, pid, h.tokens[i])
	}
}

// TestCorruptRegistryIsRebuiltFromMarkers: a registry.db that bbolt cannot
// read is moved aside; the live servers are found by their markers and
// adopted, and their host's death still ends them.
func TestCorruptRegistryIsRebuiltFromMarkers(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"truncated", "random", "explicit-session"} {
		t.Run(kind, func(t *testing.T) {
			in := newInstance(t)
			var runArgs []string
			if kind == "explicit-session" {
				// No host in the id: the SUPERVISOR_HOST marker names it.
				runArgs = []string{"--session", "explicit"}
			}
			h := in.startHost(t, 2, append(runArgs, "--", bin, "_fixture", "echo", "--ready")...)
			before := in.waitAdopted(t, h.servers)
			in.mustRun("daemon", "stop", "--keep-processes")
			// The shims start a daemon themselves 2 s after losing theirs:
			// hold the lock so none opens the store until it is corrupt.
			lock, err := os.OpenFile(filepath.Join(in.state, "daemon.lock"), os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(in.state, "registry.db")
			switch kind {
			case "truncated":
				if err := os.Truncate(db, 100); err != nil {
					t.Fatal(err)
				}
			default:
				junk := make([]byte, 64<<10)
				for i := range junk {
					junk[i] = byte(i*7 + i>>8)
				}
				if err := os.WriteFile(db, junk, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			lock.Close()
			in.mustRun("daemon")
			aside, _ := filepath.Glob(db + ".corrupt-*")
			if len(aside) != 1 {
				t.Errorf("corrupt registry moved aside as %v, want one registry.db.corrupt-*", aside)
			}
			after := in.waitAdopted(t, h.servers)
			for pid, p := range before {
				if after[pid].ID != p.ID || after[pid].Session != p.Session {
					t.Errorf("pid %d rebuilt as %s/%s, was %s/%s", pid, after[pid].Session, after[pid].ID, p.Session, p.ID)
				}
			}
			if st := in.status(t); st.Recovery == nil || st.Recovery.Adopted != 2 {
				t.Errorf("recovery %+v, want 2 adopted", st.Recovery)
			}
			if got := h.request(t, 0, "rebuilt"); got != "rebuilt" {
				t.Fatalf("server answered %q", got)
			}
			h.cmd.Process.Kill()
			for i, pid := range h.servers {
				waitGonePID(t, pid, h.tokens[i])
			}
		})
	}
}

// TestPIDReuseIsClosedAsLost: a record whose PID now belongs to another
// process (another creation token) is closed as lost; the stranger is
// neither adopted nor signalled.
func TestPIDReuseIsClosedAsLost(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	stranger := exec.Command(bin, "_fixture", "sleep")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { stranger.Wait(); close(done) }()
	t.Cleanup(func() { stranger.Process.Kill(); <-done })
	spid := stranger.Process.Pid
	stok := mustToken(t, spid)
	recorded := stok
	recorded.StartTicks-- // the process the record meant started earlier
	recorded.PidfsInode = 0

	// A second stranger: the member of a group whose leader (and number)
	// a record names, the leader long gone.
	grp := exec.Command("sh", "-c", bin+" _fixture sleep >/dev/null 2>&1 & echo $!")
	grp.SysProcAttr = &unix.SysProcAttr{Setsid: true}
	out, err := grp.Output()
	if err != nil {
		t.Fatal(err)
	}
	member, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	mtok := mustToken(t, member)
	// Not our child (setsid, re-parented): killed by its token even if the
	// test fails first, and left alone if someone else holds the PID.
	t.Cleanup(func() { killByToken(member, mtok) })
	leader := grp.Process.Pid

	self := mustToken(t, os.Getpid())
	s, err := store.Open(filepath.Join(in.state, "registry.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.PutSession(registry.Session{ID: "reuse", HostPID: os.Getpid(), HostToken: self, State: registry.SessionActive, StartedAt: now}))
	must(s.PutProcess(registry.Process{ID: "p-reused", Session: "reuse", Name: "gone", Argv: []string{"gone"},
		PID: spid, PGID: spid, Token: recorded, State: registry.StateRunning, StartedAt: now, Health: "none"}))
	must(s.PutProcess(registry.Process{ID: "p-group", Session: "reuse", Name: "gone2", Argv: []string{"gone2"},
		PID: leader, PGID: leader, Token: recorded, State: registry.StateRunning, StartedAt: now, Health: "none"}))
	must(s.Close())

	in.mustRun("daemon")
	ps := in.mustProcesses(true)
	var rec api.Process
	for _, p := range ps {
		if p.ID == "p-reused" {
			rec = p
		}
	}
	if rec.State != api.StateLost || !strings.Contains(rec.Error, "belongs to another process") {
		t.Errorf("record %+v, want lost because the pid belongs to another process", rec)
	}
	if st := in.status(t); st.Recovery == nil || st.Recovery.Lost != 2 || st.Recovery.Adopted != 0 {
		t.Errorf("recovery %+v, want 2 lost, 0 adopted", st.Recovery)
	}
	// The leftovers sweep has run by the time the session can be ended.
	in.mustRun("session", "end", "reuse")
	if !alive(spid, stok) {
		t.Fatal("the stranger on the recorded pid was signalled")
	}
	if !alive(member, mtok) {
		t.Fatal("a stranger in the recorded group's number was signalled")
	}
}

// TestFaultInjection SIGKILLs the daemon at each crash point; after a
// restart no process is orphaned, no record is left starting or stopping,
// live servers are adopted and port locks are free.
func TestFaultInjection(t *testing.T) {
	t.Parallel()
	fbin := faultBin(t)
	noLimbo := func(t *testing.T, in *instance) {
		t.Helper()
		for _, p := range in.mustProcesses(true) {
			if p.State == api.StateStarting || p.State == api.StateStopping {
				t.Errorf("record %s left %s after recovery", p.ID, p.State)
			}
		}
	}
	waitNoHolders := func(t *testing.T, id string) {
		t.Helper()
		deadline := time.Now().Add(wait)
		for len(markerHolders(t, id)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("processes with marker %s still alive: %v", id, markerHolders(t, id))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFinal := func(t *testing.T, in *instance, id string) api.Process {
		t.Helper()
		deadline := time.Now().Add(wait)
		for {
			for _, p := range in.mustProcesses(true) {
				if p.ID == id && p.State.Final() {
					return p
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("record %s not final within %v", id, wait)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	onlyID := func(t *testing.T, in *instance) string {
		t.Helper()
		ps := in.mustProcesses(true)
		if len(ps) != 1 {
			t.Fatalf("want one record, got %d", len(ps))
		}
		return ps[0].ID
	}

	// run.intent comes before the fork or the exec in place: both paths.
	// run.forked is the daemon's own fork.
	for _, tc := range []struct{ point, inPlace string }{{"run.intent", "off"}, {"run.intent", "auto"}, {"run.forked", "off"}} {
		point := tc.point
		t.Run(point+"/in-place="+tc.inPlace, func(t *testing.T) {
			if tc.inPlace == "auto" {
				skipWithoutInPlace(t)
			}
			in := newInstance(t)
			in.env = append(in.env, "SUPERVISOR_IN_PLACE="+tc.inPlace)
			_, died := in.startDaemonWith(t, fbin, "SUPERVISOR_FAULT="+point)
			s := in.startShim("--session", "fault", "--", bin, "_fixture", "echo", "--ready")
			<-died
			in.mustRun("daemon")
			id := onlyID(t, in)
			waitNoHolders(t, id)
			// (The shim's exit is seen once the server, which holds its
			// stdout, is gone.)
			if code := s.exitCode(t); code != 125 {
				t.Errorf("shim exited %d when the daemon died before the start, want 125", code)
			}
			p := waitFinal(t, in, id)
			if point == "run.intent" && p.State != api.StateLost {
				t.Errorf("record crashed before the fork is %s, want lost", p.State)
			}
			if point == "run.forked" && (p.PID == 0 || p.State != api.StateExited) {
				t.Errorf("record crashed after the fork: pid %d %s, want found by its marker and stopped", p.PID, p.State)
			}
			noLimbo(t, in)
		})
	}

	// Exec'd in its shim's place: a daemon that dies once it ordered the
	// exec loses nothing. The host's child is the server; the next daemon
	// adopts it and learns its real status.
	t.Run("run.exec", func(t *testing.T) {
		skipWithoutInPlace(t)
		in := newInstance(t)
		_, died := in.startDaemonWith(t, fbin, "SUPERVISOR_FAULT=run.exec")
		s := in.startShim("--session", "fault", "--", bin, "_fixture", "echo", "--ready")
		<-died
		pid := s.readyPID(t)
		if pid != s.cmd.Process.Pid {
			t.Fatalf("server %d, want the shim's own pid %d", pid, s.cmd.Process.Pid)
		}
		in.mustRun("daemon")
		if st := in.status(t); st.Recovery == nil || st.Recovery.Adopted != 1 {
			t.Errorf("recovery %+v, want the server adopted", st.Recovery)
		}
		s.stdin.Close() // the echo server exits 0 on EOF
		if code := s.exitCode(t); code != 0 {
			t.Errorf("host saw exit %d, want 0", code)
		}
		p := waitFinal(t, in, onlyID(t, in))
		if p.State != api.StateExited || p.ExitCode == nil || *p.ExitCode != 0 {
			t.Errorf("record %s, exit code %v, error %q; want exited 0", p.State, p.ExitCode, p.Error)
		}
		// The daemon died after the exec went out and before the running
		// record was committed: the next one finds the server by its
		// markers and knows it for the shim itself.
		if !p.InPlace || p.ShimPID != 0 || p.PID != pid {
			t.Errorf("record in place %v, shim %d, pid %d; want in place, no shim, pid %d", p.InPlace, p.ShimPID, p.PID, pid)
		}
		noLimbo(t, in)
	})

	t.Run("cascade", func(t *testing.T) {
		in := newInstance(t)
		_, died := in.startDaemonWith(t, fbin, "SUPERVISOR_FAULT=cascade.signalled")
		s := in.startShim("--session", "fault", "--grace", "300ms", "--", bin, "_fixture", "ignore-term")
		pid := s.readyPID(t)
		tok := mustToken(t, pid)
		id := onlyID(t, in)
		in.run("stop", id) // the daemon dies after SIGTERM went out
		<-died
		if !alive(pid, tok) {
			t.Fatal("the SIGTERM-ignoring server died with the daemon")
		}
		in.mustRun("daemon") // resumes the stop it finds recorded
		waitGonePID(t, pid, tok)
		if p := waitFinal(t, in, id); p.State != api.StateExited {
			t.Errorf("record %s, want exited", p.State)
		}
		noLimbo(t, in)
		if code := s.exitCode(t); code == 0 {
			t.Errorf("shim of a server stopped after the restart exited 0")
		}
	})

	t.Run("ensure-storm", func(t *testing.T) {
		in := newInstance(t)
		_, died := in.startDaemonWith(t, fbin, "SUPERVISOR_FAULT=ensure.forked")
		port := freePort(t)
		ps := strconv.Itoa(port)
		var wg sync.WaitGroup
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each fails or starts a daemon; the first one crashes it.
				c := in.command("ensure", "--session", "storm", "--port", ps, "--timeout", "20s", "--", bin, "_fixture", "listen", ps)
				c.Run()
			}()
		}
		<-died
		wg.Wait()
		if pid := in.daemonPID(); pid == 0 {
			in.mustRun("daemon")
		}
		noLimbo(t, in)
		// Exactly one server ran; it is adopted and serves the next ensure.
		var live []api.Process
		for _, p := range in.mustProcesses(false) {
			if p.Shared && p.Port == port {
				live = append(live, p)
			}
		}
		if len(live) != 1 {
			t.Fatalf("want one live shared server on port %d, got %+v", port, live)
		}
		res, errOut, code := in.ensure(t, "--session", "after", "--port", ps, "--", bin, "_fixture", "listen", ps)
		if code != 0 || res.PID != live[0].PID {
			t.Fatalf("ensure after recovery: exit %d, pid %d (want the adopted %d): %s", code, res.PID, live[0].PID, errOut)
		}
		lock := filepath.Join(in.state, "ports", ps+".lock")
		if f, err := os.OpenFile(lock, os.O_RDWR, 0); err == nil {
			if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
				t.Errorf("port lock %s still held after recovery: %v", lock, err)
			}
			f.Close()
		}
	})
}

// TestLocalModeCleansUpOnHostDeath: when no daemon can be started, the
// shim supervises its server itself and says so once; a SIGKILLed host
// still takes every server along, the SIGTERM-ignoring one and an escaped
// setsid grandchild included.
func TestLocalModeCleansUpOnHostDeath(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	// A state directory under a regular file: no daemon can ever start.
	in.env = append(in.env, "SUPERVISOR_STATE_DIR=/dev/null/x", "SUPERVISOR_SOCKET=/dev/null/x.sock")
	h := in.startHostMulti(t,
		[]string{"--", bin, "_fixture", "sleep"},
		[]string{"--grace", "500ms", "--", bin, "_fixture", "ignore-term"},
		[]string{"--", bin, "_fixture", "escape"})
	if len(h.extra) != 1 {
		t.Fatalf("want the escaped grandchild's pid, got %v", h.extra)
	}
	gc := h.extra[0]
	gtok := mustToken(t, gc)
	for i, pid := range h.servers {
		if !alive(pid, h.tokens[i]) {
			t.Fatalf("server %d not running", pid)
		}
	}
	h.cmd.Process.Kill()
	for i, pid := range h.servers {
		waitGonePID(t, pid, h.tokens[i])
	}
	waitGonePID(t, gc, gtok)
}

// TestLocalModeInAnotherMountNamespace: a shim in another mount namespace
// than the daemon (a sandboxed host) must not hand it a command line that
// means something else there: it runs its server itself, and says why.
func TestLocalModeInAnotherMountNamespace(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root for unshare --mount (CI runs as root)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare(1) not installed")
	}
	in := newInstance(t)
	in.mustRun("daemon")
	cmd := exec.Command(unshare, "--mount", "--", bin, "run", "--session", "sandbox", "--", bin, "_fixture", "exit", "4")
	cmd.Env = in.env
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 4 {
		t.Fatalf("exit %d (%v), want the server's 4:\n%s", code, err, out)
	}
	if n := strings.Count(string(out), "another PID or mount namespace"); n != 1 {
		t.Errorf("the shim said why it runs locally %d times, want once:\n%s", n, out)
	}
	if ps := in.mustProcesses(true); len(ps) != 0 {
		t.Errorf("the daemon recorded %d processes for a sandboxed shim", len(ps))
	}
}

// TestLocalModeShimKilled: hosts end a server by killing what they
// started, here a shim in local mode; its server must not outlive it.
func TestLocalModeShimKilled(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_STATE_DIR=/dev/null/x", "SUPERVISOR_SOCKET=/dev/null/x.sock")
	s := in.startShim("--session", "local", "--", bin, "_fixture", "ignore-term")
	pid := s.readyPID(t)
	tok := mustToken(t, pid)
	s.cmd.Process.Kill()
	waitGonePID(t, pid, tok)
}

// TestShimStopsServerWhenHostDiesWithoutDaemon: the daemon is gone and
// cannot come back (its state directory became unusable); the host dies;
// the re-attaching shim stops the server itself.
func TestShimStopsServerWhenHostDiesWithoutDaemon(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_IN_PLACE=off") // a shim that stays to do it
	h := in.startHost(t, 1, "--grace", "300ms", "--", bin, "_fixture", "ignore-term")
	// The server says ready before the daemon has told the shim it
	// started: a daemon killed in between leaves a shim that never knew
	// its server (a new daemon recovers that one; none can start here).
	// The process.start event follows that message.
	waitCond(t, func() error {
		for _, ev := range in.eventsJSON("--lines", "0") {
			if ev.Kind == "process.start" && strings.HasPrefix(ev.Detail, fmt.Sprintf("pid %d ", h.servers[0])) {
				return nil
			}
		}
		return fmt.Errorf("no process.start event for pid %d", h.servers[0])
	})
	// No new daemon can start: its lock is held here. The shim tries to
	// start one as soon as it loses its daemon, and one may take the lock
	// first: that one goes too, until the lock is this test's (a blocking
	// flock here waited for ever on such a daemon).
	lock, err := os.OpenFile(filepath.Join(in.state, "daemon.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	for deadline := time.Now().Add(wait); ; {
		// Its keeper goes first: it would start the daemon again at once.
		for _, k := range in.keepers() {
			killByPIDNow(t, k)
		}
		if in.daemonPID() != 0 {
			in.killDaemon(t)
		}
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
			break
		} else if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			t.Fatalf("take the daemon's lock: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.cmd.Process.Kill()
	waitGonePID(t, h.servers[0], h.tokens[0])
}

// TestPsPagesALongTable: a table larger than one frame (4 MiB) is listed
// whole: the daemon sends it in pages.
func TestPsPagesALongTable(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	s, err := store.Open(filepath.Join(in.state, "registry.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	long := strings.Repeat("a", 8<<10) // 1,000 records × 8 KiB of argv > MaxFrame
	const n = 1000
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			errs <- s.PutProcess(registry.Process{ID: fmt.Sprintf("p-%04d", i), Session: "old", Name: "x",
				Argv: []string{"x", long}, State: registry.StateExited, StartedAt: now, ExitedAt: &now, Health: "none"})
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	in.mustRun("daemon")
	ps := in.mustProcesses(true)
	if len(ps) != n {
		t.Fatalf("ps --all listed %d records, want %d", len(ps), n)
	}
	if ps[n-1].Argv[1] != long {
		t.Errorf("the last record's argv came back altered")
	}
}
