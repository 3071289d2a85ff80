//go:build linux

package main

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// initCmd runs `supervisor init -- sh -c SCRIPT`, in a new PID namespace
// (as PID 1) when root, else as a plain subreaper.
func initCmd(t *testing.T, in *instance, script string) *exec.Cmd {
	t.Helper()
	args := []string{bin, "init", "--grace", "1s", "--", "/bin/sh", "-c", script}
	if os.Getuid() == 0 {
		if _, err := exec.LookPath("unshare"); err == nil {
			args = append([]string{"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"}, args...)
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(in.env, "SUPERVISOR_STATE_DIR=", "SUPERVISOR_SOCKET=", "BIN="+bin)
	return cmd
}

func inNamespace() bool { return os.Getuid() == 0 }

func TestInitExitStatusAndZombies(t *testing.T) {
	t.Parallel()
	if !inNamespace() {
		t.Log("not root: init runs as a subreaper, not as PID 1 of a new PID namespace")
	}
	in := newInstance(t)
	tests := []struct {
		name   string
		script string
		code   int
		out    string
		errOut string
	}{
		{"exit status", "exit 7", 7, "", ""},
		{"killed by a signal", "kill -9 $$", 137, "", ""},
		// An orphan that exits is re-parented to init and must be reaped.
		{"zombies reaped", `( sleep 0.1 & ); sleep 0.6; echo zombies=$(grep -l '^State:.Z' /proc/[0-9]*/status 2>/dev/null | wc -l)`, 0, "zombies=0", ""},
		// A server started through the in-process daemon is supervised, and
		// what is left when the command exits is stopped.
		{"supervised and cleaned", `"$BIN" run --session s -- "$BIN" _fixture sleep >/dev/null & sleep 0.5; "$BIN" ps --json | grep -c '"state": "running"'; setsid sleep 1000 & exit 0`, 0, "1", "stopped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := initCmd(t, in, tt.script)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			if !strings.Contains(string(out), tt.out) {
				t.Fatalf("output %q, want %q", out, tt.out)
			}
			if !strings.Contains(stderr.String(), tt.errOut) {
				t.Fatalf("stderr %q, want %q (what was left is cascaded)", stderr.String(), tt.errOut)
			}
		})
	}
}

func TestInitForwardsSignals(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	cmd := initCmd(t, in, `trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done`)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()
	r := bufio.NewReader(stdout)
	if l, err := readLine(r, wait); err != nil || l != "ready" {
		t.Fatalf("got %q, %v; want ready", l, err)
	}
	// The init process: the child of unshare (PID 1 inside), or cmd itself.
	target := cmd.Process.Pid
	if inNamespace() {
		target = onlyChild(t, cmd.Process.Pid)
	}
	syscall.Kill(target, syscall.SIGTERM)
	if l, err := readLine(r, wait); err != nil || l != "got-term" {
		t.Fatalf("got %q, %v; want got-term (SIGTERM forwarded to the command)", l, err)
	}
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("init did not exit after its command")
	}
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("exit %d, want the command's 3", code)
	}
}

func onlyChild(t *testing.T, pid int) int {
	t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
		if f := strings.Fields(string(b)); len(f) == 1 {
			c, _ := strconv.Atoi(f[0])
			if _, err := proc.Stat(c); err == nil {
				return c
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("unshare %d has no single child", pid)
	return 0
}

// TestInitGivesItsCommandTheTerminal: with a tty, init's command is in the
// foreground and can read it (as a background job it would stop).
func TestInitGivesItsCommandTheTerminal(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("needs script(1) for a pseudo-terminal")
	}
	in := newInstance(t)
	cmd := exec.Command("script", "-qec", bin+" init -- head -n1", "/dev/null")
	cmd.Env = append(in.env, "SUPERVISOR_STATE_DIR=", "SUPERVISOR_SOCKET=")
	cmd.Stdin = strings.NewReader("typed-line\n")
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("init under a tty: %v; output %q", err, out.String())
		}
	case <-time.After(wait):
		cmd.Process.Kill()
		<-done
		t.Fatalf("init under a tty hung (its command stopped as a background job?); output %q", out.String())
	}
	if !strings.Contains(out.String(), "typed-line") {
		t.Fatalf("output %q, want the line read from the terminal", out.String())
	}
}
