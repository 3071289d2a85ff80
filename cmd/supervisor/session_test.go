//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// fakeHost is an agent host stand-in: the binary under another name (a
// "supervisor" ancestor would count as a launcher, not a host) running the
// host fixture, which starts n shims on their own pipes.
type fakeHost struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	servers []int
	tokens  []proc.Token
	extra   []int // other pids the servers announced (grandchildren)
	done    chan struct{}
}

func (in *instance) startHost(t *testing.T, n int, runArgs ...string) *fakeHost {
	t.Helper()
	return in.startHostArgs(t, n, append([]string{"_fixture", "host", strconv.Itoa(n), "--", bin, "run"}, runArgs...))
}

// startHostMulti starts one `supervisor run ARGS` per element of runs.
func (in *instance) startHostMulti(t *testing.T, runs ...[]string) *fakeHost {
	t.Helper()
	args := []string{"_fixture", "host-multi", bin}
	for i, r := range runs {
		if i > 0 {
			args = append(args, "::")
		}
		args = append(args, append([]string{"run"}, r...)...)
	}
	return in.startHostArgs(t, len(runs), args)
}

func (in *instance) startHostArgs(t *testing.T, n int, args []string) *fakeHost {
	t.Helper()
	link := filepath.Join(t.TempDir(), "fakehost")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, args...)
	cmd.Env = in.env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &prefixWriter{t: t, prefix: "host: "}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		<-h.done
	})
	r := bufio.NewReader(stdout)
	for i := 0; i < n; i++ {
		line, err := readLine(r, wait)
		if err != nil {
			t.Fatalf("host: waiting for child %d: %v", i, err)
		}
		f := strings.Fields(line) // child I ready PID [PID...]
		if len(f) < 4 || f[2] != "ready" {
			t.Fatalf("host: got %q, want \"child I ready PID\"", line)
		}
		pid, _ := strconv.Atoi(f[3])
		for _, x := range f[4:] { // descendants the fixture announces
			if xp, err := strconv.Atoi(x); err == nil {
				h.extra = append(h.extra, xp)
				cleanupByPID(t, xp)
			}
		}
		h.servers = append(h.servers, pid)
		h.tokens = append(h.tokens, mustToken(t, pid))
		cleanupByPID(t, pid)
	}
	if line, err := readLine(r, wait); err != nil || line != "all-ready" {
		t.Fatalf("host: got %q, %v; want all-ready", line, err)
	}
	h.in, h.out = stdin, r
	return h
}

// request sends text to server i through the host's pipes and returns the
// line the server answers.
func (h *fakeHost) request(t *testing.T, i int, text string) string {
	t.Helper()
	if _, err := fmt.Fprintf(h.in, "%d %s\n", i, text); err != nil {
		t.Fatalf("host: send request: %v", err)
	}
	line, err := readLine(h.out, wait)
	if err != nil {
		t.Fatalf("host: waiting for the reply of server %d: %v", i, err)
	}
	want := fmt.Sprintf("reply %d ", i)
	if !strings.HasPrefix(line, want) {
		t.Fatalf("host: got %q, want %q...", line, want)
	}
	return strings.TrimPrefix(line, want)
}

func TestHostDeathStopsOnlyItsSession(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	// One server exits on SIGTERM, one ignores it (needs SIGKILL after the
	// grace), one exits on stdin EOF.
	a := in.startHostMulti(t,
		[]string{"--", bin, "_fixture", "sleep"},
		[]string{"--grace", "1s", "--", bin, "_fixture", "ignore-term"},
		[]string{"--", bin, "_fixture", "echo", "--ready"})
	b := in.startHost(t, 3, "--", bin, "_fixture", "sleep")

	a.cmd.Process.Kill() // SIGKILL: no chance to clean up
	for i, pid := range a.servers {
		waitGonePID(t, pid, a.tokens[i])
	}
	for i, pid := range b.servers {
		if !alive(pid, b.tokens[i]) {
			t.Fatalf("server %d of the other host was stopped", pid)
		}
	}
	// Each ended the way its kind does.
	for i, want := range []string{"SIGTERM", "SIGKILL", ""} {
		if p := findByPID(t, in, a.servers[i]); p.Signal != want {
			t.Errorf("server %d ended with signal %q, want %q", i, p.Signal, want)
		}
	}
	// The session of host A is recorded as ended, B's is active.
	var sessions []api.SessionInfo
	out := in.mustRun("sessions", "--all", "--json")
	if err := json.Unmarshal([]byte(out), &sessions); err != nil {
		t.Fatalf("sessions --json: %v: %s", err, out)
	}
	states := map[int]string{}
	for _, s := range sessions {
		states[s.HostPID] = string(s.State)
	}
	if got := states[a.cmd.Process.Pid]; got != "ended" && got != "ending" {
		t.Errorf("session of the dead host is %q, want ended", got)
	}
	if got := states[b.cmd.Process.Pid]; got != "active" {
		t.Errorf("session of the live host is %q, want active", got)
	}
}

func TestConcurrentShimsStartOneDaemon(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	const n = 20
	shims := make([]*shimProc, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	pids := map[int]bool{}
	for i := range shims {
		shims[i] = in.startShim("--", bin, "_fixture", "echo", "--ready")
	}
	for _, s := range shims {
		wg.Add(1)
		go func(s *shimProc) {
			defer wg.Done()
			line, err := readLine(s.stdout, wait)
			if err != nil {
				t.Errorf("shim %d: %v", s.cmd.Process.Pid, err)
				return
			}
			var pid int
			fmt.Sscanf(line, "ready %d", &pid)
			mu.Lock()
			pids[pid] = true
			mu.Unlock()
		}(s)
	}
	wg.Wait()
	if len(pids) != n {
		t.Fatalf("got %d distinct servers, want %d", len(pids), n)
	}
	if d := daemonsOf(in.state); len(d) != 1 {
		t.Fatalf("got %d daemons %v, want exactly 1", len(d), d)
	}
	running := 0
	for _, p := range in.mustProcesses(false) {
		if pids[p.PID] && p.State == "running" {
			running++
		}
	}
	if running != n {
		t.Fatalf("ps shows %d of the %d servers running", running, n)
	}
	for _, s := range shims {
		s.stdin.Close()
	}
	for _, s := range shims {
		if code := s.exitCode(t); code != 0 {
			t.Errorf("shim exit %d, want 0", code)
		}
	}
}

func TestEndSessionAndStopByName(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	s1 := in.startShim("--session", "work-1", "--name", "alpha", "--", bin, "_fixture", "sleep")
	s2 := in.startShim("--session", "work-1", "--name", "beta", "--", bin, "_fixture", "ignore-term")
	p1, p2 := s1.readyPID(t), s2.readyPID(t)

	out := in.mustRun("stop", "alpha", "--grace", "2s")
	if !strings.Contains(out, "exited on SIGTERM") {
		t.Fatalf("stop alpha printed %q, want \"exited on SIGTERM\"", out)
	}
	if ok, got := s1.endedBy(t, syscall.SIGTERM); !ok {
		t.Fatalf("shim of alpha: %s, want exit 143 or terminated by SIGTERM", got)
	}
	out = in.mustRun("session", "end", "work-1", "--grace", "200ms", "--json")
	var outcomes []struct {
		PID    int    `json:"pid"`
		Result string `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &outcomes); err != nil {
		t.Fatalf("session end --json: %v: %s", err, out)
	}
	if len(outcomes) != 1 || outcomes[0].PID != p2 || outcomes[0].Result != "killed" {
		t.Fatalf("got outcomes %+v, want beta (pid %d) killed", outcomes, p2)
	}
	if ok, got := s2.endedBy(t, syscall.SIGKILL); !ok {
		t.Fatalf("shim of beta: %s, want exit 137 or killed by SIGKILL", got)
	}
	_, errOut, code := in.run("stop", "alpha")
	if code == 0 || !strings.Contains(errOut, "supervisor: ") || !strings.Contains(errOut, "alpha") {
		t.Fatalf("stopping a gone name: exit %d, stderr %q; want a supervisor: error naming it", code, errOut)
	}
	_ = p1
}

// TestDaemonCrashReadoptsServers: servers survive a SIGKILLed daemon (no
// pdeathsig), a new daemon re-adopts them from the registry, and their
// host's death still stops them.
func TestDaemonCrashReadoptsServers(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	h := in.startHost(t, 2, "--", bin, "_fixture", "sleep")
	for _, pid := range h.servers {
		if p := findByPIDState(t, in, pid, "running"); p.PID != pid {
			t.Fatalf("no running record for %d", pid)
		}
	}
	dpid := in.daemonPID()
	killByPIDNow(t, dpid)
	for i, pid := range h.servers {
		if !alive(pid, h.tokens[i]) {
			t.Fatalf("server %d died with the daemon", pid)
		}
	}
	in.mustRun("daemon")
	for _, pid := range h.servers {
		findByPIDState(t, in, pid, "running")
	}
	h.cmd.Process.Kill()
	for i, pid := range h.servers {
		waitGonePID(t, pid, h.tokens[i])
	}
	for _, pid := range h.servers {
		if p := findByPID(t, in, pid); p.State != "exited" {
			t.Errorf("re-adopted server %d ended %s, want exited", pid, p.State)
		}
	}
}

// cleanupByPID makes sure pid, as it is now, does not outlive the test,
// whoever was meant to stop it (a test that fails early never gets there;
// in local mode no daemon stops anything).
func cleanupByPID(t *testing.T, pid int) {
	if tok, err := proc.TokenOf(pid); err == nil {
		t.Cleanup(func() { killByToken(pid, tok) })
	}
}

func killByPIDNow(t *testing.T, pid int) {
	t.Helper()
	tok := mustToken(t, pid)
	killByToken(pid, tok)
	waitGonePID(t, pid, tok)
}

// Issue 28: a host whose session was ended (Claude Code's /clear runs the
// SessionEnd hook) and that goes on starting servers opens a new session,
// with an id of its own, never the ended one again: each session's
// processes and events stay apart.
func TestEndedSessionIsNeverReopenedByItsHost(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	sessionsOf := func() []string {
		var out []string
		for _, p := range in.mustProcesses(true) {
			if !slices.Contains(out, p.Session) {
				out = append(out, p.Session)
			}
		}
		return out
	}
	in.mustRun("run", "--", bin, "_fixture", "exit", "0") // this test process is the host
	first := sessionsOf()
	if len(first) != 1 || !strings.HasPrefix(first[0], "host-") {
		t.Fatalf("sessions %v, want one derived from the host", first)
	}
	in.mustRun("session", "end", first[0])
	in.mustRun("run", "--", bin, "_fixture", "exit", "0")
	in.mustRun("run", "--", bin, "_fixture", "exit", "0")
	got := sessionsOf()
	want := []string{first[0], first[0] + "-2"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("sessions after the end and two more runs: %v, want %v", got, want)
	}
	ev := in.mustRun("events", "--session", first[0])
	if n := strings.Count(ev, "session.start"); n != 1 {
		t.Errorf("the ended session has %d session.start events, want 1:\n%s", n, ev)
	}
}

// TestSameSessionIDInTwoInstances: ending session x in one daemon instance
// leaves another instance's session x alone.
func TestSameSessionIDInTwoInstances(t *testing.T) {
	t.Parallel()
	a, b := newInstance(t), newInstance(t)
	sa := a.startShim("--session", "x", "--", bin, "_fixture", "daemonize")
	_, da := readReady2(t, sa.stdout)
	sb := b.startShim("--session", "x", "--", bin, "_fixture", "daemonize")
	_, db := readReady2(t, sb.stdout)
	dbTok := mustToken(t, db)
	daTok := mustToken(t, da)
	a.mustRun("session", "end", "x", "--grace", "200ms")
	waitGonePID(t, da, daTok)
	if !alive(db, dbTok) {
		t.Fatal("ending session x in one instance stopped the other instance's process")
	}
}
