//go:build linux

package broker

// The broker's tests run real upstreams: the MCP fixture of the supervisor
// binary (built once by TestMain) and, where node_modules is installed,
// the real @modelcontextprotocol/server-everything. Clients are os.Pipe
// pairs driven by the test.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// bin is the real supervisor binary, whose `_fixture mcp` is the upstream;
// gomcp a server on the official Go SDK that speaks the stateless revision.
var bin, gomcp string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "broker-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "supervisor")
	gomcp = filepath.Join(dir, "gomcp")
	for out, pkg := range map[string]string{bin: "../../cmd/supervisor", gomcp: "../fixture/gomcp"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg+":", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// wait bounds every wait on an event: generous, the machines are shared.
const wait = 30 * time.Second

var fixtureArgv = func() []string { return []string{bin, "_fixture", "mcp"} }

// harness is one broker under test with its event log.
type harness struct {
	t      testing.TB
	b      *Broker
	cancel context.CancelFunc
	runErr chan error

	mu     sync.Mutex
	events []string
	change chan struct{}
}

func newHarness(t testing.TB, argv []string, tweak func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, runErr: make(chan error, 1), change: make(chan struct{}, 1)}
	cfg := Config{
		Argv:       argv,
		Log:        hclog.New(&hclog.LoggerOptions{Name: "broker", Level: hclog.Debug, Output: testWriter{t}}),
		RestartMin: 10 * time.Millisecond,
		OnEvent: func(kind, detail string) {
			h.mu.Lock()
			h.events = append(h.events, kind+" "+detail)
			h.mu.Unlock()
			select {
			case h.change <- struct{}{}:
			default:
			}
		},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.b = b
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.runErr <- b.Run(ctx) }()
	t.Cleanup(func() {
		pid := b.Stats().UpstreamPID
		cancel()
		done := make(chan struct{})
		go func() { b.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(wait):
			t.Errorf("broker did not stop within %v", wait)
		}
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			// Reaped by Wait; a live pid here would be a stranger's or a leak.
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), "_fixture") {
				t.Errorf("upstream pid %d still runs after the broker stopped", pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	if !cfg.Lazy || !cfg.Cache.Warm() {
		h.waitFor(func(s Stats) bool { return s.UpstreamPID > 0 }, "the upstream to start")
	}
	return h
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// waitFor polls Stats until cond holds.
func (h *harness) waitFor(cond func(Stats) bool, what string) Stats {
	h.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		s := h.b.Stats()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; stats %+v", what, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitEvent waits for an event starting with prefix.
func (h *harness) waitEvent(prefix string) string {
	h.t.Helper()
	deadline := time.After(wait)
	for {
		h.mu.Lock()
		for _, e := range h.events {
			if strings.HasPrefix(e, prefix) {
				h.mu.Unlock()
				return e
			}
		}
		h.mu.Unlock()
		select {
		case <-h.change:
		case <-deadline:
			h.t.Fatalf("timed out waiting for event %q; have %q", prefix, h.events)
		}
	}
}

// msg is a decoded message as a client sees it.
type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

// text is the first text content of a tools/call result.
func (m msg) text() string {
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	json.Unmarshal(m.Result, &r)
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// tclient is a test-driven client: a pipe pair attached to the broker.
type tclient struct {
	t       testing.TB
	id      string
	w       *os.File // its messages, to the broker
	in      chan msg // what the broker wrote to it
	done    chan struct{}
	skipped []msg // notifications and requests answer passed over
}

func (h *harness) attach(id string) *tclient {
	h.t.Helper()
	return h.attachAfterFront(id, Handover{})
}

// attachAfterFront attaches a client whose front left fr.
func (h *harness) attachAfterFront(id string, fr Handover) *tclient {
	h.t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		h.t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		h.t.Fatal(err)
	}
	c := &tclient{t: h.t, id: id, w: inW, in: make(chan msg, 1024), done: make(chan struct{})}
	stop := make(chan struct{})
	h.t.Cleanup(func() { close(stop) })
	if err := h.b.AttachAfterFront(id, inR, outW, fr); err != nil {
		h.t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var m msg
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				// Only a forced detach may cut a line short; tests that
				// expect messages see this one's method and fail.
				m = msg{Method: "invalid JSON: " + err.Error()}
			}
			m.raw = sc.Text()
			select {
			case c.in <- m:
			case <-stop:
				return
			}
		}
	}()
	h.t.Cleanup(func() { inW.Close() })
	return c
}

func (c *tclient) send(format string, args ...any) {
	c.t.Helper()
	if _, err := fmt.Fprintf(c.w, format+"\n", args...); err != nil {
		c.t.Fatalf("client %s: write: %v", c.id, err)
	}
}

// next returns the next message the client receives.
func (c *tclient) next() msg {
	c.t.Helper()
	if len(c.skipped) > 0 {
		m := c.skipped[0]
		c.skipped = c.skipped[1:]
		return m
	}
	select {
	case m := <-c.in:
		return m
	case <-c.done:
		select {
		case m := <-c.in:
			return m
		default:
		}
		c.t.Fatalf("client %s: the broker closed its output", c.id)
	case <-time.After(wait):
		c.t.Fatalf("client %s: no message within %v", c.id, wait)
	}
	return msg{}
}

// answer reads until the response with id, failing on a foreign one;
// next returns the other messages it passed over.
func (c *tclient) answer(id string) msg {
	c.t.Helper()
	var skipped []msg
	defer func() { c.skipped = append(c.skipped, skipped...) }()
	for {
		m := c.next()
		if m.Method != "" {
			skipped = append(skipped, m)
			continue
		}
		if string(m.ID) != id {
			c.t.Fatalf("client %s: got an answer for id %s, want %s: %s", c.id, m.ID, id, m.raw)
		}
		return m
	}
}

func (c *tclient) initialize(id, version string) msg {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":%s,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{"roots":{}},"clientInfo":{"name":%q,"version":"1"}}}`, id, version, c.id)
	m := c.answer(id)
	if m.Error == nil {
		c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	return m
}

func (c *tclient) call(id, tool, args string) {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

// stats asks the fixture for its counters.
func (c *tclient) stats(id string) string {
	c.t.Helper()
	c.call(id, "stats", "{}")
	return c.answer(id).text()
}

// closed waits for the broker to close the client's output.
func (c *tclient) closed() {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(wait):
		c.t.Fatalf("client %s: output not closed within %v", c.id, wait)
	}
}

// drain returns what the client has received and not read yet.
func (c *tclient) drain() []msg {
	ms := c.skipped
	c.skipped = nil
	for len(c.in) > 0 {
		ms = append(ms, <-c.in)
	}
	return ms
}
