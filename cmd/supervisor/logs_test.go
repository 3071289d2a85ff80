//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 29: `logs` without a name (every server's log, labelled), -f over
// every log (and those that appear), --timestamps, --since, --tail, and a
// server that has written nothing yet.

// sayer is a stdio server under `supervisor run --name NAME` that repeats
// each line of its stdin on its stderr (so into its log); a line
// "partial:X" it writes as X without a line end. With greet, it first says
// hello-NAME.
type sayer struct {
	t    *testing.T
	name string
	id   string
	shim *shimProc
}

const sayerScript = `[ "$1" = greet ] && echo "hello-$0" >&2
while read -r l; do
	case $l in
	partial:*) printf '%s' "${l#partial:}" >&2 ;;
	*) echo "$l" >&2 ;;
	esac
done`

func startSayer(t *testing.T, in *instance, name string, greet bool) *sayer {
	t.Helper()
	mode := "quiet"
	if greet {
		mode = "greet"
	}
	s := &sayer{t: t, name: name, shim: in.startShim("--name", name, "--", "sh", "-c", sayerScript, name, mode)}
	waitCond(t, func() error {
		procs, err := in.processes(false) // fails until run has started the daemon
		if err != nil {
			return fmt.Errorf("ps: %w", err)
		}
		for _, p := range procs {
			if p.Name == name && p.PID > 0 {
				s.id = p.ID
				cleanupByPID(t, p.PID)
				return nil
			}
		}
		return fmt.Errorf("no running process named %s", name)
	})
	if greet {
		s.logged(in, "hello-"+name)
	}
	return s
}

// label is how `logs` without a name prefixes the sayer's lines.
func (s *sayer) label() string { return s.name + "@" + s.id }

// say makes the server write line to its stderr.
func (s *sayer) say(line string) {
	s.t.Helper()
	if _, err := fmt.Fprintln(s.shim.stdin, line); err != nil {
		s.t.Fatalf("%s: write its stdin: %v", s.name, err)
	}
}

// logged waits until the server's log ends with line.
func (s *sayer) logged(in *instance, line string) {
	s.t.Helper()
	path := filepath.Join(in.state, "logs", "run", s.name+"@"+s.id+".log")
	waitCond(s.t, func() error {
		b, err := os.ReadFile(path)
		if !strings.HasSuffix(string(b), line+"\n") {
			return fmt.Errorf("%s: %q (%v), want it to end with %q", path, b, err, line)
		}
		return nil
	})
}

// aligned matches a label's padding before " | ": labels are padded to
// the longest, which these tests do not pin down.
var aligned = regexp.MustCompile(`(?m)^(\S+) +\| `)

func unpad(s string) string { return aligned.ReplaceAllString(s, "$1 | ") }

// unknownTime is what --timestamps prints for a line already in the log.
func unknownTime() string { return fmt.Sprintf("%-*s ", len(time.Now().Format(stampLayout)), "-") }

// TestLogsEveryServerAndFlags covers `logs` without -f: every server's
// log with labels, --tail/--lines per server, --timestamps on lines
// already there, a server that has written nothing, and the errors.
func TestLogsEveryServerAndFlags(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	// A shared server: its log is NAME-PORT.log, its id the daemon's.
	port := strconv.Itoa(freePort(t))
	web, errOut, code := in.ensure(t, "--port", port, "--name", "web", "--health", "none",
		"--", "sh", "-c", "echo hello-web >&2; exec sleep 120")
	if code != 0 {
		t.Fatalf("ensure: exit %d: %s", code, errOut)
	}
	cleanupByPID(t, web.PID)
	waitCond(t, func() error {
		if b, err := os.ReadFile(filepath.Join(in.state, "logs", "web-"+port+".log")); string(b) != "hello-web\n" {
			return fmt.Errorf("web's log: %q (%v), want hello-web", b, err)
		}
		return nil
	})
	w := "web@" + web.ID
	quiet := startSayer(t, in, "quiet", false)
	alpha := startSayer(t, in, "alpha", true)
	alpha.say("two-alpha")
	alpha.logged(in, "two-alpha")
	beta := startSayer(t, in, "beta", true)
	beta.say("two-beta")
	beta.logged(in, "two-beta")
	a, b := alpha.label(), beta.label()

	tests := []struct {
		name     string
		args     []string
		wantOut  string
		wantCode int
		wantErr  []string
	}{
		{"every server, least recently written first", []string{"logs"},
			w + " | hello-web\n" + a + " | hello-alpha\n" + a + " | two-alpha\n" + b + " | hello-beta\n" + b + " | two-beta\n", 0, nil},
		{"--tail counts per server", []string{"logs", "--tail", "1"}, w + " | hello-web\n" + a + " | two-alpha\n" + b + " | two-beta\n", 0, nil},
		{"--lines counts per server", []string{"logs", "--lines", "1"}, w + " | hello-web\n" + a + " | two-alpha\n" + b + " | two-beta\n", 0, nil},
		{"one shared server", []string{"logs", "web"}, "hello-web\n", 0, nil},
		{"one server, --tail", []string{"logs", "alpha", "--tail", "1"}, "two-alpha\n", 0, nil},
		{"one server by id, --lines", []string{"logs", alpha.id, "--lines", "1"}, "two-alpha\n", 0, nil},
		{"--timestamps on lines already there", []string{"logs", "beta", "--timestamps"},
			unknownTime() + "hello-beta\n" + unknownTime() + "two-beta\n", 0, nil},
		{"--timestamps every server", []string{"logs", "-t", "--tail", "1"},
			w + " | " + unknownTime() + "hello-web\n" + a + " | " + unknownTime() + "two-alpha\n" + b + " | " + unknownTime() + "two-beta\n", 0, nil},
		{"a known server with no output yet", []string{"logs", "quiet"}, "", 0, nil},
		{"a known server by id with no output yet", []string{"logs", quiet.id}, "", 0, nil},
		{"an unknown name", []string{"logs", "nosuch"}, "", 1,
			[]string{`no captured output for "nosuch"`, "hint: see `supervisor ps --all`"}},
		{"--session without a name", []string{"logs", "--session", "s1"}, "", 2, []string{"--session needs a server's ID|NAME"}},
		{"negative --tail", []string{"logs", "--tail", "-1"}, "", 1, []string{"--tail -1: must not be negative"}},
		{"negative --lines", []string{"logs", "alpha", "--lines", "-2"}, "", 1, []string{"--lines -2: must not be negative"}},
		{"negative --since", []string{"logs", "--since", "-1h"}, "", 1, []string{"--since -1h0m0s: must not be negative"}},
		{"--since not a duration", []string{"logs", "--since", "yesterday"}, "", 2, []string{"yesterday"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := in.run(tt.args...)
			if code != tt.wantCode {
				t.Fatalf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", tt.args, code, tt.wantCode, out, errOut)
			}
			if got := unpad(out); got != tt.wantOut {
				t.Errorf("%v: stdout\n%q\nwant\n%q", tt.args, got, tt.wantOut)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(errOut, want) {
					t.Errorf("%v: stderr %q, want it to hold %q", tt.args, errOut, want)
				}
			}
		})
	}
}

// TestLogsSince: --since leaves out whole files last written before its
// cutoff (a log and its rotated files), as lines carry no time. The
// files' ages are set with Chtimes: waiting hours is no test.
func TestLogsSince(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	old := startSayer(t, in, "old", true)
	recent := startSayer(t, in, "recent", true)
	now := time.Now()
	oldLog := filepath.Join(in.state, "logs", "run", "old@"+old.id+".log")
	if err := os.Chtimes(oldLog, now.Add(-2*time.Hour), now.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// A rotated file of recent's log, last written 4 hours ago.
	backup := filepath.Join(in.state, "logs", "run", "recent@"+recent.id+".log.1")
	if err := os.WriteFile(backup, []byte("rotated-away\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(backup, now.Add(-4*time.Hour), now.Add(-4*time.Hour)); err != nil {
		t.Fatal(err)
	}
	o, r := old.label(), recent.label()

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"every server, a file too old left out", []string{"logs", "--since", "1h", "--lines", "0"}, r + " | hello-recent\n"},
		{"every server, no cutoff", []string{"logs", "--lines", "0"},
			o + " | hello-old\n" + r + " | rotated-away\n" + r + " | hello-recent\n"},
		{"every server, a cutoff older than all", []string{"logs", "--since", "5h", "--lines", "0"},
			o + " | hello-old\n" + r + " | rotated-away\n" + r + " | hello-recent\n"},
		{"every server, between the files' times", []string{"logs", "--since", "3h", "--lines", "0"},
			o + " | hello-old\n" + r + " | hello-recent\n"},
		{"one server, all too old: nothing, no error", []string{"logs", "old", "--since", "1h"}, ""},
		{"one server, recent enough", []string{"logs", "old", "--since", "3h"}, "hello-old\n"},
		{"one server, its old rotated file left out", []string{"logs", "recent", "--since", "1h", "--lines", "0"}, "hello-recent\n"},
		{"one server, its rotated file kept", []string{"logs", "recent", "--since", "5h", "--tail", "0"}, "rotated-away\nhello-recent\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unpad(in.mustRun(tt.args...)); got != tt.want {
				t.Errorf("%v:\n%q\nwant\n%q", tt.args, got, tt.want)
			}
		})
	}
}

// logsProc is a running `supervisor logs -f ...` and its output lines.
type logsProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

func (in *instance) startLogs(t *testing.T, args ...string) *logsProc {
	t.Helper()
	cmd := in.command(append([]string{"logs"}, args...)...)
	cmd.Stderr = &prefixWriter{t: t, prefix: "logs: "}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lp := &logsProc{t: t, cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	// The reader ends at the pipe's EOF: when the process exits, or is
	// killed by the cleanup below.
	go func() {
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				lp.lines <- unpad(strings.TrimSuffix(line, "\n"))
			}
			if err != nil {
				close(lp.lines)
				return
			}
		}
	}()
	go func() { cmd.Wait(); close(lp.done) }()
	t.Cleanup(func() {
		select {
		case <-lp.done:
		default:
			cmd.Process.Kill()
			<-lp.done
		}
	})
	return lp
}

// next returns the next output line.
func (lp *logsProc) next() string {
	lp.t.Helper()
	select {
	case line, ok := <-lp.lines:
		if !ok {
			lp.t.Fatal("logs -f ended its output")
		}
		return line
	case <-time.After(wait):
		lp.t.Fatalf("logs -f printed no line within %v", wait)
	}
	return ""
}

// expect reads the next len(want) lines, in any order (two servers'
// logs are read in turn), and checks they are want.
func (lp *logsProc) expect(want ...string) {
	lp.t.Helper()
	left := map[string]int{}
	for _, w := range want {
		left[w]++
	}
	for range want {
		line := lp.next()
		if left[line] == 0 {
			lp.t.Fatalf("logs -f printed %q, want one of %q", line, want)
		}
		left[line]--
	}
}

// interrupt sends SIGINT and checks that logs -f ends with status 0.
func (lp *logsProc) interrupt() {
	lp.t.Helper()
	lp.cmd.Process.Signal(os.Interrupt)
	select {
	case <-lp.done:
	case <-time.After(wait):
		lp.t.Fatalf("logs -f still runs %v after SIGINT", wait)
	}
	if code := lp.cmd.ProcessState.ExitCode(); code != 0 {
		lp.t.Errorf("logs -f ended with exit %d on SIGINT, want 0", code)
	}
}

// stampedAt parses a line under --timestamps, "TIME rest", checking that
// TIME is in [from, to] (at the millisecond --timestamps prints).
func stampedAt(t *testing.T, line string, from, to time.Time) string {
	t.Helper()
	stamp, rest, _ := strings.Cut(line, " ")
	at, err := time.Parse(stampLayout, stamp)
	if err != nil {
		t.Fatalf("line %q: no time: %v", line, err)
	}
	if at.Before(from.Truncate(time.Millisecond)) || at.After(to) {
		t.Errorf("line %q: time %v, want between %v and %v", line, at, from, to)
	}
	return rest
}

// TestLogsFollow covers -f: every server's log at once, with one that
// appears while following; --timestamps on followed lines; a server that
// has not written yet; and the end on SIGINT. Each case has an instance
// of its own.
func TestLogsFollow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, in *instance)
	}{
		{"every server, and one that appears", func(t *testing.T, in *instance) {
			alpha := startSayer(t, in, "alpha", true)
			beta := startSayer(t, in, "beta", true)
			a, b := alpha.label(), beta.label()
			lp := in.startLogs(t, "-f", "--tail", "1")
			lp.expect(a+" | hello-alpha", b+" | hello-beta")
			alpha.say("x-alpha")
			beta.say("x-beta")
			lp.expect(a+" | x-alpha", b+" | x-beta")
			gamma := startSayer(t, in, "gamma", true)
			lp.expect(gamma.label() + " | hello-gamma")
			gamma.say("x-gamma")
			alpha.say("y-alpha")
			lp.expect(gamma.label()+" | x-gamma", a+" | y-alpha")
			// A line without its end yet waits for it, then is printed
			// whole; one still unended when logs ends is printed ended.
			beta.say("partial:half-")
			beta.say("whole")
			lp.expect(b + " | half-whole")
			beta.say("partial:unended")
			waitCond(t, func() error {
				log, _ := os.ReadFile(filepath.Join(in.state, "logs", "run", b+".log"))
				if !strings.HasSuffix(string(log), "whole\nunended") {
					return fmt.Errorf("beta's log %q lacks the unended line", log)
				}
				return nil
			})
			lp.interrupt()
			lp.expect(b + " | unended")
		}},
		{"--timestamps on every server's followed lines", func(t *testing.T, in *instance) {
			alpha := startSayer(t, in, "alpha", true)
			beta := startSayer(t, in, "beta", true)
			a, b := alpha.label(), beta.label()
			lp := in.startLogs(t, "-f", "--timestamps")
			lp.expect(a+" | "+unknownTime()+"hello-alpha", b+" | "+unknownTime()+"hello-beta")
			for _, s := range []*sayer{alpha, beta, alpha} {
				from := time.Now()
				s.say("stamped-" + s.name)
				line := lp.next()
				label, rest, _ := strings.Cut(line, " | ")
				if got := stampedAt(t, rest, from, time.Now()); label != s.label() || got != "stamped-"+s.name {
					t.Errorf("line %q, want %s | TIME stamped-%s", line, s.label(), s.name)
				}
			}
			lp.interrupt()
		}},
		{"one server with no output yet waits for it", func(t *testing.T, in *instance) {
			late := startSayer(t, in, "late", false)
			lp := in.startLogs(t, "late", "-f", "-t")
			late.say("first")
			// Written before or after logs looked: already there (no
			// time known) or followed (the time it was read).
			if line := lp.next(); line != unknownTime()+"first" && !strings.HasSuffix(line, " first") {
				t.Errorf("got %q, want first", line)
			}
			from := time.Now()
			late.say("second")
			if got := stampedAt(t, lp.next(), from, time.Now()); got != "second" {
				t.Errorf("got %q, want second", got)
			}
			lp.interrupt()
		}},
		{"one server, without --timestamps, as before", func(t *testing.T, in *instance) {
			solo := startSayer(t, in, "solo", true)
			lp := in.startLogs(t, "solo", "-f")
			if line := lp.next(); line != "hello-solo" {
				t.Fatalf("got %q, want hello-solo", line)
			}
			solo.say("more")
			if line := lp.next(); line != "more" {
				t.Errorf("got %q, want more", line)
			}
			lp.interrupt()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newInstance(t)) })
	}
}
