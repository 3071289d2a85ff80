//go:build linux

package shutdown

// PID reuse at the cascade level: a recorded process dies, a stranger is
// started on its PID (and, with Setpgid, on its process group number too),
// and the session ends. The stranger must live. Start ticks have 10 ms
// resolution, so when the stranger lands within the same tick only the
// pidfs inode tells the two apart.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

const nsLastPid = "/proc/sys/kernel/ns_last_pid"

// reuseSession is the session marker of the targets: unique, since with
// WholeSession every process on the machine carrying it is swept, and a
// short common value ("s") hits other tests' processes.
func reuseSession(t *testing.T) string {
	return "reuse-test-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + t.Name()
}

// reuseProc is a `sleep 60` started in its own process group, with a
// stranger's environment (no supervisor marker), reaped by a goroutine.
type reuseProc struct {
	cmd    *exec.Cmd
	pid    int
	reaped chan struct{}
}

// strangerEnv is the test's environment without any supervisor marker, so
// nothing but the PID, the group and the token can tie a process to a
// target.
func strangerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUPERVISOR_") {
			env = append(env, kv)
		}
	}
	return env
}

func startSleep() (*reuseProc, error) {
	cmd := exec.Command("sleep", "60")
	cmd.Env = strangerEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &reuseProc{cmd: cmd, pid: cmd.Process.Pid, reaped: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.reaped)
	}()
	return p, nil
}

// kill SIGKILLs p (os.Process signals through its pidfd while unreaped, so
// never a recycled PID) and waits until it is reaped.
func (p *reuseProc) kill(t *testing.T) {
	t.Helper()
	p.cmd.Process.Kill()
	select {
	case <-p.reaped:
	case <-time.After(eventWait):
		t.Errorf("pid %d not reaped within %v of SIGKILL", p.pid, eventWait)
	}
}

func (p *reuseProc) exited() bool {
	select {
	case <-p.reaped:
		return true
	default:
		return false
	}
}

// skipUnlessReusable skips unless the test can steer PID allocation.
func skipUnlessReusable(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("PID reuse needs root to write %s (euid %d)", nsLastPid, os.Geteuid())
	}
	if !proc.HandlesSupported() {
		t.Skip("no pidfd_open: the cascade cannot run here")
	}
}

// reusePID starts a stranger on pid (freed by the caller) by setting
// ns_last_pid to pid-1 just before forking. Go runtime threads and other
// processes of the namespace can take the PID in between, hence the retry.
func reusePID(t *testing.T, pid int) *reuseProc {
	t.Helper()
	const tries = 200
	want := []byte(strconv.Itoa(pid - 1))
	for try := 1; try <= tries; try++ {
		if err := os.WriteFile(nsLastPid, want, 0); err != nil {
			if try == 1 {
				t.Skipf("%s is not writable: %v", nsLastPid, err)
			}
			t.Fatalf("write %s: %v", nsLastPid, err)
		}
		b, err := startSleep()
		if err != nil {
			t.Fatalf("start the stranger: %v", err)
		}
		if b.pid == pid {
			t.Logf("stranger landed on pid %d at try %d", pid, try)
			return b
		}
		b.kill(t)
	}
	t.Skipf("could not start a stranger on pid %d in %d tries (something else kept taking it)", pid, tries)
	return nil
}

// assertStrangerLives checks that the stranger b with token tokB survived
// a Stop of the recorded target, and that the outcome claims nothing.
func assertStrangerLives(t *testing.T, b *reuseProc, tokB proc.Token, out []Outcome) {
	t.Helper()
	if err := proc.Verify(b.pid, tokB); err != nil {
		t.Errorf("stranger (pid %d, token %v) after Stop: Verify %v, want it alive and unsignalled", b.pid, tokB, err)
	}
	if b.exited() {
		t.Errorf("stranger (pid %d) exited during Stop: %v", b.pid, b.cmd.ProcessState)
	}
	if out[0].Result != AlreadyGone {
		t.Errorf("result: got %q, want %q (the recorded process is gone); outcome: %v", out[0].Result, AlreadyGone, out[0])
	}
	if len(out[0].PIDs) != 0 || len(out[0].Procs) != 0 || len(out[0].Left) != 0 {
		t.Errorf("PIDs/Procs/Left: got %v/%v/%v, want none (nothing of the stranger is ours)", out[0].PIDs, out[0].Procs, out[0].Left)
	}
}

func TestPIDReuseStrangerLives(t *testing.T) {
	skipUnlessReusable(t)

	a, err := startSleep()
	if err != nil {
		t.Fatalf("start A: %v", err)
	}
	pidA := a.pid
	tokA, err := proc.TokenOf(pidA)
	if err != nil {
		a.kill(t)
		t.Fatalf("TokenOf(A %d): %v", pidA, err)
	}
	if tokA.PidfsInode == 0 {
		t.Logf("kernel has no pidfs: only start ticks protect the token of A (%v)", tokA)
	}
	a.kill(t) // reaped: pidA is free

	b := reusePID(t, pidA)
	t.Cleanup(func() { b.kill(t) })
	tokB, err := proc.TokenOf(b.pid)
	if err != nil {
		t.Fatalf("TokenOf(B %d): %v", b.pid, err)
	}
	if pgid, err := syscall.Getpgid(b.pid); err != nil || pgid != pidA {
		t.Fatalf("stranger's process group: got %d (%v), want %d (A's old group)", pgid, err, pidA)
	}
	sameTick := tokA.StartTicks == tokB.StartTicks
	t.Logf("A %v, B %v; same tick: %v", tokA, tokB, sameTick)
	if sameTick {
		t.Logf("same-tick collision: only the pidfs inode (%d vs %d) tells A from B", tokA.PidfsInode, tokB.PidfsInode)
	}
	if tokA.Matches(tokB) {
		t.Fatalf("A's token %v matches the stranger's %v: a recycled PID would be taken for A", tokA, tokB)
	}

	out := stop(t, &Cascade{}, context.Background(),
		[]Target{{ID: "a", PID: pidA, PGID: pidA, Token: tokA, Session: reuseSession(t)}},
		Options{Grace: 200 * time.Millisecond, WholeSession: true})
	t.Logf("outcome: %v", out[0])
	assertStrangerLives(t, b, tokB, out)
}

// TestPIDReuseWithinATickIsCaughtByInode forces the same-tick case: the
// recorded token has the live process's boot id and start ticks and only
// another pidfs inode, as when a PID is recycled within one clock tick.
func TestPIDReuseWithinATickIsCaughtByInode(t *testing.T) {
	if !proc.HandlesSupported() {
		t.Skip("no pidfd_open: the cascade cannot run here")
	}
	b, err := startSleep()
	if err != nil {
		t.Fatalf("start B: %v", err)
	}
	t.Cleanup(func() { b.kill(t) })
	tokB, err := proc.TokenOf(b.pid)
	if err != nil {
		t.Fatalf("TokenOf(B %d): %v", b.pid, err)
	}
	if tokB.PidfsInode == 0 {
		t.Skip("kernel has no pidfs (PidfsInode 0): a same-tick recycle cannot be told apart")
	}
	forged := proc.Token{BootID: tokB.BootID, StartTicks: tokB.StartTicks, PidfsInode: tokB.PidfsInode + 1}
	t.Logf("B %v, recorded (forged) %v", tokB, forged)

	if err := proc.Verify(b.pid, forged); !errors.Is(err, proc.ErrTokenMismatch) {
		t.Fatalf("Verify(B, forged): got %v, want %v", err, proc.ErrTokenMismatch)
	}

	out := stop(t, &Cascade{}, context.Background(),
		[]Target{{ID: "a", PID: b.pid, PGID: b.pid, Token: forged, Session: reuseSession(t)}},
		Options{Grace: 200 * time.Millisecond, WholeSession: true})
	t.Logf("outcome: %v", out[0])
	assertStrangerLives(t, b, tokB, out)
}
