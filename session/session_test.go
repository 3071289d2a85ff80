//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

const eventWait = 10 * time.Second

func TestIdentifyInvalidExplicitID(t *testing.T) {
	for _, id := range []string{"a b", "a/b", strings.Repeat("x", 129)} {
		if _, err := Identify(os.Getppid(), id, nil); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Identify with explicit %q: got %v, want %v", id, err, ErrInvalidID)
		}
	}
}

func TestIdentifyParent(t *testing.T) {
	id, err := Identify(os.Getppid(), "", nil)
	if err != nil {
		t.Fatalf("Identify(ppid): %v", err)
	}
	if id.HostPID <= 0 {
		t.Fatalf("HostPID: got %d, want > 0", id.HostPID)
	}
	if id.HostToken.IsZero() {
		t.Errorf("HostToken: got zero, want set")
	}
	want := fmt.Sprintf("host-%d-%d", id.HostPID, id.HostToken.StartTicks)
	if id.ID != want {
		t.Errorf("ID: got %q, want %q", id.ID, want)
	}
	pid, ticks, ok := ParseHostID(id.ID)
	if !ok || pid != id.HostPID || ticks != id.HostToken.StartTicks {
		t.Errorf("ParseHostID(%q): got (%d, %d, %v), want (%d, %d, true)", id.ID, pid, ticks, ok, id.HostPID, id.HostToken.StartTicks)
	}
	if err := ValidateID(id.ID); err != nil {
		t.Errorf("derived id %q does not validate: %v", id.ID, err)
	}
	if id.HostCommand == "" {
		t.Errorf("HostCommand: got empty, want the host's command")
	}
	if id.Label != "" {
		t.Errorf("Label without env: got %q, want empty", id.Label)
	}
}

func TestIdentifyExplicitAndLabel(t *testing.T) {
	env := []string{"PATH=/bin", EnvClaudeSession + "=claude-abc", "X=1"}
	id, err := Identify(os.Getppid(), "my.session_1", env)
	if err != nil {
		t.Fatalf("Identify: %v", err)
	}
	if id.ID != "my.session_1" {
		t.Errorf("ID: got %q, want %q", id.ID, "my.session_1")
	}
	if id.Label != "claude-abc" {
		t.Errorf("Label: got %q, want %q", id.Label, "claude-abc")
	}
	if id.HostPID <= 0 {
		t.Errorf("HostPID with an explicit id: got %d, want the host still found", id.HostPID)
	}
}

// TestIdentifySkipsShell runs a shell as our child and identifies from it:
// the shell is a launcher, so the host is this test process.
func TestIdentifySkipsShell(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 30; :")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		// Kill the shell's whole group (its sleep too) before reaping it:
		// while the shell is unreaped, its pgid cannot be reused.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})

	id, err := Identify(cmd.Process.Pid, "", nil)
	if err != nil {
		t.Fatalf("Identify(sh): %v", err)
	}
	if id.HostPID != os.Getpid() {
		t.Errorf("HostPID: got %d (%s), want %d (this test process)", id.HostPID, id.HostCommand, os.Getpid())
	}
	self, err := proc.TokenOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !id.HostToken.Matches(self) {
		t.Errorf("HostToken: got %v, want %v", id.HostToken, self)
	}
}

func TestIdentifyGoneParent(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := Identify(cmd.Process.Pid, "", nil); err == nil {
		t.Errorf("Identify(reaped pid): got nil error, want an error")
	}
}

// startChild starts `sleep 30`, returns it with its token and a channel
// closed once it is reaped. Cleanup kills and reaps it.
func startChild(t *testing.T) (*exec.Cmd, proc.Token, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { cmd.Wait(); close(reaped) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-reaped })
	tok, err := proc.TokenOf(cmd.Process.Pid)
	if err != nil {
		t.Fatalf("TokenOf(child): %v", err)
	}
	return cmd, tok, reaped
}

// runWatcher starts w.Run and returns a cancel that stops it and reports
// Run's result.
func runWatcher(t *testing.T, w *Watcher) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var stopped bool
	var result error
	stop = func() error {
		if stopped {
			return result
		}
		stopped = true
		cancel()
		select {
		case result = <-done:
		case <-time.After(eventWait):
			result = errors.New("Run did not return after cancel")
		}
		return result
	}
	t.Cleanup(func() {
		stop()
		w.Close()
	})
	return stop
}

func newWatcher(t *testing.T) *Watcher {
	t.Helper()
	if !proc.HandlesSupported() {
		t.Skip("kernel has no pidfd_open")
	}
	w, err := NewWatcher(nil)
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	return w
}

func TestWatcherOnExit(t *testing.T) {
	w := newWatcher(t)
	stop := runWatcher(t, w)
	cmd, tok, _ := startChild(t)

	exited := make(chan struct{})
	calls := 0
	if _, err := w.Watch(cmd.Process.Pid, tok, func() { calls++; close(exited) }); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if got := w.Len(); got != 1 {
		t.Errorf("Len after Watch: got %d, want 1", got)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(eventWait):
		t.Fatalf("onExit not called within %v of the kill", eventWait)
	}
	if got := w.Len(); got != 0 {
		t.Errorf("Len after exit: got %d, want 0", got)
	}
	if err := stop(); err != nil {
		t.Errorf("Run after cancel: got %v, want nil", err)
	}
	if calls != 1 {
		t.Errorf("onExit calls: got %d, want 1", calls)
	}
}

func TestWatcherSeveral(t *testing.T) {
	w := newWatcher(t)
	runWatcher(t, w)
	const n = 3
	cmds := make([]*exec.Cmd, n)
	exited := make([]chan struct{}, n)
	for i := range n {
		cmd, tok, _ := startChild(t)
		cmds[i] = cmd
		exited[i] = make(chan struct{})
		ch := exited[i]
		if _, err := w.Watch(cmd.Process.Pid, tok, func() { close(ch) }); err != nil {
			t.Fatalf("Watch %d: %v", i, err)
		}
	}
	// Kill the middle one: only its onExit fires.
	cmds[1].Process.Kill()
	select {
	case <-exited[1]:
	case <-time.After(eventWait):
		t.Fatalf("onExit of the killed child not called within %v", eventWait)
	}
	for _, i := range []int{0, 2} {
		select {
		case <-exited[i]:
			t.Errorf("onExit of live child %d called", i)
		default:
		}
	}
	if got := w.Len(); got != n-1 {
		t.Errorf("Len: got %d, want %d", got, n-1)
	}
}

func TestWatchGone(t *testing.T) {
	w := newWatcher(t)
	defer w.Close()

	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	tok, err := proc.TokenOf(pid)
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil {
		t.Fatalf("TokenOf(child): %v", err)
	}

	cancel, err := w.Watch(pid, tok, func() { t.Errorf("onExit called for a watch that failed") })
	if !errors.Is(err, proc.ErrGone) && !errors.Is(err, proc.ErrTokenMismatch) {
		t.Errorf("Watch(reaped pid): got %v, want %v or %v", err, proc.ErrGone, proc.ErrTokenMismatch)
	}
	if cancel != nil {
		t.Errorf("cancel of a failed Watch: got non-nil, want nil")
	}
	if got := w.Len(); got != 0 {
		t.Errorf("Len: got %d, want 0", got)
	}
}

func TestWatchWrongToken(t *testing.T) {
	w := newWatcher(t)
	defer w.Close()
	cmd, tok, _ := startChild(t)
	bad := proc.Token{BootID: tok.BootID, StartTicks: tok.StartTicks + 1}
	if _, err := w.Watch(cmd.Process.Pid, bad, func() {}); !errors.Is(err, proc.ErrTokenMismatch) {
		t.Errorf("Watch with a wrong token: got %v, want %v", err, proc.ErrTokenMismatch)
	}
}

func TestWatchCancel(t *testing.T) {
	w := newWatcher(t)
	runWatcher(t, w)
	cmd, tok, reaped := startChild(t)

	exited := make(chan struct{})
	cancel, err := w.Watch(cmd.Process.Pid, tok, func() { close(exited) })
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	cancel()
	cancel() // idempotent
	if got := w.Len(); got != 0 {
		t.Errorf("Len after cancel: got %d, want 0", got)
	}
	cmd.Process.Kill()
	select {
	case <-reaped:
	case <-time.After(eventWait):
		t.Fatalf("child not reaped within %v", eventWait)
	}
	if got := w.Len(); got != 0 {
		t.Errorf("Len after exit: got %d, want 0", got)
	}
	select {
	case <-exited:
		t.Errorf("onExit called after cancel")
	default:
	}
}

func TestWatcherRunReturnsOnCancel(t *testing.T) {
	w := newWatcher(t)
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: got %v, want nil", err)
		}
	case <-time.After(eventWait):
		t.Fatalf("Run did not return within %v of cancel", eventWait)
	}
}

func TestWatcherClose(t *testing.T) {
	w := newWatcher(t)
	cmd, tok, _ := startChild(t)
	if _, err := w.Watch(cmd.Process.Pid, tok, func() {}); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("Close: got %v, want nil", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	if got := w.Len(); got != 0 {
		t.Errorf("Len after Close: got %d, want 0", got)
	}
	if _, err := w.Watch(cmd.Process.Pid, tok, func() {}); err == nil {
		t.Errorf("Watch after Close: got nil error, want an error")
	}
}

// TestIdentifyRefusesInitAsHost: a shim re-parented to init has lost its
// host; a session tied to init would never end.
func TestIdentifyRefusesInitAsHost(t *testing.T) {
	if _, err := Identify(1, "", nil); !errors.Is(err, ErrHostGone) {
		t.Fatalf("Identify(1): got %v, want ErrHostGone", err)
	}
	id, err := Identify(1, "explicit-1", nil)
	if err != nil || id.ID != "explicit-1" {
		t.Fatalf("Identify(1, explicit): got %+v, %v; want the explicit session", id, err)
	}
}
