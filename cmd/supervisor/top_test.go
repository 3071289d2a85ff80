//go:build linux

package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// top without a terminal prints its table: every running server, sorted
// as asked (a spinning server first by CPU), as many times as asked.
func TestTopPlain(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	spin := in.startShim("--session", "top", "--name", "spinner", "--", "sh", "-c", `echo ready $$; while :; do :; done`)
	spin.readyPID(t)
	idle := in.startShim("--session", "top", "--name", "idler", "--", "sh", "-c", "echo ready $$; exec sleep 600")
	idle.readyPID(t)
	// Both are sampled as the spinner first by CPU before top sorts by
	// it: a just-started idler's CPU since its start (its exec) can be
	// the higher at first.
	waitCond(t, func() error {
		cpu := map[string]float64{}
		for _, p := range in.mustProcesses(false) {
			if p.Usage != nil {
				cpu[p.Name] = p.Usage.CPUPercent
			}
		}
		if cpu["spinner"] <= cpu["idler"]+10 {
			return fmt.Errorf("sampled CPU: spinner %.1f%%, idler %.1f%%", cpu["spinner"], cpu["idler"])
		}
		return nil
	})
	out := in.mustRun("top", "--sort", "cpu", "--count", "2", "--interval", "1100ms")
	tables := strings.Split(out, "supervisor top - ")
	if len(tables) != 3 {
		t.Fatalf("top --count 2 printed %d tables, want 2:\n%s", len(tables)-1, out)
	}
	for _, table := range tables[1:] {
		s, i := strings.Index(table, "spinner"), strings.Index(table, "idler")
		if !strings.Contains(table, "sorted by cpu") || s < 0 || i < 0 || s > i || !strings.Contains(table, "2 servers") {
			t.Errorf("table:\n%s\nwant both servers, the spinner first by CPU", table)
		}
	}
	if _, stderr, code := in.run("top", "--sort", "size"); code == 0 || !strings.Contains(stderr, "--sort") {
		t.Errorf("top --sort size: code %d, %q; want an error naming --sort", code, stderr)
	}
}

// top in a real terminal (tmux): it shows the servers, re-sorts on a key
// and exits cleanly on q.
func TestTopInTmux(t *testing.T) {
	t.Parallel()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		npmMissing(t, "tmux is not installed (.ci/run installs it as root)")
	}
	in := newInstance(t)
	s := in.startShim("--session", "tty", "--name", "watched", "--", "sh", "-c", "echo ready $$; exec sleep 600")
	s.readyPID(t)
	sock := filepath.Join(in.state, "tmux.sock")
	tm := func(args ...string) (string, error) {
		out, err := exec.Command(tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { tm("kill-server") })
	var env []string
	for _, kv := range in.env {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SUPERVISOR_") || k == "PATH" || k == "HOME" {
			env = append(env, shellQuote(kv))
		}
	}
	command := "env " + strings.Join(env, " ") + " TERM=xterm " + shellQuote(bin) + " top --interval 300ms"
	if out, err := tm("new-session", "-d", "-s", "top", "-x", "150", "-y", "30", command); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	screen := func(want string) string {
		t.Helper()
		deadline := time.Now().Add(wait)
		var last string
		for time.Now().Before(deadline) {
			last, _ = tm("capture-pane", "-p", "-t", "top")
			if strings.Contains(last, want) {
				return last
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("top's screen never showed %q:\n%s", want, last)
		return ""
	}
	if got := screen("watched"); !strings.Contains(got, "sorted by mem") || !strings.Contains(got, "MEM") {
		t.Errorf("screen:\n%s\nwant the table sorted by memory", got)
	}
	tm("send-keys", "-t", "top", "n")
	screen("sorted by name")
	tm("send-keys", "-t", "top", "q")
	deadline := time.Now().Add(wait)
	for {
		if _, err := tm("has-session", "-t", "top"); err != nil {
			break // top exited, and its window with it
		}
		if time.Now().After(deadline) {
			out, _ := tm("capture-pane", "-p", "-t", "top")
			t.Fatalf("top did not exit on q:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
