//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"bufio"
	"os"
)

// runScript runs a shell script with the instance's environment and $BIN,
// its stdout and stderr into pipes the test reads, and returns them and
// its exit code once the script and every holder of those pipes are done.
func runScript(t *testing.T, in *instance, script string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append(slices.Clone(in.env), "BIN="+bin) // runs share in.env: never append to it in place
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e // pipes: os/exec copies them until EOF
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("script: %v", err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	case <-time.After(wait):
		cmd.Process.Kill()
		<-done
		t.Fatalf("script did not finish within %v; stdout %q stderr %q", wait, o.String(), e.String())
	}
	return "", "", -1
}

// Issue 27: a wrapper shell's later commands share the server's stdout
// pipe and start after it; neither proves them the server's, and the
// leftovers sweep must never kill them. 100 of 100.
func TestWrapperCommandsAreNeverLeftovers(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	const rounds, workers = 100, 4
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < rounds; i += workers {
				out, errOut, code := runScript(t, in, `"$BIN" run -- sh -c 'echo out'; sleep 0.3; echo tail`)
				if code != 0 || out != "out\ntail\n" {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("round %d: exit %d, stdout %q, stderr %q", i, code, out, errOut))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d rounds lost the wrapper's later commands:\n%s", len(failures), rounds, strings.Join(failures, "\n"))
	}
	if ev := in.mustRun("events"); strings.Contains(ev, "holder") && strings.Contains(ev, "killed") {
		t.Fatalf("a pipe holder was killed:\n%s", ev)
	}
}

// Issue 27: a script's second run shares its stderr with the first's
// server, which killed itself; the second run is no leftover of it, and
// reports its own status (127: not found), not 137.
func TestNextRunIsNotThePreviousServersLeftover(t *testing.T) {
	t.Parallel()
	// Three rounds, each on its own instance: the first server's SIGKILL
	// within its start period counts against the breaker.
	var in *instance
	for i := 0; i < 3; i++ {
		in = newInstance(t)
		_, errOut, code := runScript(t, in, `"$BIN" run -- sh -c 'kill -9 $$'; "$BIN" run -- /nonexistent/server; echo "second=$?" >&2`)
		if !strings.Contains(errOut, "second=127") {
			t.Fatalf("round %d: exit %d, stderr %q; want the second run to exit 127 (not found)", i, code, errOut)
		}
	}
	// And with every stdio from /dev/null inside a capture, as timing loops do.
	_, errOut, _ := runScript(t, in, `x=$("$BIN" run -- /bin/true </dev/null >/dev/null 2>/dev/null; echo inner-alive); echo "$x" >&2`)
	if !strings.Contains(errOut, "inner-alive") {
		t.Fatalf("the capture subshell around a run was killed: stderr %q", errOut)
	}
}

// On the path where the daemon spawns servers, every server is the
// daemon's child, as an orphan it adopted would be: a server sharing the
// first one's stdout is no leftover of it. And under `supervisor init`
// (the daemon as a container's subreaper) the daemon adopts the host's
// own orphans: those prove nothing either.
func TestOtherServersAndInitOrphansAreNotLeftovers(t *testing.T) {
	t.Parallel()
	t.Run("shim-path", func(t *testing.T) {
		in := newInstance(t)
		in.env = append(in.env, "SUPERVISOR_IN_PLACE=off")
		for i := 0; i < 3; i++ {
			out, errOut, code := runScript(t, in, `"$BIN" run -- sh -c 'sleep .5; echo a' & sleep .2; "$BIN" run -- sh -c 'sleep 1.5; echo b'; wait`)
			if code != 0 || !strings.Contains(out, "a\n") || !strings.Contains(out, "b\n") {
				t.Fatalf("round %d: exit %d, stdout %q, stderr %q; want both servers' lines", i, code, out, errOut)
			}
		}
	})
	t.Run("init", func(t *testing.T) {
		in := newInstance(t)
		out, errOut, code := runScript(t, in, `"$BIN" init -- sh -c 'sh -c "\"$BIN\" run -- sh -c \"sleep .6; echo a\" & sleep .2; (sleep 1; echo tail) & exit"; sleep 2.5'`)
		if !strings.Contains(out, "tail") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want the wrapper's background job to print tail", code, out, errOut)
		}
	})
}

// TestWrapperShellIsNotAPipeHolder: hosts often launch `sh -c "supervisor
// run ..."`; the shell holds the host's pipe too, but it is older than the
// server and none of its tree: when the server exits, the shell lives on.
func TestWrapperShellIsNotAPipeHolder(t *testing.T) {
	t.Parallel()
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

// TestInheritedKeepIsDropped: SUPERVISOR_KEEP in the host's environment
// does not reach the server (it would spare its whole tree).
func TestInheritedKeepIsDropped(t *testing.T) {
	t.Parallel()
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
