//go:build linux

package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWrapperShellIsNotAPipeHolder: hosts often launch `sh -c "supervisor
// run ..."`; the shell holds the host's pipe too, but it is older than the
// server and none of its tree: when the server exits, the shell lives on.
func TestWrapperShellIsNotAPipeHolder(t *testing.T) {
	in := newInstance(t)
	cmd := exec.Command("/bin/sh", "-c", `"$BIN" run -- "$BIN" _fixture echo --ready; echo wrapper-alive`)
	cmd.Env = append(in.env, "BIN="+bin)
	stdin, _ := cmd.StdinPipe()
	stdout, w, err := os.Pipe() // ours: Wait would close a StdoutPipe
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() { cmd.Process.Kill(); <-done }()
	r := bufio.NewReader(stdout)
	if l, err := readLine(r, wait); err != nil || !strings.HasPrefix(l, "ready") {
		t.Fatalf("got %q, %v", l, err)
	}
	stdin.Close() // the server exits on EOF; its leftovers cascade runs
	if l, err := readLine(r, wait); err != nil || l != "wrapper-alive" {
		t.Fatalf("got %q, %v; want the wrapper shell to outlive its server", l, err)
	}
}

// TestSameSessionIDInTwoInstances: ending session x in one daemon instance
// leaves another instance's session x alone.
func TestSameSessionIDInTwoInstances(t *testing.T) {
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

// TestConcurrentStartsUnderTheCap: two `run --name x` started at once in
// one session leave exactly one instance, never none.
func TestConcurrentStartsUnderTheCap(t *testing.T) {
	in := newInstance(t)
	for round := 0; round < 3; round++ {
		sess := "race-" + string(rune('a'+round))
		var shims [2]*shimProc
		var wg sync.WaitGroup
		for i := range shims {
			shims[i] = in.startShim("--session", sess, "--name", "x", "--", bin, "_fixture", "sleep")
		}
		// The older one may be stopped before it prints its ready line
		// (its shim then ends with EOF): at least one must print it.
		ready := make([]bool, 2)
		for i := range shims {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				line, err := readLine(shims[i].stdout, wait)
				ready[i] = err == nil && strings.HasPrefix(line, "ready ")
			}(i)
		}
		wg.Wait()
		if !ready[0] && !ready[1] {
			t.Fatalf("round %d: neither instance printed its ready line", round)
		}
		// One of them is stopped; exactly one remains.
		deadline := time.Now().Add(wait)
		for {
			live := 0
			for _, p := range in.mustProcesses(false) {
				if p.Session == sess {
					live++
				}
			}
			if live == 1 {
				break
			}
			if live == 0 {
				t.Fatalf("round %d: both instances were stopped", round)
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d instances still live", round, live)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestInheritedKeepIsDropped: SUPERVISOR_KEEP in the host's environment
// does not reach the server (it would spare its whole tree).
func TestInheritedKeepIsDropped(t *testing.T) {
	in := newInstance(t)
	cmd := in.command("run", "--", bin, "_fixture", "env")
	cmd.Env = append(cmd.Env, "SUPERVISOR_KEEP=1")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "SUPERVISOR_KEEP") {
		t.Fatalf("the server inherited SUPERVISOR_KEEP:\n%s", out)
	}
	if !strings.Contains(string(out), "SUPERVISOR_INSTANCE=") {
		t.Fatalf("the server has no instance marker:\n%s", out)
	}
}

// TestInitGivesItsCommandTheTerminal: with a tty, init's command is in the
// foreground and can read it (as a background job it would stop).
func TestInitGivesItsCommandTheTerminal(t *testing.T) {
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
