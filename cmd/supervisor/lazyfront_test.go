//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// rawHost is a host speaking raw JSON-RPC to one `supervisor run`.
type rawHost struct {
	t     *testing.T
	pid   int
	tok   proc.Token
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}
	state *syscall.WaitStatus
}

func startRawHost(t *testing.T, in *instance, args ...string) *rawHost {
	t.Helper()
	cmd := in.command(append([]string{"run"}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &prefixWriter{t: t, prefix: "run: "}
	// Through in.via the run is the wrapper's child: the wrapper gets a
	// group of its own, which the cleanup ends, run included (startShim).
	if len(in.via) > 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &rawHost{t: t, pid: cmd.Process.Pid, stdin: stdin, lines: make(chan string, 64), done: make(chan struct{})}
	h.tok, _ = proc.TokenOf(h.pid)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	go func() {
		cmd.Wait()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		h.state = &ws
		close(h.done)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-h.done:
		case <-time.After(wait):
			if len(in.via) > 0 && proc.Verify(h.pid, h.tok) == nil {
				syscall.Kill(-h.pid, syscall.SIGKILL) // its own group, proven by its token
			}
			killByToken(h.pid, h.tok)
			<-h.done
		}
	})
	return h
}

// ask sends a request and returns its answer (notifications passed over).
func (h *rawHost) ask(id int, method, params string) result {
	h.t.Helper()
	r, errAnswer := h.tryAsk(id, method, params)
	if errAnswer != "" {
		h.t.Fatalf("%s: %s", method, errAnswer)
	}
	return r
}

// tryAsk is ask for a request that may be answered with an error: the
// error's answer, or the result.
func (h *rawHost) tryAsk(id int, method, params string) (result, string) {
	h.t.Helper()
	if params == "" {
		params = "{}"
	}
	h.send(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
	deadline := time.After(wait)
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				h.t.Fatalf("%s (id %d): the run closed its output", method, id)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				h.t.Fatalf("%s (id %d): %q: %v", method, id, line, err)
			}
			if _, ok := m["id"]; !ok {
				continue
			}
			if m["id"] != float64(id) {
				h.t.Fatalf("%s: answer %s, want id %d", method, line, id)
			}
			if m["error"] != nil {
				return nil, line
			}
			r, _ := m["result"].(map[string]any)
			return r, ""
		case <-deadline:
			h.t.Fatalf("%s (id %d): no answer within %v", method, id, wait)
		}
	}
}

func (h *rawHost) send(format string, args ...any) {
	h.t.Helper()
	if _, err := fmt.Fprintf(h.stdin, format+"\n", args...); err != nil {
		h.t.Fatalf("write to the run: %v", err)
	}
}

// handshake does what a host does at session start: initialize, then the
// tool list.
func (h *rawHost) handshake() {
	h.t.Helper()
	h.ask(0, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if tools := h.ask(1, "tools/list", "").String(); !strings.Contains(tools, "echo") {
		h.t.Fatalf("tools/list: %s", tools)
	}
}

// exit waits for the run to end and returns its wait status.
func (h *rawHost) exit() syscall.WaitStatus {
	h.t.Helper()
	select {
	case <-h.done:
		return *h.state
	case <-time.After(wait):
		h.t.Fatalf("run %d still running after %v", h.pid, wait)
	}
	return 0
}

type result map[string]any

func (r result) String() string { b, _ := json.Marshal(r); return string(b) }

// warmLazy fills the lazy cache of the fixture server started with args
// (a cold lazy run starts it at once) and waits until every record of
// that run is gone.
func warmLazy(t *testing.T, in *instance, args ...string) {
	t.Helper()
	h := startRawHost(t, in, args...)
	h.handshake()
	h.stdin.Close()
	if ws := h.exit(); ws.ExitStatus() != 0 {
		t.Fatalf("cold lazy run: %v", ws)
	}
	waitNoRecords(t, in)
}

// TestLazyFrontOutlivesTheDaemon: a lazy run answering its host from the
// cache needs no daemon until the first real request: a daemon killed
// meanwhile costs nothing, and the call after it starts the server under
// the next daemon and is answered, with the host's own handshake.
func TestLazyFrontOutlivesTheDaemon(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.writeConfig("linger = \"1s\"\n")
	args := []string{"--lazy", "--name", "front", "--", bin, "_fixture", "mcp"}
	warmLazy(t, in, args...)

	h := startRawHost(t, in, args...)
	h.handshake()
	if ps := in.mustProcesses(false); len(ps) != 0 {
		t.Fatalf("after the handshake from the cache: %d processes, want none: %+v", len(ps), ps)
	}
	pid := in.daemonPID()
	killByToken(pid, mustToken(t, pid))

	got := h.ask(2, "tools/call", `{"name":"echo","arguments":{"text":"after the crash"}}`)
	if s := got.String(); !strings.Contains(s, "after the crash") {
		t.Fatalf("the first call: %s", s)
	}
	got = h.ask(3, "tools/call", `{"name":"stats","arguments":{}}`)
	if s := got.String(); !strings.Contains(s, "initialize=1 initialized=1") {
		t.Fatalf("the server's stats %s, want it initialized once, by the host's handshake", s)
	}
	h.stdin.Close()
	if ws := h.exit(); ws.ExitStatus() != 0 {
		t.Fatalf("the run ended %v, want status 0", ws)
	}
	waitNoRecords(t, in)
}

// TestLazyFrontEnds: a host that ends a lazy run answered from the cache,
// by closing its input or by a signal, ends it as it would a server, and
// nothing is left of it.
func TestLazyFrontEnds(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.writeConfig("linger = \"1s\"\n")
	args := []string{"--lazy", "--name", "front", "--", bin, "_fixture", "mcp"}
	warmLazy(t, in, args...)

	eof := startRawHost(t, in, args...)
	eof.handshake()
	eof.stdin.Close()
	if ws := eof.exit(); ws.Signaled() || ws.ExitStatus() != 0 {
		t.Fatalf("after EOF: %v, want status 0", ws)
	}

	term := startRawHost(t, in, args...)
	term.handshake()
	if err := syscall.Kill(term.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if ws := term.exit(); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("after SIGTERM: %v, want killed by it", ws)
	}
	if ps := in.mustProcesses(false); len(ps) != 0 {
		t.Fatalf("%d processes left, want none: %+v", len(ps), ps)
	}
	if evs := in.eventsJSON(); hasEvent(evs, "lazy.start", "") {
		t.Fatal("a server was started for runs that only listed")
	}
}

// TestLazyFrontShared: shared lazy clients each answer from the cache,
// then meet on one broker and one server, each answered under its own
// ids.
func TestLazyFrontShared(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.writeConfig("linger = \"1s\"\n")
	args := []string{"--share", "--lazy", "--name", "front", "--", bin, "_fixture", "mcp"}
	warmLazy(t, in, args...)

	a, b := startRawHost(t, in, args...), startRawHost(t, in, args...)
	a.handshake()
	b.handshake()
	if ps := in.mustProcesses(false); len(ps) != 0 {
		t.Fatalf("after two handshakes from the cache: %d processes, want none", len(ps))
	}
	for i, h := range []*rawHost{a, b} {
		text := fmt.Sprintf("client %d", i)
		if s := (h.ask(7, "tools/call", fmt.Sprintf(`{"name":"echo","arguments":{"text":%q}}`, text)).String()); !strings.Contains(s, text) {
			t.Fatalf("%s: %s", text, s)
		}
	}
	// One server answers both: the same pid, initialized once.
	sa := a.ask(8, "tools/call", `{"name":"stats","arguments":{}}`).String()
	sb := b.ask(8, "tools/call", `{"name":"stats","arguments":{}}`).String()
	pidOf := func(s string) string {
		_, after, _ := strings.Cut(s, "pid=")
		f, _, _ := strings.Cut(after, " ")
		return f
	}
	if pidOf(sa) == "" || pidOf(sa) != pidOf(sb) || !strings.Contains(sa, "initialize=1 ") {
		t.Fatalf("stats %s and %s: want one server, initialized once", sa, sb)
	}
	a.stdin.Close()
	b.stdin.Close()
	a.exit()
	b.exit()
	waitNoRecords(t, in)
}

// TestLazyFrontRefusesWhatTheBrokerWould: a run the broker path refuses
// at once (limits too small for a broker and its server) is refused at
// once, not after its front told the host all is well.
func TestLazyFrontRefusesWhatTheBrokerWould(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.writeConfig("linger = \"1s\"\n")
	warmLazy(t, in, "--lazy", "--name", "front", "--", bin, "_fixture", "mcp")
	h := startRawHost(t, in, "--lazy", "--pids-max", "5", "--name", "front", "--", bin, "_fixture", "mcp")
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`)
	if ws := h.exit(); ws.ExitStatus() != 125 {
		t.Fatalf("run with limits too small for a broker: %v, want status 125", ws)
	}
	for line := range h.lines {
		t.Errorf("the run answered %s, want nothing", line)
	}
}
