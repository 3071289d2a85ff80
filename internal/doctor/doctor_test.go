//go:build linux

package doctor

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/spawn"
)

// helperEnv makes the test binary a stand-in MCP server: started with the
// name mcp-server-helper (helperBin) it looks like one to LooksLikeMCP, and it
// sleeps until killed.
const helperEnv = "DOCTOR_TEST_HELPER"

// helperBin is the test binary under the name mcp-server-helper (a
// symlink), so that the program itself is named as a known MCP server:
// an MCP name as a mere argument proves nothing (ProvablyMCP).
var helperBin string

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "1":
		select {}
	case "host":
		// A host (as a driver started with nohup is) running its MCP
		// server as its child: prints the child's pid, then waits.
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), helperEnv+"=1")
		if err := c.Start(); err != nil {
			panic(err)
		}
		fmt.Println(c.Process.Pid)
		select {}
	}
	dir, err := os.MkdirTemp("", "doctor-test")
	if err != nil {
		panic(err)
	}
	helperBin = filepath.Join(dir, "mcp-server-helper")
	if err := os.Symlink(os.Args[0], helperBin); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestDoctorLooksLikeMCP(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want bool
	}{
		{[]string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"}, true},
		{[]string{"node", "/usr/lib/node_modules/@modelcontextprotocol/server-github/dist/index.js"}, true},
		{[]string{"uvx", "mcp-server-git"}, true},
		{[]string{"/home/u/.local/bin/mcp-server-x", "--stdio"}, true},
		{[]string{"python3", "-m", "my_MCP_server"}, true},
		{[]string{"deno", "run", "-A", "jsr:@x/McpServer"}, true},
		{[]string{"bun", "x", "chroma-mcp"}, true},
		{[]string{"/usr/bin/supervisor", "_fixture", "mcp"}, true},
		{[]string{"sh", "-c", "npx -y @modelcontextprotocol/server-memory"}, true},
		{[]string{"node", "server.js"}, false},
		{[]string{"python3", "-m", "http.server"}, false},
		{[]string{"npx", "-y", "prettier"}, false},
		{[]string{"vim", "mcp.go"}, false},
		{[]string{"tail", "-f", "/var/log/mcp.log"}, false},
		{[]string{"tmux", "new", "-s", "mcp"}, false},
		{nil, false},
	} {
		if got := LooksLikeMCP(tc.argv); got != tc.want {
			t.Errorf("LooksLikeMCP(%q) = %v, want %v", tc.argv, got, tc.want)
		}
	}
}

// fake builds a process table from "pid ppid comm argv..." lines; every
// process but PID 1 and the reapers starts long after boot.
func fake(lines []string, cgroups map[int]string) *table {
	t := &table{byPID: map[int]*node{}, cgroup: func(pid int) string { return cgroups[pid] }}
	for _, l := range lines {
		f := strings.Fields(l)
		pid, _ := strconv.Atoi(f[0])
		ppid, _ := strconv.Atoi(f[1])
		n := &node{info: proc.Info{PID: pid, PPID: ppid, Comm: f[2], State: 'S', UID: os.Getuid()}, argv: f[3:]}
		n.info.Token.StartTicks = 1_000_000
		if pid == 1 || reapers[f[2]] {
			n.info.Token.StartTicks = 100
		}
		t.byPID[pid] = n
	}
	return t
}

func TestDoctorLineageRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		procs   []string
		cgroups map[int]string
		pid     int
		want    verdict
		anchor  int
		chain   []int
	}{
		{name: "launchers up to PID 1",
			procs: []string{"1 0 init /sbin/init", "8 1 npm_exec npm exec @modelcontextprotocol/server-x",
				"9 8 sh sh -c server-x", "10 9 node node /x/mcp/index.js"},
			pid: 10, want: verdictOrphan, anchor: 1, chain: []int{9, 8}},
		{name: "re-parented straight to PID 1",
			procs: []string{"1 0 process_api /process_api", "10 1 mcp-server-x mcp-server-x"},
			pid:   10, want: verdictOrphan, anchor: 1},
		{name: "a live host above the launchers",
			procs: []string{"1 0 init /sbin/init", "6 1 bash -bash", "7 6 claude claude",
				"9 7 sh sh -c npx", "10 9 node node /x/mcp/index.js"},
			pid: 10, want: verdictHost, anchor: 7, chain: []int{9}},
		{name: "node running npx is a launcher",
			procs: []string{"1 0 init /sbin/init", "8 1 node node /usr/bin/npx -y mcp-x", "10 8 node node /x/mcp-x.js"},
			pid:   10, want: verdictOrphan, anchor: 1, chain: []int{8}},
		{name: "node running anything else is a host",
			procs: []string{"1 0 init /sbin/init", "8 1 node node /srv/gateway.js", "10 8 node node /x/mcp-x.js"},
			pid:   10, want: verdictHost, anchor: 8},
		{name: "a supervisor daemon ancestor",
			procs: []string{"1 0 init /sbin/init", "5 1 supervisor /usr/bin/supervisor daemon --foreground",
				"9 5 sh sh -c x", "10 9 mcp-x mcp-x"},
			pid: 10, want: verdictTracked, anchor: 5, chain: []int{9}},
		{name: "a supervisor init ancestor",
			procs: []string{"1 0 supervisor supervisor init -- sh", "10 1 mcp-x mcp-x"},
			pid:   10, want: verdictTracked, anchor: 1},
		{name: "a subreaper systemd with the server in a terminal's scope",
			procs:   []string{"1 0 systemd /sbin/init", "300 1 systemd /lib/systemd/systemd --user", "10 300 mcp-x mcp-x"},
			cgroups: map[int]string{10: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-term-1.scope"},
			pid:     10, want: verdictOrphan, anchor: 300},
		{name: "a systemd service is not leaked",
			procs:   []string{"1 0 systemd /sbin/init", "300 1 systemd /lib/systemd/systemd --user", "10 300 mcp-x mcp-x"},
			cgroups: map[int]string{10: "/user.slice/user-1000.slice/user@1000.service/app.slice/mcp-x.service"},
			pid:     10, want: verdictHost, anchor: 300},
		{name: "parent outside the namespace",
			procs: []string{"10 0 mcp-x mcp-x"},
			pid:   10, want: verdictUnknown},
		{name: "parent exited during the scan",
			procs: []string{"1 0 init /sbin/init", "10 77 mcp-x mcp-x"},
			pid:   10, want: verdictUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := fake(tc.procs, tc.cgroups)
			lin := tab.lineage(tc.pid)
			if lin.verdict != tc.want {
				t.Fatalf("verdict %d (%s), want %d", lin.verdict, lin.why, tc.want)
			}
			if tc.anchor != 0 && (lin.anchor == nil || lin.anchor.info.PID != tc.anchor) {
				t.Fatalf("anchor %+v, want pid %d", lin.anchor, tc.anchor)
			}
			if got, want := intsString(lin.chain), intsString(tc.chain); got != want {
				t.Fatalf("launcher chain %s, want %s", got, want)
			}
		})
	}
}

func intsString(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func TestDoctorOwnCommandOfReaper(t *testing.T) {
	tab := fake([]string{"1 0 tini tini -- mcp-x", "10 1 mcp-x mcp-x"}, nil)
	tab.byPID[10].info.Token.StartTicks = 150 // 50 ticks after tini: its entrypoint
	if lin := tab.lineage(10); lin.verdict != verdictHost {
		t.Fatalf("a container's entrypoint: verdict %d, want host (%s)", lin.verdict, lin.why)
	}
	tab.byPID[10].info.Token.StartTicks = 100_000 // much later: re-parented
	if lin := tab.lineage(10); lin.verdict != verdictOrphan {
		t.Fatalf("a later process under tini: verdict %d, want orphan", lin.verdict)
	}
}

// started is a process the test started, killed by PID and token at the
// end of the test.
type started struct {
	pid int
	tok proc.Token
}

func track(t *testing.T, pid int) started {
	t.Helper()
	tok, err := proc.TokenOf(pid)
	if err != nil {
		t.Fatalf("token of %d: %v", pid, err)
	}
	s := started{pid, tok}
	t.Cleanup(func() { s.kill() })
	return s
}

func (s started) kill() {
	h, err := proc.OpenHandle(s.pid, s.tok)
	if err != nil {
		return
	}
	defer h.Close()
	h.Signal(unix.SIGKILL)
	h.Wait(10 * time.Second)
}

func (s started) alive() bool { return proc.Verify(s.pid, s.tok) == nil }

// helper starts the stand-in server as a child of the test.
func helper(t *testing.T, extraEnv ...string) started {
	t.Helper()
	cmd := exec.Command(helperBin)
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=1"}, extraEnv...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := track(t, cmd.Process.Pid)
	go cmd.Wait() // reap it when the cleanup kills it
	return s
}

// orphan starts the stand-in server from a shell that exits at once, so
// the kernel re-parents it; it skips the test when this machine gives
// orphans to something that is neither PID 1 nor a known reaper.
func orphan(t *testing.T) started {
	t.Helper()
	cmd := exec.Command("sh", "-c", `"$0" >/dev/null 2>&1 & echo $!`, helperBin)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("plant an orphan: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("plant an orphan: shell said %q", out)
	}
	s := track(t, pid)
	waitExec(t, pid)
	info, err := proc.Stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	parent, _ := proc.Stat(info.PPID)
	if info.PPID != 1 && !reapers[parent.Comm] {
		t.Skipf("this machine re-parents orphans to pid %d (%s), a subreaper doctor does not know; the orphan rule cannot be shown here", info.PPID, parent.Comm)
	}
	return s
}

// waitExec waits until pid, forked by a shell, runs the test binary: $!
// is known before the child has exec'd.
func waitExec(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if argv, _ := proc.Cmdline(pid); len(argv) == 1 && argv[0] == helperBin {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never ran the helper", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDoctorLineageRealProcesses(t *testing.T) {
	child := helper(t)
	cmd := exec.Command("sh", "-c", `"$0" & echo $!; wait`, helperBin)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := track(t, cmd.Process.Pid)
	go cmd.Wait()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	grandPID, _ := strconv.Atoi(strings.TrimSpace(line))
	grand := track(t, grandPID)
	waitExec(t, grandPID)
	lost := orphan(t)

	tab, err := readTable()
	if err != nil {
		t.Fatal(err)
	}
	if lin := tab.lineage(child.pid); lin.verdict != verdictHost || lin.anchor.info.PID != os.Getpid() {
		t.Errorf("child of the test: %+v, want the test process as its live host", lin)
	}
	if lin := tab.lineage(grand.pid); lin.verdict != verdictHost || lin.anchor.info.PID != os.Getpid() ||
		intsString(lin.chain) != intsString([]int{sh.pid}) {
		t.Errorf("through sh: %+v, want sh passed as a launcher and the test as host", lin)
	}
	if lin := tab.lineage(lost.pid); lin.verdict != verdictOrphan {
		t.Errorf("re-parented: %+v, want orphan", lin)
	}
}

func TestDoctorCheckAndFixOrphan(t *testing.T) {
	lost := orphan(t)
	kept := helper(t)
	d := newDoctor(t, lost.pid, kept.pid)
	fs, err := d.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Kind != KindOrphan || fs[0].PID != lost.pid {
		t.Fatalf("findings %+v, want one orphan, pid %d", fs, lost.pid)
	}
	did := d.Fix(context.Background(), fs)
	if len(did) != 1 || !strings.HasPrefix(did[0], "stopped orphan pid "+strconv.Itoa(lost.pid)) || !fs[0].Fixed {
		t.Fatalf("fix did %q, finding %+v", did, fs[0])
	}
	if !proc.WaitExit(lost.pid, lost.tok, 10*time.Second) {
		t.Fatal("the orphan still runs")
	}
	if !kept.alive() {
		t.Fatal("the test's own child was stopped")
	}
}

// Issue 27: an orphaned process that runs an MCP server as its own child
// is that server's host (nohup, a closed terminal), though its own argv
// names MCP: reported, never stopped by --fix.
func TestDoctorFixNeverStopsAHost(t *testing.T) {
	cmd := exec.Command("sh", "-c", `"$0" & echo $!`, helperBin)
	cmd.Env = append(os.Environ(), helperEnv+"=host")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("plant a host: %v", err)
	}
	host := track(t, mustAtoi(t, line))
	line, err = r.ReadString('\n')
	if err != nil {
		t.Fatalf("the host's child: %v", err)
	}
	server := track(t, mustAtoi(t, line))
	cmd.Wait()
	waitExec(t, host.pid)
	if info, err := proc.Stat(host.pid); err != nil {
		t.Fatal(err)
	} else if parent, _ := proc.Stat(info.PPID); info.PPID != 1 && !reapers[parent.Comm] {
		t.Skipf("this machine re-parents orphans to pid %d (%s), a subreaper doctor does not know", info.PPID, parent.Comm)
	}
	d := newDoctor(t, host.pid, server.pid)
	fs, err := d.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range fs {
		if f.PID == host.pid {
			found = true
			if f.Stoppable || !strings.Contains(f.Evidence, "host") {
				t.Fatalf("the host is a stoppable finding: %+v", f)
			}
		}
	}
	if !found {
		t.Fatalf("no finding for the orphaned host %d: %+v", host.pid, fs)
	}
	for _, did := range d.Fix(context.Background(), fs) {
		if strings.HasPrefix(did, "stopped") {
			t.Fatalf("fix stopped something: %q", did)
		}
	}
	if !host.alive() || !server.alive() {
		t.Fatalf("host alive %v, its server alive %v: want both left alone", host.alive(), server.alive())
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("%q is not a pid", s)
	}
	return n
}

func TestDoctorMarkerWithoutRecordNoDaemon(t *testing.T) {
	d := newDoctor(t)
	ours := helper(t, spawn.EnvProcID+"=p-lost", spawn.EnvInstance+"="+d.Paths.Instance())
	theirs := helper(t, spawn.EnvProcID+"=p-other", spawn.EnvInstance+"=0badc0de")
	// The daemon's log hub carries the instance's markers but is no
	// server: never a finding.
	hub := helper(t, spawn.EnvProcID+"=log-hub", spawn.EnvInstance+"="+d.Paths.Instance(), spawn.EnvLogWriter+"=1")
	d.OnlyPIDs = []int{ours.pid, theirs.pid, hub.pid}
	fs, err := d.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Kind != KindMarkerWithoutRecord || fs[0].PID != ours.pid ||
		!strings.Contains(fs[0].Evidence, "p-lost") || !strings.Contains(fs[0].Evidence, "no daemon runs") {
		t.Fatalf("findings %+v, want marker-without-record for pid %d only", fs, ours.pid)
	}
	d.Fix(context.Background(), fs)
	if fs[0].Fixed || !ours.alive() {
		t.Fatal("fix touched a marker holder; only the daemon's recovery may")
	}
}

func TestDoctorInstanceMatchesDaemonRule(t *testing.T) {
	sum := sha256.Sum256([]byte("/some/state"))
	if got, want := (api.Paths{StateDir: "/some/state"}).Instance(), hex.EncodeToString(sum[:4]); got != want {
		t.Fatalf("Instance() = %q, want %q", got, want)
	}
}

// deadPIDOf returns the PID of a process that has exited and been reaped.
func deadPIDOf(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func holdLock(t *testing.T, path string) {
	t.Helper()
	f, err := tryLock(path, true)
	if err != nil {
		t.Fatalf("hold %s: %v", path, err)
	}
	t.Cleanup(func() { f.Close() })
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func TestDoctorStaleFiles(t *testing.T) {
	d := newDoctor(t, os.Getpid()) // no process findings: only this test runs here
	st := d.Paths.StateDir
	heldLock := filepath.Join(st, "ports", "1.lock")
	staleLock := filepath.Join(st, "ports", "2.lock")
	deadPID := filepath.Join(st, "x.pid")
	livePID := filepath.Join(st, "y.pid")
	write(t, heldLock, "")
	write(t, staleLock, "")
	write(t, deadPID, strconv.Itoa(deadPIDOf(t))+"\n")
	write(t, livePID, strconv.Itoa(os.Getpid())+"\n")
	holdLock(t, heldLock)
	// A socket whose listener is gone without unlinking it.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: d.Paths.Socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()

	fs, err := d.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range fs {
		if f.Kind != KindStaleFile {
			t.Errorf("unexpected finding %+v", f)
		}
		paths = append(paths, d.rel(f.Path))
	}
	if got, want := strings.Join(paths, " "), "ports/2.lock s.sock x.pid"; got != want {
		t.Fatalf("stale files %q, want %q", got, want)
	}
	did := d.Fix(context.Background(), fs)
	if Unfixed(fs) != 0 || len(did) != 3 {
		t.Fatalf("fix did %q; findings %+v", did, fs)
	}
	for _, p := range []string{staleLock, d.Paths.Socket, deadPID, d.Paths.Lock(), d.Paths.StartLock()} {
		if exists(p) {
			t.Errorf("%s still exists after the fix", p)
		}
	}
	for _, p := range []string{heldLock, livePID} {
		if !exists(p) {
			t.Errorf("%s was removed", p)
		}
	}
}

func TestDoctorStaleFilesLeftToARunningDaemon(t *testing.T) {
	d := newDoctor(t, os.Getpid())
	deadPID := filepath.Join(d.Paths.StateDir, "x.pid")
	write(t, deadPID, strconv.Itoa(deadPIDOf(t))+"\n")
	write(t, filepath.Join(d.Paths.StateDir, "ports", "2.lock"), "")
	fs, err := d.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 2 {
		t.Fatalf("findings %+v, want the port lock and the pid file", fs)
	}
	// A daemon starts between the audit and the fix.
	holdLock(t, d.Paths.Lock())
	did := d.Fix(context.Background(), fs)
	if len(did) != 1 || !strings.Contains(did[0], "for the daemon that now runs") {
		t.Fatalf("fix did %q, want it to leave the files to the daemon", did)
	}
	if Unfixed(fs) != 2 || !exists(deadPID) {
		t.Fatal("a file was removed while a daemon held its lock")
	}
}

func TestDoctorShadowInstall(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	write(t, filepath.Join(a, "supervisor"), "#!/bin/sh\necho a\n")
	write(t, filepath.Join(b, "supervisor"), "#!/bin/sh\necho b\n")
	os.Chmod(filepath.Join(a, "supervisor"), 0o755)
	os.Chmod(filepath.Join(b, "supervisor"), 0o755)
	link := t.TempDir()
	if err := os.Symlink(filepath.Join(a, "supervisor"), filepath.Join(link, "supervisor")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want int
	}{
		{a, 0},
		{a + ":" + link + ":" + a, 0}, // the same file three times
		{link + ":" + b, 1},
		{"relative:" + b + "::" + a, 1},
	} {
		d := newDoctor(t)
		d.Getenv = func(string) string { return tc.path }
		fs := d.checkShadow()
		if len(fs) != tc.want {
			t.Errorf("PATH=%s: %d findings %+v, want %d", tc.path, len(fs), fs, tc.want)
			continue
		}
		if tc.want == 1 && (!strings.Contains(fs[0].Fix, "remove") || !strings.Contains(fs[0].Evidence, "in PATH order")) {
			t.Errorf("PATH=%s: finding %+v", tc.path, fs[0])
		}
	}
	d := newDoctor(t)
	d.Getenv = func(string) string { return b + ":" + link }
	fs := d.checkShadow()
	wantEv := filepath.Join(b, "supervisor") + ", " + filepath.Join(link, "supervisor") + " (-> " + filepath.Join(a, "supervisor") + ")"
	if len(fs) != 1 || !strings.Contains(fs[0].Evidence, wantEv) || fs[0].Path != filepath.Join(b, "supervisor") {
		t.Fatalf("finding %+v, want evidence listing %s and %s winning", fs, wantEv, b)
	}
}

func TestDoctorCleanIsEmpty(t *testing.T) {
	kept := helper(t)
	d := newDoctor(t, kept.pid)
	fs, err := d.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if fs == nil || len(fs) != 0 {
		t.Fatalf("findings %#v, want an empty, non-nil list (JSON [])", fs)
	}
}

// TestDoctorProvableThroughLaunchers: a server whose own argv names no
// known package is still provable when a launcher above it does.
func TestDoctorProvableThroughLaunchers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		procs []string
		want  bool
	}{
		{"npm exec of an official server above node",
			[]string{"1 0 init /sbin/init", "8 1 npm_exec npm exec @modelcontextprotocol/server-x",
				"9 8 sh sh -c server-x", "10 9 node node /x/mcp/index.js"}, true},
		{"a known binary itself",
			[]string{"1 0 init /sbin/init", "10 1 mcp-server-x mcp-server-x"}, true},
		{"a name-only lookalike straight under init",
			[]string{"1 0 init /sbin/init", "10 1 sleep minecraft-mcpe-backup.py 600"}, false},
		{"a name-only lookalike under a shell naming nothing known",
			[]string{"1 0 init /sbin/init", "9 1 sh sh -c ./mcpe-tool", "10 9 node node /x/mcp/index.js"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := fake(tc.procs, nil)
			lin := tab.lineage(10)
			if lin.verdict != verdictOrphan {
				t.Fatalf("verdict %d (%s), want orphan", lin.verdict, lin.why)
			}
			if got := provable(tab, tab.byPID[10], lin); got != tc.want {
				t.Errorf("provable = %v, want %v", got, tc.want)
			}
		})
	}
}
