//go:build linux

package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// statLine builds a /proc/PID/stat line: pid, (comm), state, ppid, pgrp,
// session, zeros up to starttime (field 22) and two more fields.
func statLine(pid, comm, state string, ppid, pgrp, sid, start string) string {
	fields := []string{state, ppid, pgrp, sid}
	for i := 7; i < 22; i++ { // fields 7..21
		fields = append(fields, "0")
	}
	fields = append(fields, start, "1000", "2000")
	return pid + " (" + comm + ") " + strings.Join(fields, " ") + "\n"
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    Info
		wantErr bool
	}{
		{
			name: "plain",
			line: statLine("123", "sleep", "S", "1", "123", "100", "98765"),
			want: Info{PID: 123, PPID: 1, PGID: 123, SID: 100, State: 'S', Comm: "sleep", Token: Token{StartTicks: 98765}},
		},
		{
			name: "comm with spaces",
			line: statLine("7", "Web Content", "R", "2", "3", "4", "5"),
			want: Info{PID: 7, PPID: 2, PGID: 3, SID: 4, State: 'R', Comm: "Web Content", Token: Token{StartTicks: 5}},
		},
		{
			name: "comm with parentheses",
			line: statLine("8", "(a) b)", "Z", "9", "10", "11", "12"),
			want: Info{PID: 8, PPID: 9, PGID: 10, SID: 11, State: 'Z', Comm: "(a) b)", Token: Token{StartTicks: 12}},
		},
		{
			name: "comm that looks like fields",
			line: statLine("8", ") S 1 2 3 (", "S", "9", "10", "11", "12"),
			want: Info{PID: 8, PPID: 9, PGID: 10, SID: 11, State: 'S', Comm: ") S 1 2 3 (", Token: Token{StartTicks: 12}},
		},
		{
			name: "huge starttime",
			line: statLine("1", "init", "S", "0", "1", "1", "18446744073709551615"),
			want: Info{PID: 1, PPID: 0, PGID: 1, SID: 1, State: 'S', Comm: "init", Token: Token{StartTicks: 18446744073709551615}},
		},
		{name: "empty", line: "", wantErr: true},
		{name: "no comm", line: "123 S 1 2 3", wantErr: true},
		{name: "close before open", line: "123 )sleep( S 1 2 3", wantErr: true},
		{name: "short line", line: "123 (sleep) S 1 123 100 0 0", wantErr: true},
		{name: "only comm", line: "123 (sleep)", wantErr: true},
		{name: "bad pid", line: statLine("abc", "a", "S", "1", "2", "3", "4"), wantErr: true},
		{name: "bad ppid", line: statLine("1", "a", "S", "one", "2", "3", "4"), wantErr: true},
		{name: "bad starttime", line: statLine("1", "a", "S", "1", "2", "3", "-4"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.line))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseStat(%q): got %+v, nil; want an error", tt.line, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseStat(%q): got error %v, want nil", tt.line, err)
			}
			if got != tt.want {
				t.Errorf("parseStat(%q): got %+v, want %+v", tt.line, got, tt.want)
			}
		})
	}
}

func TestStatSelf(t *testing.T) {
	pid := os.Getpid()
	info, err := Stat(pid)
	if err != nil {
		t.Fatalf("Stat(self): %v", err)
	}
	if info.PID != pid {
		t.Errorf("PID: got %d, want %d", info.PID, pid)
	}
	if info.PPID != os.Getppid() {
		t.Errorf("PPID: got %d, want %d", info.PPID, os.Getppid())
	}
	if pgid, _ := unix.Getpgid(pid); info.PGID != pgid {
		t.Errorf("PGID: got %d, want %d", info.PGID, pgid)
	}
	if sid, _ := unix.Getsid(pid); info.SID != sid {
		t.Errorf("SID: got %d, want %d", info.SID, sid)
	}
	if info.UID != os.Getuid() {
		t.Errorf("UID: got %d, want %d", info.UID, os.Getuid())
	}
	if info.State != 'R' && info.State != 'S' {
		t.Errorf("State: got %c, want R or S", info.State)
	}
	boot, err := BootID()
	if err != nil {
		t.Fatalf("BootID: %v", err)
	}
	if boot == "" || info.Token.BootID != boot {
		t.Errorf("Token.BootID: got %q, want %q (non-empty)", info.Token.BootID, boot)
	}
	if info.Token.StartTicks == 0 {
		t.Errorf("Token.StartTicks: got 0, want non-zero")
	}

	tok, err := TokenOf(pid)
	if err != nil {
		t.Fatalf("TokenOf(self): %v", err)
	}
	if !tok.Matches(info.Token) {
		t.Errorf("TokenOf(self): got %v, want %v", tok, info.Token)
	}
	if tok.PidfsInode == 0 {
		t.Logf("no pidfs on this kernel (before 6.9): tokens carry no inode")
	}
	if tok.IsZero() {
		t.Errorf("TokenOf(self).IsZero(): got true, want false")
	}
}

func TestStatBadPID(t *testing.T) {
	for _, pid := range []int{0, -1} {
		if _, err := Stat(pid); !errors.Is(err, ErrGone) {
			t.Errorf("Stat(%d): got %v, want %v", pid, err, ErrGone)
		}
	}
}

func TestTokenIsZero(t *testing.T) {
	tests := []struct {
		tok  Token
		want bool
	}{
		{Token{}, true},
		{Token{BootID: "b"}, false},
		{Token{StartTicks: 1}, false},
	}
	for _, tt := range tests {
		if got := tt.tok.IsZero(); got != tt.want {
			t.Errorf("%v.IsZero(): got %v, want %v", tt.tok, got, tt.want)
		}
	}
}

// startSleeper starts `sleep 30` and returns the command and its token, read
// while it is alive. Cleanup kills and reaps it.
func startSleeper(t *testing.T) (*exec.Cmd, Token) {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sleep: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	tok, err := TokenOf(cmd.Process.Pid)
	if err != nil {
		t.Fatalf("TokenOf(child): %v", err)
	}
	return cmd, tok
}

func TestVerify(t *testing.T) {
	self, err := TokenOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		tok  Token
		want error
	}{
		{"own token", self, nil},
		{"wrong ticks", Token{BootID: self.BootID, StartTicks: self.StartTicks + 1}, ErrTokenMismatch},
		{"wrong boot", Token{BootID: "other-boot", StartTicks: self.StartTicks}, ErrTokenMismatch},
		{"zero token", Token{}, ErrTokenMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(os.Getpid(), tt.tok)
			if tt.want == nil && err != nil || !errors.Is(err, tt.want) {
				t.Errorf("Verify(self, %v): got %v, want %v", tt.tok, err, tt.want)
			}
		})
	}
}

func TestVerifyReapedChild(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	tok, err := TokenOf(pid)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("TokenOf(child): %v", err)
	}
	if err := Verify(pid, tok); err != nil {
		t.Errorf("Verify(live child): got %v, want nil", err)
	}
	cmd.Process.Kill()
	cmd.Wait()

	err = Verify(pid, tok)
	if errors.Is(err, ErrTokenMismatch) {
		t.Skipf("pid %d was recycled before the check (%v)", pid, err)
	}
	if !errors.Is(err, ErrGone) {
		t.Errorf("Verify(reaped child): got %v, want %v", err, ErrGone)
	}
	if _, err := TokenOf(pid); !errors.Is(err, ErrGone) && !errors.Is(err, ErrTokenMismatch) {
		t.Errorf("TokenOf(reaped child): got %v, want %v", err, ErrGone)
	}
}

func TestVerifyZombie(t *testing.T) {
	// A child that exited but is not reaped yet is gone for Verify.
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	// Wait for the exit without reaping.
	var si unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &si, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatalf("waitid: %v", err)
	}
	info, err := Stat(pid)
	if err != nil {
		t.Fatalf("Stat(zombie): %v", err)
	}
	if info.State != 'Z' {
		t.Fatalf("State: got %c, want Z", info.State)
	}
	if err := Verify(pid, info.Token); !errors.Is(err, ErrGone) {
		t.Errorf("Verify(zombie): got %v, want %v", err, ErrGone)
	}
}

func TestOpenHandle(t *testing.T) {
	if !HandlesSupported() {
		t.Skip("kernel has no pidfd_open")
	}
	cmd, tok := startSleeper(t)
	pid := cmd.Process.Pid

	h, err := OpenHandle(pid, tok)
	if err != nil {
		t.Fatalf("OpenHandle(child, its token): %v", err)
	}
	if h.PID() != pid {
		t.Errorf("PID: got %d, want %d", h.PID(), pid)
	}
	if kind, _, err := FdKind(h.Fd()); err != nil {
		t.Errorf("FdKind(pidfd): %v", err)
	} else if kind == "" {
		t.Errorf("FdKind(pidfd): got empty kind")
	}
	// The live child with another token is refused as someone else.
	bad := []Token{{}, {BootID: tok.BootID, StartTicks: tok.StartTicks + 1}, {BootID: "x", StartTicks: tok.StartTicks}}
	for _, b := range bad {
		h, err := OpenHandle(pid, b)
		if !errors.Is(err, ErrTokenMismatch) {
			t.Errorf("OpenHandle(child, %v): got %v, want %v", b, err, ErrTokenMismatch)
		}
		if h != nil {
			t.Errorf("OpenHandle(child, %v): got a handle, want nil", b)
			h.Close()
		}
	}

	if h.Wait(0) {
		t.Errorf("Wait(0) on a live sleeper: got exited")
	}
	if err := h.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("Signal(SIGKILL): %v", err)
	}
	if !h.Wait(10 * time.Second) {
		t.Errorf("Wait after SIGKILL: still running after 10s")
	}
	h.Close()
}

func TestOpenHandleGone(t *testing.T) {
	if !HandlesSupported() {
		t.Skip("kernel has no pidfd_open")
	}
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	h, err := OpenHandle(cmd.Process.Pid, Token{BootID: "b", StartTicks: 1})
	if err == nil {
		h.Close()
	}
	if !errors.Is(err, ErrGone) && !errors.Is(err, ErrTokenMismatch) {
		t.Errorf("OpenHandle(reaped child): got %v, want %v", err, ErrGone)
	}
}

func fdFlags(t *testing.T, fd int) int {
	t.Helper()
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatalf("F_GETFD %d: %v", fd, err)
	}
	return flags
}

func TestMarkInheritedCloexec(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	for _, fd := range p {
		if fdFlags(t, fd)&unix.FD_CLOEXEC != 0 {
			t.Fatalf("fd %d: FD_CLOEXEC set before the call; the test needs it clear", fd)
		}
	}
	marked, err := MarkInheritedCloexec()
	if err != nil {
		t.Fatalf("MarkInheritedCloexec: %v", err)
	}
	for _, fd := range p {
		if got := fdFlags(t, fd) & unix.FD_CLOEXEC; got == 0 {
			t.Errorf("fd %d FD_CLOEXEC: got clear, want set", fd)
		}
		if !slices.Contains(marked, fd) {
			t.Errorf("marked %v, want it to include %d", marked, fd)
		}
	}
	if again, _ := MarkInheritedCloexec(); slices.Contains(again, p[0]) {
		t.Errorf("second call returned %v: fds already close-on-exec are not inherited ones", again)
	}
}

func TestFdKind(t *testing.T) {
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sp[0])
	defer unix.Close(sp[1])
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	reg, err := os.Create(t.TempDir() + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	tests := []struct {
		name string
		fd   int
		want string
	}{
		{"pipe read end", pipe[0], "pipe"},
		{"pipe write end", pipe[1], "pipe"},
		{"socketpair", sp[0], "socket"},
		{"/dev/null", int(null.Fd()), "null"},
		{"regular file", int(reg.Fd()), "file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, ino, err := FdKind(tt.fd)
			if err != nil {
				t.Fatalf("FdKind: %v", err)
			}
			if kind != tt.want {
				t.Errorf("kind: got %q, want %q", kind, tt.want)
			}
			if ino == 0 {
				t.Errorf("inode: got 0, want non-zero")
			}
		})
	}

	// Both ends of a pipe share one inode; the two sockets do not.
	_, i0, _ := FdKind(pipe[0])
	_, i1, _ := FdKind(pipe[1])
	if i0 != i1 {
		t.Errorf("pipe inodes: got %d and %d, want equal", i0, i1)
	}
	_, s0, _ := FdKind(sp[0])
	_, s1, _ := FdKind(sp[1])
	if s0 == s1 {
		t.Errorf("socketpair inodes: got both %d, want distinct", s0)
	}

	if _, _, err := FdKind(-1); err == nil {
		t.Errorf("FdKind(-1): got nil error, want an error")
	}
}

func TestCmdlineAndEnviron(t *testing.T) {
	// The child says it runs: right after exec its cmdline can still be
	// empty (the kernel sets the new argv up after closing the exec pipe).
	cmd := exec.Command("/bin/sh", "-c", "echo ready; read x")
	cmd.Env = []string{"PROC_TEST_MARK=yes", "OTHER=1"}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); <-done })
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatal(err)
	}

	argv, err := Cmdline(cmd.Process.Pid)
	if err != nil {
		t.Fatalf("Cmdline: %v", err)
	}
	if want := []string{"/bin/sh", "-c", "echo ready; read x"}; !slices.Equal(argv, want) {
		t.Errorf("Cmdline: got %q, want %q", argv, want)
	}
	env, err := Environ(cmd.Process.Pid)
	if err != nil {
		t.Fatalf("Environ: %v", err)
	}
	if !slices.Contains(env, "PROC_TEST_MARK=yes") {
		t.Errorf("Environ: got %q, want it to contain PROC_TEST_MARK=yes", env)
	}
}

func TestScanFindsSelf(t *testing.T) {
	infos, err := Scan()
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	self := os.Getpid()
	found := slices.ContainsFunc(infos, func(i Info) bool { return i.PID == self })
	if !found {
		t.Errorf("Scan: got %d processes without pid %d, want it listed", len(infos), self)
	}
}

// TestTokenInodeTellsProcessesApart: two processes whose stat halves were
// equal (a PID recycled within one clock tick) still differ by inode.
func TestTokenInodeTellsProcessesApart(t *testing.T) {
	a := Token{BootID: "b", StartTicks: 7, PidfsInode: 100}
	tests := []struct {
		name string
		b    Token
		want bool
	}{
		{"same process", Token{BootID: "b", StartTicks: 7, PidfsInode: 100}, true},
		{"recycled within a tick", Token{BootID: "b", StartTicks: 7, PidfsInode: 101}, false},
		{"stat-only side", Token{BootID: "b", StartTicks: 7}, true},
		{"other ticks", Token{BootID: "b", StartTicks: 8, PidfsInode: 100}, false},
		{"other boot", Token{BootID: "c", StartTicks: 7, PidfsInode: 100}, false},
		{"zero", Token{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := a.Matches(tt.b); got != tt.want {
				t.Errorf("Matches: got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestZombieStatus(t *testing.T) {
	for _, tt := range []struct {
		script string
		code   int
		sig    unix.Signal
	}{{"exit 7", 7, 0}, {"kill -TERM $$", 0, unix.SIGTERM}} {
		// The child waits for its stdin to close: its token is read while
		// it surely runs.
		cmd := exec.Command("sh", "-c", "read x; "+tt.script)
		release, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		tok, err := TokenOf(pid)
		release.Close()
		if err != nil {
			cmd.Wait()
			t.Fatalf("token of a running child: %v", err)
		}
		deadline := time.Now().Add(30 * time.Second)
		var ws syscall.WaitStatus
		var ok bool
		for !ok && time.Now().Before(deadline) {
			ws, ok = ZombieStatus(pid, tok)
			time.Sleep(time.Millisecond)
		}
		cmd.Wait() // we are its parent: nobody else reaps it
		if !ok {
			t.Fatalf("%q: no zombie status within 30s", tt.script)
		}
		if ws.Signaled() != (tt.sig != 0) || ws.Signaled() && ws.Signal() != tt.sig || !ws.Signaled() && ws.ExitStatus() != tt.code {
			t.Errorf("%q: status %v (code %d signal %v), want code %d signal %v", tt.script, ws, ws.ExitStatus(), ws.Signal(), tt.code, tt.sig)
		}
		if _, ok := ZombieStatus(pid, tok); ok {
			t.Errorf("%q: a status after the reap", tt.script)
		}
	}
}

// TestStatOwner: Stat's UID is the process's own user, for a process of
// another user (as root) and for one that is not dumpable, whose
// /proc/PID/stat belongs to root (ssh-agent does this to itself): the
// stop scan leaves other users' processes alone by it, and must not take
// or skip one for its dumpable flag.
func TestStatOwner(t *testing.T) {
	uid := os.Getuid()
	if uid == 0 {
		uid = 65534 // a process of another user; else one of ours
	}
	bin := os.Args[0]
	if os.Getuid() == 0 {
		// The other user must be able to reach the test binary, which
		// sits in a directory only we can enter.
		dir, err := os.MkdirTemp("", "proc-helper-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(dir, "proc.test")
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^TestHelperNotDumpable$")
	cmd.Env = append(os.Environ(), "PROC_HELPER_NOT_DUMPABLE=1")
	if os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 {
		t.Fatalf("the helper's stat file belongs to %d: it is still dumpable, the test proves nothing", st.Uid)
	}
	info, err := Stat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if info.UID != uid {
		t.Errorf("UID of a non-dumpable process of user %d: got %d", uid, info.UID)
	}
}

// TestHelperNotDumpable is TestStatOwner's child: it makes itself not
// dumpable and waits to be killed.
func TestHelperNotDumpable(t *testing.T) {
	if os.Getenv("PROC_HELPER_NOT_DUMPABLE") != "1" {
		return
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	os.Exit(0)
}
