//go:build unix

package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/client"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

type tour struct {
	w     io.Writer
	exe   string
	dir   string
	paths api.Paths
	env   []string
	start time.Time

	started []server // every server the tour started, for its own cleanup
}

// killLeftovers makes sure, by PID and token, that a tour that failed half
// way leaves nothing running.
func (t *tour) killLeftovers() {
	for _, s := range t.started {
		if h, err := proc.OpenHandle(s.pid, s.tok); err == nil {
			h.Signal(syscall.SIGKILL)
			h.Close()
		}
	}
}

// waitState waits (bounded) until every record listed by `supervisor WHAT
// --all --json` (ps or sessions) is in state, so the tour prints settled
// output: the final commit follows a process's exit by moments.
func (t *tour) waitState(ctx context.Context, what, state string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		out, err := t.cli(what, "--json")
		if what == "sessions" {
			out, err = t.cli(what, "--all", "--json")
		}
		var recs []struct {
			State string `json:"state"`
		}
		if err == nil && json.Unmarshal([]byte(out), &recs) == nil && len(recs) > 0 {
			settled := true
			for _, r := range recs {
				settled = settled && r.State == state
			}
			if settled {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Run runs the tour, writing it to w.
func Run(ctx context.Context, w io.Writer) (err error) {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	dir, err := os.MkdirTemp("", "supervisor-demo-")
	if err != nil {
		return fmt.Errorf("create a temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	t := &tour{w: w, exe: exe, dir: dir, start: time.Now()}
	t.paths = api.Paths{StateDir: filepath.Join(dir, "state"), Socket: filepath.Join(dir, "s.sock")}
	t.env = append(os.Environ(), api.EnvStateDir+"="+t.paths.StateDir, api.EnvSocket+"="+t.paths.Socket, "SUPERVISOR_SESSION=")
	// Stops whatever is left, through the cascade. A tour that failed has
	// said why; one that did not must not leave a daemon running unsaid.
	defer func() {
		if out, serr := t.cli("daemon", "stop"); serr != nil && err == nil {
			err = fmt.Errorf("supervisor daemon stop: %w: %s", serr, strings.TrimSpace(out))
		}
	}()

	t.say("1. A private daemon in %s", dir)
	if err := client.Launch(ctx, exe, t.paths, t.env); err != nil {
		return err
	}
	t.show("status")

	defer t.killLeftovers()
	if err := t.escapedGrandchild(ctx); err != nil {
		return err
	}

	t.say("3. A fake agent host starts three MCP servers through `supervisor run`:")
	t.say("   files (exits on SIGTERM), stubborn (ignores SIGTERM, --grace 1s), npx-like (exits on")
	t.say("   stdin EOF, leaving a setsid grandchild that holds the host's pipe)")
	host, servers, err := t.startHost("agent-host",
		[]string{"run", "--name", "files", "--", exe, "_fixture", "sleep"},
		[]string{"run", "--name", "stubborn", "--grace", "1s", "--", exe, "_fixture", "ignore-term"},
		[]string{"run", "--name", "npx-like", "--", exe, "_fixture", "escape"},
	)
	if err != nil {
		return err
	}
	t.show("ps")

	t.say("4. The host is SIGKILLed (pid %d): no chance to clean up its children.", host.Process.Pid)
	watches := make([]chan time.Time, len(servers))
	for i, s := range servers {
		watches[i] = make(chan time.Time, 1)
		go func(s server, ch chan time.Time) { ch <- waitGone(s.pid, s.tok, 30*time.Second) }(s, watches[i])
	}
	killed := time.Now()
	host.Process.Kill()
	_ = host.Wait() // reaps the host: its status is that SIGKILL
	var last time.Time
	for i, s := range servers {
		gone := <-watches[i]
		if gone.IsZero() {
			return fmt.Errorf("server %s (pid %d) still running 30s after its host died", s.name, s.pid)
		}
		if gone.After(last) {
			last = gone
		}
		t.say("   %-32s pid %-7d gone %v after the host's death", s.name, s.pid, gone.Sub(killed).Round(time.Millisecond))
	}
	t.say("   last process gone after %v. npx-like left on stdin EOF and its escaped grandchild", last.Sub(killed).Round(time.Millisecond))
	t.say("   went with it; after the 500ms EOF grace files got SIGTERM and left; stubborn ignored")
	t.say("   it and got SIGKILL after its 1s grace.")
	t.waitState(ctx, "sessions", "ended")
	t.show("ps", "--all")
	t.show("sessions", "--all")

	t.say("5. The daemon crashes (SIGKILL) while another host's server runs; a new daemon re-adopts it.")
	host2, servers2, err := t.startHost("other-host", []string{"run", "--name", "survivor", "--", exe, "_fixture", "sleep"})
	if err != nil {
		return err
	}
	t.waitState(ctx, "ps", "running")
	dpid, err := t.daemonPID(ctx)
	if err != nil {
		return err
	}
	dtok, _ := proc.TokenOf(dpid)
	syscall.Kill(dpid, syscall.SIGKILL)
	waitGone(dpid, dtok, 30*time.Second)
	alive := proc.Verify(servers2[0].pid, servers2[0].tok) == nil
	t.say("   daemon %d killed; server survivor (pid %d) still running: %v", dpid, servers2[0].pid, alive)
	if err := client.Launch(ctx, exe, t.paths, t.env); err != nil {
		return err
	}
	t.show("ps")

	t.say("6. That host now exits; the re-adopted session ends and its server is stopped.")
	killed = time.Now()
	host2.Process.Kill()
	_ = host2.Wait() // reaps the host: its status is that SIGKILL
	gone := waitGone(servers2[0].pid, servers2[0].tok, 30*time.Second)
	if gone.IsZero() {
		return fmt.Errorf("re-adopted server (pid %d) still running 30s after its host died", servers2[0].pid)
	}
	t.say("   survivor pid %d gone after %v", servers2[0].pid, gone.Sub(killed).Round(time.Millisecond))
	t.say("")
	t.say("Done in %v. Nothing is left running; the temporary directory is removed.", time.Since(t.start).Round(time.Millisecond))
	return nil
}

type server struct {
	name string
	pid  int
	tok  proc.Token
}

// startHost starts the host fixture under a non-launcher name, one
// `supervisor ARGS...` child per element of runs, and waits until every
// server said it is ready.
func (t *tour) startHost(name string, runs ...[]string) (*exec.Cmd, []server, error) {
	link := filepath.Join(t.dir, name)
	if err := os.Symlink(t.exe, link); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, nil, err
	}
	// The host fixture starts one command N times; a tiny shell-free
	// dispatcher would be overkill here, so start one host per server set
	// through the fixture's "multi" form: each run separated by "::".
	args := []string{"_fixture", "host-multi", t.exe}
	for i, r := range runs {
		if i > 0 {
			args = append(args, "::")
		}
		args = append(args, r...)
	}
	cmd := exec.Command(link, args...)
	cmd.Env = t.env
	// The shims' own messages (a shim that lost the daemon in step 4 says
	// so) would interleave with the tour; its log has them.
	cmd.Stderr = io.Discard
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	_ = stdin // held open: the host lives until killed
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start fake host: %w", err)
	}
	r := bufio.NewReader(out)
	var servers []server
	for i := range runs {
		line, err := r.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			_ = cmd.Wait() // reaps the host killed above: its status is that SIGKILL
			return nil, nil, fmt.Errorf("fake host: server %d did not start: %w", i, err)
		}
		f := strings.Fields(line) // child I ready PID [GRANDCHILD]
		if len(f) < 4 || f[2] != "ready" {
			cmd.Process.Kill()
			_ = cmd.Wait() // reaps the host killed above: its status is that SIGKILL
			return nil, nil, fmt.Errorf("fake host: unexpected line %q", line)
		}
		for j, field := range f[3:] {
			pid, _ := strconv.Atoi(field)
			tok, _ := proc.TokenOf(pid)
			name := nameOf(runs[i])
			if j > 0 {
				name += " (its escaped grandchild)"
			}
			servers = append(servers, server{name: name, pid: pid, tok: tok})
			t.started = append(t.started, servers[len(servers)-1])
		}
	}
	return cmd, servers, nil
}

func nameOf(run []string) string {
	for i, a := range run {
		if a == "--name" && i+1 < len(run) {
			return run[i+1]
		}
	}
	return "?"
}

func (t *tour) daemonPID(ctx context.Context) (int, error) {
	c, err := api.Dial(ctx, t.paths.Socket)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.Daemon.PID, nil
}

// waitGone waits for the process to exit and returns when it did (zero if
// it did not within limit).
func waitGone(pid int, tok proc.Token, limit time.Duration) time.Time {
	if !proc.WaitExit(pid, tok, limit) {
		return time.Time{}
	}
	return time.Now()
}

func (t *tour) say(format string, args ...any) {
	fmt.Fprintf(t.w, format+"\n", args...)
}

// show runs a CLI command against the private daemon and prints it.
func (t *tour) show(args ...string) {
	t.say("\n$ supervisor %s", strings.Join(args, " "))
	out, _ := t.cli(args...)
	// As in say: a failed write to the terminal has nowhere to be reported.
	_, _ = io.WriteString(t.w, indent(out))
	t.say("")
}

func (t *tour) cli(args ...string) (string, error) {
	cmd := exec.Command(t.exe, args...)
	cmd.Env = t.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// escapedGrandchild shows the bug every seed project fought: a server that
// exits leaving a setsid grandchild on the host's stdout. Spawned directly,
// the host never sees EOF; through the supervisor it does.
func (t *tour) escapedGrandchild(ctx context.Context) error {
	t.say("2. A server exits on stdin EOF but leaves a setsid grandchild holding its stdout,")
	t.say("   as npx chains do. The host closes the server's stdin and waits for EOF:")
	for _, supervised := range []bool{false, true} {
		argv := []string{t.exe, "_fixture", "escape"}
		if supervised {
			argv = append([]string{t.exe, "run", "--session", "eof-demo", "--"}, argv...)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = t.env
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		// A pipe of our own, not StdoutPipe: Wait would close that.
		stdout, w, err := os.Pipe()
		if err != nil {
			return err
		}
		cmd.Stdout = w
		err = cmd.Start()
		w.Close()
		if err != nil {
			stdout.Close()
			return err
		}
		defer stdout.Close()
		r := bufio.NewReader(stdout)
		line, err := r.ReadString('\n')
		var srv, gc int
		if _, serr := fmt.Sscanf(line, "ready %d %d", &srv, &gc); err != nil || serr != nil {
			cmd.Process.Kill()
			_ = cmd.Wait() // reaps the server killed above: its status is that SIGKILL
			return fmt.Errorf("escape fixture: %q: %v", line, err)
		}
		gtok, _ := proc.TokenOf(gc)
		t.started = append(t.started, server{name: "grandchild", pid: gc, tok: gtok})
		eof := make(chan time.Time, 1)
		go func() {
			// A read error ends the stream for the host as EOF does:
			// when it ends is what the tour shows.
			_, _ = io.Copy(io.Discard, r)
			eof <- time.Now()
		}()
		closed := time.Now()
		stdin.Close()
		if !supervised {
			if err := cmd.Wait(); err != nil {
				return fmt.Errorf("escape fixture after stdin EOF: %w", err)
			}
			select {
			case <-eof:
				return errors.New("direct spawn reached EOF: the fixture proves nothing")
			case <-time.After(time.Second):
			}
			t.say("   spawned directly:   the server is gone, the grandchild (pid %d) holds the pipe:", gc)
			t.say("                       no EOF after 1s, nor ever (we kill the grandchild now)")
			syscall.Kill(gc, syscall.SIGKILL)
			<-eof
			continue
		}
		select {
		case at := <-eof:
			if err := cmd.Wait(); err != nil {
				return fmt.Errorf("supervisor run of the escape fixture after stdin EOF: %w", err)
			}
			t.say("   through supervisor: EOF %v after the host closed stdin; the leftover", at.Sub(closed).Round(time.Millisecond))
			t.say("                       grandchild (pid %d) was stopped with its server", gc)
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			_ = cmd.Wait() // reaps the shim killed above: its status is that SIGKILL
			return errors.New("no EOF through the supervisor within 30s")
		}
	}
	// The tour was the session's host: ending it settles it.
	if out, err := t.cli("session", "end", "eof-demo"); err != nil {
		return fmt.Errorf("supervisor session end eof-demo: %w: %s", err, strings.TrimSpace(out))
	}
	t.say("")
	return nil
}
