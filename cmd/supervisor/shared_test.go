//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/spawn"
)

// freePort finds a port nothing listens on (the kernel's choice, closed
// again: a tiny race with the rest of the machine, retried by nothing).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (in *instance) ensure(t *testing.T, args ...string) (api.Ensured, string, int) {
	t.Helper()
	out, errOut, code := in.run(append([]string{"ensure", "--json"}, args...)...)
	var res api.Ensured
	if code == 0 {
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("ensure --json: %v: %s", err, out)
		}
	}
	return res, errOut, code
}

func TestEnsureStormStartsOneServer(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	port := freePort(t)
	ps := strconv.Itoa(port)
	const n = 100
	ids := make([]string, n)
	errs := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, errOut, code := in.ensure(t, "--session", "storm", "--port", ps, "--", bin, "_fixture", "listen", ps)
			if code != 0 {
				errs[i] = fmt.Sprintf("exit %d: %s", code, errOut)
			}
			ids[i] = res.ID
		}(i)
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != "" {
			t.Fatalf("call %d: %s", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("call %d got %s, call 0 got %s: want one server", i, ids[i], ids[0])
		}
	}
	recs := in.mustProcesses(true)
	if len(recs) != 1 || recs[0].Restarts != 0 {
		t.Fatalf("got %d records (%+v), want exactly one server started once", len(recs), recs)
	}
}

func TestSharedServerLingersPastItsLastSession(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	ps := strconv.Itoa(freePort(t))
	a, _, code := in.ensure(t, "--session", "a", "--port", ps, "--linger", "1s", "--", bin, "_fixture", "listen", ps)
	if code != 0 {
		t.Fatalf("ensure a: exit %d", code)
	}
	b, _, _ := in.ensure(t, "--session", "b", "--port", ps, "--linger", "1s", "--", bin, "_fixture", "listen", ps)
	if a.ID != b.ID || b.Started {
		t.Fatalf("session b got %+v, want a's server %s", b, a.ID)
	}
	tok := mustToken(t, a.PID)
	in.mustRun("session", "end", "a")
	// Session b still holds it: it outlives a's end and what would have
	// been a's linger (1 s), had a's end let it go. That something does
	// not happen can only be seen by waiting past when it would have.
	waitFor(t, 1500*time.Millisecond)
	if !alive(a.PID, tok) {
		t.Fatal("the shared server stopped while session b still held it")
	}
	in.mustRun("session", "end", "b")
	waitGonePID(t, a.PID, tok)
	// It lingered (1 s) before it went. The daemon's own log says when,
	// so a slow machine can only make the gap longer, never fail it.
	var ended, stopped time.Time
	for _, e := range in.eventsJSON() {
		switch {
		case e.Kind == "session.end" && e.Session == "b":
			ended = e.Time
		case e.Kind == "shared.stop" && e.Process == a.ID:
			stopped = e.Time
		}
	}
	if ended.IsZero() || stopped.IsZero() {
		t.Fatalf("events: session b's end at %v, the shared stop at %v; want both", ended, stopped)
	}
	if gap := stopped.Sub(ended); gap < 900*time.Millisecond {
		t.Fatalf("the shared server stopped %v after its last session ended, before its 1s linger was over", gap)
	}
	if p := findByPID(t, in, a.PID); p.State != api.StateExited {
		t.Fatalf("record %s, want exited", p.State)
	}
}

func TestSharedServerIsRestarted(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	ps := strconv.Itoa(freePort(t))
	res, _, code := in.ensure(t, "--session", "r", "--port", ps, "--interval", "200ms", "--", bin, "_fixture", "listen", ps)
	if code != 0 {
		t.Fatalf("ensure: exit %d", code)
	}
	killByPIDNow(t, res.PID)
	p := waitRecord(t, in, 0, func(p api.Process) bool {
		return p.ID == res.ID && p.Restarts == 1 && p.Health == "healthy" && p.PID != res.PID
	})
	if p.State != api.StateRunning {
		t.Fatalf("restarted server is %s", p.State)
	}
	out := in.mustRun("ps")
	if !strings.Contains(out, "healthy") || !strings.Contains(out, " 1 ") {
		t.Fatalf("ps does not show the health and the restart:\n%s", out)
	}
}

func TestCircuitBreaker(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	// Long enough that the fourth call and the restart below surely
	// come before the breaker's retry, on a loaded machine too: the
	// wait for it costs a parallel test nothing.
	in.env = append(in.env, "SUPERVISOR_BREAKER_COOLDOWN=8s")
	failing := []string{"run", "--name", "crashy", "--", "/bin/sh", "-c", "exit 3"}
	for i := 1; i <= 3; i++ {
		if _, errOut, code := in.run(failing...); code != 3 {
			t.Fatalf("call %d: exit %d, want the server's 3: %s", i, code, errOut)
		}
	}
	in.waitBreakerOpen(t)
	_, errOut, code := in.run(failing...)
	if code != 125 || !strings.HasPrefix(errOut, "supervisor: circuit open for crashy: 3 failures in a row, last: exited with code 3") ||
		!strings.Contains(errOut, "; retry in ") || !strings.Contains(errOut, "`supervisor breaker reset crashy` closes it now") {
		t.Fatalf("fourth call: exit %d, stderr %q; want 125 and the circuit-open message", code, errOut)
	}
	// The state survives a daemon restart.
	in.mustRun("daemon", "stop")
	in.mustRun("daemon")
	var bs []spawn.Breaker
	json.Unmarshal([]byte(in.mustRun("breaker", "list", "--json")), &bs)
	if len(bs) != 1 || bs[0].State != spawn.BreakerOpen || bs[0].Name != "crashy" {
		t.Fatalf("after a restart: breakers %+v, want crashy open", bs)
	}
	// After the cooldown one trial goes through (and fails again).
	waitFor(t, time.Until(bs[0].RetryAt)+50*time.Millisecond)
	if _, errOut, code := in.run(failing...); code != 3 {
		t.Fatalf("trial after the cooldown: exit %d, want 3: %s", code, errOut)
	}
	if _, _, code := in.run(failing...); code != 125 {
		t.Fatalf("after a failed trial: exit %d, want 125 (open again)", code)
	}
	in.mustRun("breaker", "reset", "crashy")
	if _, errOut, code := in.run(failing...); code != 3 {
		t.Fatalf("after reset: exit %d, want 3: %s", code, errOut)
	}
}

// waitFor lets a cooldown pass: the breaker's clock is the thing under
// test, so this is the one place a test waits on time itself.
func waitFor(t *testing.T, d time.Duration) {
	if d > 0 {
		time.Sleep(d)
	}
}

func TestEnsureNamesAForeignListener(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ps := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_, errOut, code := in.ensure(t, "--port", ps, "--", bin, "_fixture", "listen", ps)
	if code == 0 || !strings.Contains(errOut, "held by pid "+strconv.Itoa(os.Getpid())) ||
		!strings.Contains(errOut, filepath.Base(os.Args[0])) {
		t.Fatalf("exit %d, stderr %q; want the foreign holder's pid and command", code, errOut)
	}
	if ps := in.mustProcesses(true); len(ps) != 0 {
		t.Fatalf("started %d processes, want none", len(ps))
	}
}

func TestEnsureWaitsForHTTPHealth(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	ps := strconv.Itoa(freePort(t))
	res, errOut, code := in.ensure(t, "--session", "h", "--port", ps, "--health", "http://127.0.0.1:"+ps+"/health",
		"--", bin, "_fixture", "http", ps, "3")
	if code != 0 {
		t.Fatalf("ensure: exit %d: %s", code, errOut)
	}
	resp, err := http.Get("http://127.0.0.1:" + ps + "/count")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n < 4 {
		t.Fatalf("ensure returned after %d health requests; the first 3 answered 500, so want 4 or more", n)
	}
	if res.Health != "healthy" {
		t.Fatalf("health %q, want healthy", res.Health)
	}
}

// TestLogsFollowAndRotate: a shared server's log is rotated by its log
// writer at the size limit into NAME.log.1 to .3; `logs -f` follows it
// across the renames without losing a line.
func TestLogsFollowAndRotate(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_LOG_MAX_MB=1")
	ps := strconv.Itoa(freePort(t))
	const burst = 2500000 // bytes of numbered lines per connection: more than 2 rotations
	if _, errOut, code := in.ensure(t, "--session", "l", "--port", ps, "--name", "ticker", "--health", "none",
		"--", bin, "_fixture", "listen", ps, "--spew", "6500000", "--tick", "--numbered", strconv.Itoa(burst)); code != 0 {
		t.Fatalf("ensure: exit %d: %s", code, errOut)
	}
	logPath := filepath.Join(in.state, "logs", "ticker-"+ps+".log")
	waitCond(t, func() error { // listening, after the spew
		b, _ := os.ReadFile(logPath)
		if !strings.Contains(string(b), "tick ") {
			return fmt.Errorf("no tick in %s yet", logPath)
		}
		return nil
	})
	cmd := in.command("logs", "ticker", "-f", "--lines", "1")
	cmd.Stderr = &prefixWriter{t: t, prefix: "logs: "}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() { cmd.Process.Kill(); <-done }()
	r := bufio.NewReader(stdout)
	last := -1
	readTicks := func(n int) {
		t.Helper()
		for seen := 0; seen < n; {
			line, err := readLine(r, wait)
			if err != nil {
				t.Fatalf("logs -f: %v (last tick %d)", err, last)
			}
			var k int
			if _, err := fmt.Sscanf(line, "tick %d", &k); err != nil {
				continue
			}
			if k <= last {
				t.Fatalf("tick %d after %d: not following", k, last)
			}
			last = k
			seen++
		}
	}
	readTicks(5)

	// 6.5 MB went out at once into a log rotated at 1 MB with 3 backups:
	// the current file and 3 backups of at most 1 MB each.
	checkFiles := func() error {
		files, _ := filepath.Glob(filepath.Join(in.state, "logs", "ticker*"))
		for _, f := range files {
			st, err := os.Stat(f)
			if err != nil {
				return err
			}
			if st.Size() > 1<<20 {
				return fmt.Errorf("%s is %d bytes, over the 1 MB rotation size", f, st.Size())
			}
		}
		want := []string{logPath, logPath + ".1", logPath + ".2", logPath + ".3"}
		if strings.Join(files, " ") != strings.Join(want, " ") {
			return fmt.Errorf("log files %v, want %v (the current one and 3 backups)", files, want)
		}
		return nil
	}
	waitCond(t, checkFiles)

	// 2.5 MB of numbered lines while logs -f follows: the log is renamed
	// under the follower twice or more, and it still prints every line.
	c, err := net.Dial("tcp", "127.0.0.1:"+ps)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	seen, next := 0, -1
	for {
		line, err := readLine(r, wait)
		if err != nil {
			t.Fatalf("logs -f: %v after %d numbered lines", err, seen)
		}
		if strings.HasPrefix(line, "numbered done") {
			break
		}
		var k int
		if _, err := fmt.Sscanf(line, "line %d", &k); err != nil || len(line) != 99 {
			continue // a tick, or a line a tick was written into
		}
		if next >= 0 && k < next {
			t.Fatalf("line %d after %d: printed twice", k, next-1)
		}
		seen++
		next = k + 1
	}
	// Ticks go through the same pipe and may land inside a numbered line
	// (writes this big are not atomic): a few may be broken, none lost.
	if want := burst / 100; seen < want-50 {
		t.Fatalf("logs -f printed %d numbered lines of %d", seen, want)
	}
	waitCond(t, checkFiles)
	readTicks(5)
}

// waitCond waits until cond returns nil, failing with its last error.
func waitCond(t *testing.T, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", wait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitLogGrows waits until the file at path is longer than it is now (a
// file not made yet is empty: the server's log hub makes it once the
// server has started, which a loaded machine can put after its start).
func waitLogGrows(t *testing.T, path string) {
	t.Helper()
	var was int64
	if st, err := os.Stat(path); err == nil {
		was = st.Size()
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	waitCond(t, func() error {
		now, err := os.Stat(path)
		if err != nil {
			return err
		}
		if now.Size() <= was {
			return fmt.Errorf("%s stays at %d bytes: the server no longer writes it", path, now.Size())
		}
		return nil
	})
}

// TestSharedServerOutputSurvivesDaemonRestart: a shared server writing
// output all the time survives a `daemon restart` and a SIGKILLed daemon
// (it writes its log file, not a pipe the dead daemon read), is re-adopted
// by the next daemon, and its log keeps growing, also while no daemon runs.
func TestSharedServerOutputSurvivesDaemonRestart(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	ps := strconv.Itoa(freePort(t))
	res, errOut, code := in.ensure(t, "--session", "o", "--port", ps, "--name", "tickr",
		"--", bin, "_fixture", "listen", ps, "--tick")
	if code != 0 {
		t.Fatalf("ensure: exit %d: %s", code, errOut)
	}
	tok := mustToken(t, res.PID)
	defer func() { // a failure must not leave it behind
		if alive(res.PID, tok) {
			unix.Kill(res.PID, unix.SIGKILL)
		}
	}()
	logPath := filepath.Join(in.state, "logs", "tickr-"+ps+".log")
	waitLogGrows(t, logPath)
	readopted := func(how string) {
		t.Helper()
		if !alive(res.PID, tok) {
			t.Fatalf("after %s: the server (pid %d) is gone", how, res.PID)
		}
		st := in.status(t)
		if r := st.Recovery; r == nil || r.Adopted != 1 || r.Lost != 0 {
			t.Fatalf("after %s: recovery %+v, want 1 adopted and 0 lost", how, r)
		}
		p := in.waitAdopted(t, []int{res.PID})[res.PID]
		if p.ID != res.ID || p.Token != tok || !p.Shared {
			t.Fatalf("after %s: record %+v, want the shared server %s", how, p, res.ID)
		}
		if out := in.mustRun("ps"); !strings.Contains(out, strconv.Itoa(res.PID)) || !strings.Contains(out, "running") {
			t.Fatalf("after %s: ps does not show pid %d running:\n%s", how, res.PID, out)
		}
		waitLogGrows(t, logPath)
	}

	out := in.mustRun("daemon", "restart")
	if !strings.Contains(out, "1 adopted, 0 lost") {
		t.Errorf("daemon restart said:\n%s", out)
	}
	readopted("daemon restart")

	in.killDaemon(t)
	waitLogGrows(t, logPath) // no daemon runs: it keeps writing all the same
	if !alive(res.PID, tok) {
		t.Fatal("the server died with the daemon")
	}
	in.mustRun("daemon")
	readopted("a SIGKILLed daemon")

	// ensure still hands out the same server, then the daemon stops it.
	b, errOut, code := in.ensure(t, "--session", "o2", "--port", ps, "--name", "tickr",
		"--", bin, "_fixture", "listen", ps, "--tick")
	if code != 0 || b.ID != res.ID || b.PID != res.PID {
		t.Fatalf("ensure after the restarts: exit %d %+v %s; want %+v", code, b, errOut, res)
	}
	in.mustRun("daemon", "stop")
	waitGonePID(t, res.PID, tok)
}

// TestEnsureAdoptsAHealthyForeignListener: with --adopt-foreign a listener
// supervisor did not start is taken over when its health check passes, and
// is then stopped like its own once its last session has ended.
func TestEnsureAdoptsAHealthyForeignListener(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	ps := strconv.Itoa(freePort(t))
	foreign := exec.Command(bin, "_fixture", "listen", ps)
	stdout, _ := foreign.StdoutPipe()
	if err := foreign.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { foreign.Wait(); close(reaped) }()
	defer func() { foreign.Process.Kill(); <-reaped }()
	if _, err := readLine(bufio.NewReader(stdout), wait); err != nil {
		t.Fatal(err)
	}
	res, errOut, code := in.ensure(t, "--session", "adopt", "--port", ps, "--adopt-foreign", "--linger", "1ms",
		"--", bin, "_fixture", "listen", ps)
	if code != 0 || res.PID != foreign.Process.Pid {
		t.Fatalf("exit %d, got %+v, stderr %q; want the foreign pid %d adopted", code, res, errOut, foreign.Process.Pid)
	}
	in.mustRun("session", "end", "adopt")
	select {
	case <-reaped:
	case <-time.After(wait):
		t.Fatal("the adopted server was not stopped after its last session and the linger")
	}
}

// TestSessionEndedMidFlightTakesNoReference: a session that ends while its
// ensure is still starting the server must not keep it alive for ever.
func TestSessionEndedMidFlightTakesNoReference(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	ps := strconv.Itoa(freePort(t))
	cmd := in.command("ensure", "--json", "--session", "mid", "--port", ps, "--linger", "200ms",
		"--", "/bin/sh", "-c", "sleep 1; exec \"$0\" _fixture listen "+ps, bin)
	out := make(chan []byte, 1)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); out <- stdout.Bytes() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-out })
	// The ensure is in flight once its server runs: it sleeps 1 s before
	// it listens, and ensure waits for that.
	waitCond(t, func() error {
		ps, err := in.processes(true) // fails until ensure has started the daemon
		if err != nil {
			return err
		}
		for _, p := range ps {
			if !p.State.Final() && strings.Contains(strings.Join(p.Argv, " "), "sleep 1; exec") {
				return nil
			}
		}
		return errors.New("the ensure's server is not running yet")
	})
	in.mustRun("session", "end", "mid")
	b := <-out
	out <- b // for the cleanup
	var res api.Ensured
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("ensure --json: %v: %q", err, b)
	}
	if res.PID == 0 {
		t.Fatal("ensure did not report a server")
	}
	// It lingers out with no session, instead of running for ever.
	p := waitRecord(t, in, res.PID, func(p api.Process) bool { return p.State.Final() })
	if p.Health != "stopped" {
		t.Fatalf("health %q, want stopped", p.Health)
	}
}

// TestHalfOpenTrialThatExitsCleanlyCloses: a trial that exits 0 at once is
// no failure; the breaker must not stay half-open for ever.
func TestHalfOpenTrialThatExitsCleanlyCloses(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	// Long enough that the fourth call surely comes before the retry.
	in.env = append(in.env, "SUPERVISOR_BREAKER_COOLDOWN=5s")
	marker := filepath.Join(t.TempDir(), "fail")
	os.WriteFile(marker, nil, 0o600)
	argv := []string{"run", "--name", "flaky", "--", "/bin/sh", "-c", `test -e "$0" && exit 3; exit 0`, marker}
	for i := 0; i < 3; i++ {
		in.run(argv...)
	}
	in.waitBreakerOpen(t)
	if _, _, code := in.run(argv...); code != 125 {
		t.Fatalf("exit %d, want 125 (open)", code)
	}
	os.Remove(marker) // fixed: it exits 0 from now on
	var bs []spawn.Breaker
	json.Unmarshal([]byte(in.mustRun("breaker", "list", "--json")), &bs)
	if len(bs) != 1 {
		t.Fatalf("breakers %+v, want the one open", bs)
	}
	waitFor(t, time.Until(bs[0].RetryAt)+50*time.Millisecond)
	if _, errOut, code := in.run(argv...); code != 0 {
		t.Fatalf("the trial after the cooldown: exit %d: %s", code, errOut)
	}
	// At once: in place the host sees the trial's exit before the daemon
	// reads it from the pidfd, and a run that comes meanwhile waits for
	// the trial's record rather than be refused for a trial that is over
	// (a CI run under load was refused here).
	for i := 0; i < 2; i++ {
		if _, errOut, code := in.run(argv...); code != 0 {
			t.Fatalf("call %d after the trial: exit %d: %s", i, code, errOut)
		}
	}
	var after []spawn.Breaker
	json.Unmarshal([]byte(in.mustRun("breaker", "list", "--json")), &after)
	for _, b := range after {
		if b.State != spawn.BreakerClosed {
			t.Errorf("breaker %s after a trial that exited 0 and two clean runs, want closed", b.State)
		}
	}
}

// TestRestartNeverFightsAStranger: when a stranger takes the port while the
// shared server is down, the supervisor gives up on it instead of looping.
func TestRestartNeverFightsAStranger(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	port := freePort(t)
	ps := strconv.Itoa(port)
	res, errOut, code := in.ensure(t, "--session", "s", "--port", ps, "--interval", "100ms", "--", bin, "_fixture", "listen", ps)
	if code != 0 {
		t.Fatalf("ensure: %d %s", code, errOut)
	}
	killByPIDNow(t, res.PID)
	var l net.Listener
	var err error
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if l, err = net.Listen("tcp", "127.0.0.1:"+ps); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the stranger could not bind: %v", err)
	}
	defer l.Close()
	p := waitRecord(t, in, 0, func(p api.Process) bool { return p.ID == res.ID && p.State.Final() })
	if !strings.Contains(p.Error, "held by pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("record %s/%s error %q, want the stranger named", p.State, p.Health, p.Error)
	}
}

// TestSharedServerSurvivesDaemonCrash: a daemon SIGKILLed under a shared
// server re-adopts it; ensure after the restart gets the same server.
func TestSharedServerSurvivesDaemonCrash(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	ps := strconv.Itoa(freePort(t))
	a, _, code := in.ensure(t, "--session", "c", "--port", ps, "--", bin, "_fixture", "listen", ps)
	if code != 0 {
		t.Fatal("ensure failed")
	}
	killByPIDNow(t, in.daemonPID())
	in.mustRun("daemon")
	b, errOut, code := in.ensure(t, "--session", "c2", "--port", ps, "--", bin, "_fixture", "listen", ps)
	if code != 0 || b.ID != a.ID || b.PID != a.PID {
		t.Fatalf("after the crash: exit %d %+v %s; want the same server %+v", code, b, errOut, a)
	}
}
