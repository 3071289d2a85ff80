//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// The doctor scans the whole machine, and other tests run beside these
// ones and may leave MCP-looking orphans of their own. So these tests only
// assert about processes they planted, and every --fix is confined with
// the hidden --only-pid flag to those PIDs: a test must never stop a
// stranger's process.

// doctorFinding mirrors one object of `doctor --json` (a contract).
type doctorFinding struct {
	Kind      string `json:"kind"`
	PID       int    `json:"pid"`
	Path      string `json:"path"`
	Evidence  string `json:"evidence"`
	Fix       string `json:"fix"`
	Fixed     bool   `json:"fixed"`
	Stoppable bool   `json:"stoppable"`
}

// doctorJSON runs doctor with --json and decodes its findings; it checks
// that every object has exactly the contract's fields.
func (in *instance) doctorJSON(t *testing.T, args ...string) (fs []doctorFinding, stderr string, code int) {
	t.Helper()
	out, errOut, code := in.run(append([]string{"doctor", "--json"}, args...)...)
	var raw []map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("doctor --json %v: %v\nstdout: %s\nstderr: %s", args, err, out, errOut)
	}
	for _, obj := range raw {
		var keys []string
		for k := range obj {
			keys = append(keys, k)
		}
		if len(keys) != 7 {
			t.Errorf("finding has fields %v, want kind, pid, path, evidence, fix, fixed, stoppable", keys)
		}
	}
	json.Unmarshal([]byte(out), &fs)
	return fs, errOut, code
}

func findingFor(fs []doctorFinding, kind string, match func(doctorFinding) bool) (doctorFinding, bool) {
	for _, f := range fs {
		if f.Kind == kind && match(f) {
			return f, true
		}
	}
	return doctorFinding{}, false
}

// shadowPath makes two directories, each with a different executable named
// supervisor, and returns a PATH listing both (then the usual one).
func shadowPath(t *testing.T) (first, second, path string) {
	t.Helper()
	var dirs [2]string
	for i := range dirs {
		dirs[i] = t.TempDir()
		script := "#!/bin/sh\necho shadow " + strconv.Itoa(i) + "\n"
		if err := os.WriteFile(filepath.Join(dirs[i], "supervisor"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dirs[0], "supervisor"), filepath.Join(dirs[1], "supervisor"),
		dirs[0] + ":" + dirs[1] + ":" + os.Getenv("PATH")
}

// plantOrphan starts a fake host (sh) whose child is an MCP fixture server
// started without the supervisor, then SIGKILLs the host so the kernel
// re-parents the server. The server's stdin is a pipe whose write end the
// test keeps: it does not see EOF, like a leaked server whose pipe a
// grandchild still holds, so it lives on until stopped. The test is
// skipped when this machine gives orphans to a subreaper the doctor does
// not know (it could not call them orphans, rightly).
func plantOrphan(t *testing.T, in *instance) (int, proc.Token) {
	t.Helper()
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdinW.Close(); outR.Close() })
	host := exec.Command("sh", "-c", `"$0" _fixture mcp <&3 3<&- & echo $!; wait`, bin)
	host.Env = in.env
	host.ExtraFiles = []*os.File{stdinR}
	host.Stdout = outW
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	stdinR.Close()
	outW.Close()
	hostPID := host.Process.Pid
	line, err := readLine(bufio.NewReader(outR), wait)
	if err != nil {
		host.Process.Kill()
		host.Wait()
		t.Fatalf("fake host: %v", err)
	}
	pid, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("fake host printed %q, want the server's pid", line)
	}
	tok := mustToken(t, pid)
	t.Cleanup(func() { killByToken(pid, tok) })
	// $! is known before the forked shell has exec'd the server.
	for deadline := time.Now().Add(wait); ; {
		argv, _ := proc.Cmdline(pid)
		if len(argv) >= 3 && argv[0] == bin && argv[2] == "mcp" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d runs %q, want the fixture server", pid, argv)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The host is our own child: kill it and reap it.
	host.Process.Kill()
	host.Wait()
	deadline := time.Now().Add(wait)
	var info proc.Info
	for {
		if info, err = proc.Stat(pid); err != nil {
			t.Fatalf("the server died with its host: %v", err)
		}
		if info.PPID != hostPID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %d still has its dead host %d as parent", pid, hostPID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	parent, _ := proc.Stat(info.PPID)
	switch parent.Comm {
	case "systemd", "init", "tini", "dumb-init", "docker-init", "catatonit":
	default:
		if info.PPID != 1 {
			t.Skipf("this machine re-parents orphans to pid %d (%s), a subreaper that is not init-like; the doctor cannot call the planted server orphaned here",
				info.PPID, parent.Comm)
		}
	}
	return pid, tok
}

// startKeeper starts an MCP-looking process as the test's own child: it
// has a live host (the test) and must never be reported or touched.
func startKeeper(t *testing.T, in *instance, env ...string) (int, proc.Token) {
	t.Helper()
	cmd := exec.Command(bin, "_fixture", "sleep", "mcp-server-keeper")
	cmd.Env = append(append([]string{}, in.env...), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	return cmd.Process.Pid, mustToken(t, cmd.Process.Pid)
}

func pidArgs(pids ...int) []string {
	var out []string
	for _, p := range pids {
		out = append(out, "--only-pid", strconv.Itoa(p))
	}
	return out
}

func TestDoctorFindsAndFixesPlantedProblems(t *testing.T) {
	in := newInstance(t)
	first, second, path := shadowPath(t)
	in.env = append(in.env, "PATH="+path)
	lock := filepath.Join(in.state, "ports", "9999.lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	orphan, orphanTok := plantOrphan(t, in)
	keeper, keeperTok := startKeeper(t, in)

	// The full audit, unconfined: it sees everything on the machine, and
	// must name our orphan, our lock and our shadow install.
	fs, errOut, code := in.doctorJSON(t)
	if code != 1 {
		t.Fatalf("doctor --json: exit %d, want 1 (findings remain); stderr %s", code, errOut)
	}
	if f, ok := findingFor(fs, "orphan", func(f doctorFinding) bool { return f.PID == orphan }); !ok ||
		!strings.Contains(f.Evidence, "looks like an MCP server") || !strings.Contains(f.Evidence, "_fixture mcp") || f.Fix == "" {
		t.Errorf("no orphan finding with evidence for pid %d: %+v", orphan, fs)
	}
	for _, f := range fs {
		if f.PID == keeper {
			t.Errorf("the test's own child (pid %d, host alive) was reported: %+v", keeper, f)
		}
	}
	if f, ok := findingFor(fs, "stale-file", func(f doctorFinding) bool { return f.Path == lock }); !ok ||
		!strings.Contains(f.Evidence, "no process holds it") {
		t.Errorf("no stale-file finding for %s: %+v", lock, fs)
	}
	if f, ok := findingFor(fs, "shadow-install", func(doctorFinding) bool { return true }); !ok ||
		f.Path != first || !strings.Contains(f.Evidence, first+", "+second) ||
		!strings.Contains(f.Fix, first+" wins") || !strings.Contains(f.Fix, "remove "+second) {
		t.Errorf("no shadow-install finding naming %s then %s: %+v", first, second, fs)
	}
	if !alive(orphan, orphanTok) || !alive(keeper, keeperTok) {
		t.Fatal("the audit without --fix stopped a process")
	}

	// --fix, confined to what this test planted: the orphan is stopped,
	// the keeper (also allowed) is not, the lock goes, PATH stays.
	fs, errOut, code = in.doctorJSON(t, append([]string{"--fix"}, pidArgs(orphan, keeper)...)...)
	if code != 1 {
		t.Fatalf("doctor --fix: exit %d, want 1 (the shadow install is never fixed); stderr %s", code, errOut)
	}
	if !strings.Contains(errOut, "stopped orphan pid "+strconv.Itoa(orphan)) || !strings.Contains(errOut, "removed stale lock "+lock) {
		t.Errorf("--fix did not say what it did; stderr:\n%s", errOut)
	}
	want := map[string]bool{"orphan": true, "stale-file": true, "shadow-install": false}
	if len(fs) != len(want) {
		t.Errorf("confined --fix found %+v, want exactly the orphan, the lock and the shadow install", fs)
	}
	for _, f := range fs {
		if fixed, ok := want[f.Kind]; !ok || f.Fixed != fixed {
			t.Errorf("finding %+v: want fixed=%v", f, fixed)
		}
	}
	waitGonePID(t, orphan, orphanTok)
	if !alive(keeper, keeperTok) {
		t.Fatal("--fix stopped the keeper, whose host is alive")
	}
	if _, err := os.Stat(lock); err == nil {
		t.Error("the stale lock is still there")
	}
	for _, p := range []string{in.state + "/daemon.lock", in.state + "/start.lock"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("--fix left %s behind (it only held it)", p)
		}
	}
	for _, p := range []string{first, second} {
		if b, err := os.ReadFile(p); err != nil || !strings.HasPrefix(string(b), "#!/bin/sh") {
			t.Errorf("shadow binary %s was touched: %v", p, err)
		}
	}

	// Human output: one block per finding left, exit 1.
	out, _, code := in.run(append([]string{"doctor"}, pidArgs(keeper)...)...)
	if code != 1 || !strings.HasPrefix(out, "shadow-install "+first+"\n  evidence: ") || !strings.Contains(out, "\n  fix:      "+first+" wins") {
		t.Errorf("doctor: exit %d, output:\n%s\nwant one shadow-install block", code, out)
	}
	// Clean: exit 0 and says so.
	in.env = append(in.env, "PATH="+filepath.Dir(first)+":/usr/bin:/bin")
	out, errOut, code = in.run(append([]string{"doctor"}, pidArgs(keeper)...)...)
	if code != 0 || out != "no problems found\n" {
		t.Errorf("clean doctor: exit %d, stdout %q, stderr %q; want 0 and \"no problems found\"", code, out, errOut)
	}
	if out, _, code := in.run(append([]string{"doctor", "--json"}, pidArgs(keeper)...)...); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("clean doctor --json: exit %d, stdout %q; want 0 and []", code, out)
	}
}

func TestDoctorBadInput(t *testing.T) {
	in := newInstance(t)
	for _, tc := range []struct {
		args []string
		code int // 2: a command line the CLI cannot take
		want string
	}{
		{[]string{"doctor", "--bogus"}, 2, "supervisor: unknown flag: --bogus\nhint: see `supervisor doctor --help`\n"},
		{[]string{"doctor", "extra"}, 2, "supervisor: unknown command \"extra\" for \"supervisor doctor\"\nhint: see `supervisor doctor --help`\n"},
		{[]string{"doctor", "--only-pid", "0"}, 1, "supervisor: --only-pid 0: must be a process id (1 or more)\n"},
		{[]string{"doctor", "--only-pid", "x"}, 2, "invalid argument \"x\" for \"--only-pid\""},
	} {
		out, errOut, code := in.run(tc.args...)
		if code != tc.code || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
	if help := in.mustRun("doctor", "--help"); strings.Contains(help, "only-pid") || !strings.Contains(help, "--fix") {
		t.Errorf("doctor --help shows the hidden test flag or lacks --fix:\n%s", help)
	}
}

func TestDoctorWithDaemon(t *testing.T) {
	in := newInstance(t)
	in.env = append(in.env, "PATH=/usr/bin:/bin")
	shim := in.startShim("--name", "mcp-fs", "--", bin, "_fixture", "mcp")
	// An answer to initialize proves the server runs (and the daemon with it).
	io.WriteString(shim.stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`+"\n")
	if line, err := readLine(shim.stdout, wait); err != nil || !strings.Contains(line, `"serverInfo"`) {
		t.Fatalf("the server did not answer initialize: %q, %v", line, err)
	}
	server := waitRecord(t, in, 0, func(p api.Process) bool {
		return p.Name == "mcp-fs" && p.State == api.StateRunning && p.PID > 0
	})
	// The doctor's instance marker is the daemon's, byte for byte.
	env, err := proc.Environ(server.PID)
	if err != nil {
		t.Fatal(err)
	}
	inst := api.Paths{StateDir: in.state}.Instance()
	if got, _ := proc.EnvValue(env, "SUPERVISOR_INSTANCE"); got != inst {
		t.Fatalf("server's SUPERVISOR_INSTANCE %q, Paths.Instance() %q", got, inst)
	}
	lost, lostTok := startKeeper(t, in, "SUPERVISOR_PROC_ID=p-doctor-lost", "SUPERVISOR_INSTANCE="+inst)
	for i := 0; i < 3; i++ {
		in.run("run", "--name", "crashy", "--", "/bin/sh", "-c", "exit 3")
	}
	in.waitBreakerOpen(t)
	scope := pidArgs(server.PID, shim.cmd.Process.Pid, lost)

	fs, errOut, code := in.doctorJSON(t, append([]string{"--fix"}, scope...)...)
	if code != 1 {
		t.Fatalf("doctor: exit %d, want 1; stderr %s", code, errOut)
	}
	if f, ok := findingFor(fs, "marker-without-record", func(f doctorFinding) bool { return f.PID == lost }); !ok ||
		f.Fixed || !strings.Contains(f.Evidence, "p-doctor-lost") || !strings.Contains(f.Evidence, "has no record of it") {
		t.Errorf("no unfixed marker-without-record finding for pid %d: %+v", lost, fs)
	}
	if f, ok := findingFor(fs, "breaker-open", func(f doctorFinding) bool { return strings.Contains(f.Evidence, "crashy") }); !ok ||
		f.Fixed || !strings.Contains(f.Fix, "supervisor breaker reset") {
		t.Errorf("no breaker-open finding for crashy: %+v", fs)
	}
	if len(fs) != 2 {
		t.Errorf("findings %+v, want only the marker holder and the breaker (the daemon's server, its locks and socket are fine)", fs)
	}
	if !alive(lost, lostTok) || !alive(server.PID, server.Token) {
		t.Fatal("--fix stopped a process that is not an orphan")
	}

	in.mustRun("breaker", "reset", "crashy")
	killByToken(lost, lostTok)
	if out, errOut, code := in.run(append([]string{"doctor"}, scope...)...); code != 0 || out != "no problems found\n" {
		t.Errorf("doctor with a healthy daemon: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestDoctorDaemonOlder(t *testing.T) {
	in := newInstance(t)
	in.env = append(in.env, "PATH=/usr/bin:/bin")
	daemon := exec.Command(faultBin(t), "daemon", "--foreground")
	daemon.Env = in.env
	daemon.Stderr = &prefixWriter{t: t, prefix: "old daemon: "}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { daemon.Wait(); close(done) }()
	t.Cleanup(func() {
		daemon.Process.Signal(syscall.SIGTERM) // our own child
		select {
		case <-done:
		case <-time.After(wait):
			daemon.Process.Kill()
			<-done
		}
	})
	pid := daemon.Process.Pid
	for deadline := time.Now().Add(wait); in.daemonPID() != pid; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("old daemon %d did not answer within %v", pid, wait)
		}
	}
	fs, errOut, code := in.doctorJSON(t, pidArgs(os.Getpid())...) // no process of ours to judge
	if code != 1 {
		t.Fatalf("doctor: exit %d, want 1; stderr %s", code, errOut)
	}
	if f, ok := findingFor(fs, "daemon-older", func(f doctorFinding) bool { return f.PID == pid }); !ok ||
		!strings.Contains(f.Evidence, "runs version "+oldVersion) || !strings.Contains(f.Evidence, "this binary is version "+api.Version) ||
		!strings.Contains(f.Fix, "supervisor daemon restart") {
		t.Errorf("no daemon-older finding for daemon %d: %+v", pid, fs)
	}
	if len(fs) != 1 {
		t.Errorf("findings %+v, want only daemon-older", fs)
	}
}

// plantNamed starts `sleep 600` under the argv[0] name from a bash that
// exits at once, so the kernel re-parents it to init (the test is skipped
// where a subreaper the doctor does not know inherits it instead). The
// test kills it by PID and token when it ends.
func plantNamed(t *testing.T, in *instance, name string) (int, proc.Token) {
	t.Helper()
	cmd := exec.Command("bash", "-c", `bash -c 'exec -a "$0" sleep 600' "$0" </dev/null >/dev/null 2>&1 & echo $!`, name)
	cmd.Env = in.env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("plant %s: %v", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("plant %s: bash printed %q, want a pid", name, out)
	}
	tok := mustToken(t, pid)
	t.Cleanup(func() { killByToken(pid, tok) })
	// $! is known before the inner bash has exec'd sleep.
	for deadline := time.Now().Add(wait); ; {
		if argv, _ := proc.Cmdline(pid); len(argv) == 2 && argv[0] == name && argv[1] == "600" {
			break
		}
		if time.Now().After(deadline) {
			argv, _ := proc.Cmdline(pid)
			t.Fatalf("pid %d runs %q, want %s 600", pid, argv, name)
		}
		time.Sleep(5 * time.Millisecond)
	}
	info, err := proc.Stat(pid)
	if err != nil {
		t.Fatalf("planted %s died: %v", name, err)
	}
	parent, _ := proc.Stat(info.PPID)
	switch parent.Comm {
	case "systemd", "init", "tini", "dumb-init", "docker-init", "catatonit":
	default:
		if info.PPID != 1 {
			t.Skipf("this machine re-parents orphans to pid %d (%s), a subreaper that is not init-like", info.PPID, parent.Comm)
		}
	}
	return pid, tok
}

// TestDoctorFixStopsOnlyProvableMCP: an orphan whose argv merely contains
// "mcp" (minecraft-mcpe-backup.py) is reported but never stopped; one
// naming a known MCP binary is stopped.
func TestDoctorFixStopsOnlyProvableMCP(t *testing.T) {
	in := newInstance(t)
	in.env = append(in.env, "PATH=/usr/bin:/bin")
	stranger, strangerTok := plantNamed(t, in, "minecraft-mcpe-backup.py")
	server, serverTok := plantNamed(t, in, "mcp-server-foo")
	scope := pidArgs(stranger, server)

	fs, errOut, code := in.doctorJSON(t, scope...)
	if code != 1 {
		t.Fatalf("doctor: exit %d, want 1; stderr %s", code, errOut)
	}
	if f, ok := findingFor(fs, "orphan", func(f doctorFinding) bool { return f.PID == stranger }); !ok || f.Stoppable ||
		!strings.Contains(f.Evidence, "by name only") || !strings.Contains(f.Fix, "kill "+strconv.Itoa(stranger)) {
		t.Errorf("no unstoppable orphan finding for the stranger %d: %+v", stranger, fs)
	}
	if f, ok := findingFor(fs, "orphan", func(f doctorFinding) bool { return f.PID == server }); !ok || !f.Stoppable {
		t.Errorf("no stoppable orphan finding for mcp-server-foo %d: %+v", server, fs)
	}

	fs, errOut, code = in.doctorJSON(t, append([]string{"--fix"}, scope...)...)
	if code != 1 {
		t.Fatalf("doctor --fix: exit %d, want 1 (the stranger remains); stderr %s", code, errOut)
	}
	waitGonePID(t, server, serverTok)
	if !alive(stranger, strangerTok) {
		t.Fatalf("doctor --fix killed pid %d (minecraft-mcpe-backup.py), which only looks like MCP by name", stranger)
	}
	if !strings.Contains(errOut, "stopped orphan pid "+strconv.Itoa(server)) ||
		!strings.Contains(errOut, "left pid "+strconv.Itoa(stranger)+" (minecraft-mcpe-backup.py 600) alone: it looks like MCP by name only") ||
		!strings.Contains(errOut, "kill "+strconv.Itoa(stranger)+" yourself if it is yours") {
		t.Errorf("--fix did not say what it did and did not do; stderr:\n%s", errOut)
	}
	if f, ok := findingFor(fs, "orphan", func(f doctorFinding) bool { return f.PID == stranger }); !ok || f.Fixed {
		t.Errorf("the stranger's finding is missing or marked fixed: %+v", fs)
	}
	if f, ok := findingFor(fs, "orphan", func(f doctorFinding) bool { return f.PID == server }); !ok || !f.Fixed {
		t.Errorf("the server's finding is missing or not fixed: %+v", fs)
	}

	// The human report still lists the stranger, with what to do.
	out, _, code := in.run(append([]string{"doctor", "--fix"}, pidArgs(stranger)...)...)
	if code != 1 || !strings.Contains(out, "orphan pid "+strconv.Itoa(stranger)+"\n") ||
		!strings.Contains(out, "kill "+strconv.Itoa(stranger)) {
		t.Errorf("doctor --fix: exit %d, output:\n%s\nwant the stranger listed with `kill %d`", code, out, stranger)
	}
	if !alive(stranger, strangerTok) {
		t.Fatal("the second --fix killed the stranger")
	}
}
