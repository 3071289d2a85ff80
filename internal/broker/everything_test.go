//go:build linux

package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// everythingArgv is the real @modelcontextprotocol/server-everything on
// stdio, from testdata/npm (installed by .ci/run); it skips without node
// or node_modules, except under CI, where a skip would hide a broken setup.
func everythingArgv(t *testing.T) []string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata", "npm"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	node, err := exec.LookPath("node")
	var missing string
	switch {
	case err != nil:
		missing = "node is not on PATH"
	default:
		if _, err := os.Stat(script); err != nil {
			missing = "testdata/npm/node_modules lacks @modelcontextprotocol/server-everything"
		}
	}
	if missing != "" {
		msg := "real-world MCP broker test: " + missing + "; run `bash .ci/run` or `npm ci --prefix testdata/npm`"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return []string{node, script, "stdio"}
}

// initEverything initializes c without roots (server-everything asks for
// them right after the handshake, when no request is in flight: the broker
// would refuse and flag it) but with sampling.
func initEverything(t *testing.T, c *tclient) {
	t.Helper()
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":%q,"version":"1"}}}`, c.id)
	if m := c.answer("0"); m.Error != nil {
		t.Fatalf("client %s: initialize: %s", c.id, m.raw)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// Two and five clients of the real server-everything interleave calls with
// colliding ids: every answer, progress notification and cancellation
// reaches the right client, over one server process.
func TestEverythingShared(t *testing.T) {
	argv := everythingArgv(t)
	for _, n := range []int{2, 5} {
		t.Run(fmt.Sprintf("%d-clients", n), func(t *testing.T) {
			h := newHarness(t, argv, nil)
			pid := h.b.Stats().UpstreamPID
			clients := make([]*tclient, n)
			for i := range clients {
				clients[i] = h.attach(fmt.Sprintf("c%d", i))
				initEverything(t, clients[i])
			}
			clients[n-1].send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			tools := clients[n-1].answer("1")
			for _, name := range []string{"echo", "trigger-long-running-operation"} {
				if !strings.Contains(string(tools.Result), fmt.Sprintf("%q", name)) {
					t.Fatalf("tools/list lacks %s: %s", name, tools.raw)
				}
			}

			// Echo calls with the same ids from every client, concurrently.
			const calls = 20
			var wg sync.WaitGroup
			for i, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 1; j <= calls; j++ {
						c.call(fmt.Sprint(10+j), "echo", fmt.Sprintf(`{"message":"client %d call %d"}`, i, j))
					}
				}()
			}
			wg.Wait()
			for i, c := range clients {
				got := map[string]string{}
				for len(got) < calls {
					m := c.next()
					if m.Method != "" {
						continue // server-everything's own notifications
					}
					got[string(m.ID)] = m.text()
				}
				for j := 1; j <= calls; j++ {
					if want := fmt.Sprintf("Echo: client %d call %d", i, j); got[fmt.Sprint(10+j)] != want {
						t.Errorf("client %d: answer to id %d is %q, want %q", i, 10+j, got[fmt.Sprint(10+j)], want)
					}
				}
			}

			// Progress: the same id and token everywhere, a different
			// number of steps per client.
			for i, c := range clients {
				c.send(`{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":1,"steps":%d},"_meta":{"progressToken":"p"}}}`, i+2)
			}
			for i, c := range clients {
				steps := 0
				for {
					m := c.next()
					if m.Method == "notifications/progress" {
						var p struct {
							Token json.RawMessage `json:"progressToken"`
							Total int             `json:"total"`
						}
						json.Unmarshal(m.Params, &p)
						if string(p.Token) != `"p"` || p.Total != i+2 {
							t.Errorf("client %d got progress %s, want token \"p\" of its %d steps", i, m.Params, i+2)
						}
						steps++
						continue
					}
					if m.Method != "" {
						continue
					}
					if string(m.ID) != "100" || !strings.Contains(m.text(), fmt.Sprintf("Steps: %d.", i+2)) {
						t.Fatalf("client %d: long-running answer %s", i, m.raw)
					}
					break
				}
				if steps != i+2 {
					t.Errorf("client %d got %d progress notifications, want %d", i, steps, i+2)
				}
			}

			// Cancellation: c0 and c1 run id 200; c0 cancels its own; c1's completes.
			clients[0].call("200", "trigger-long-running-operation", `{"duration":3,"steps":3}`)
			clients[1].call("200", "trigger-long-running-operation", `{"duration":1,"steps":1}`)
			h.waitFor(func(s Stats) bool { return s.Clients[0].InFlight == 1 && s.Clients[1].InFlight == 1 }, "both calls in flight")
			clients[0].send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":200,"reason":"test"}}`)
			if m := clients[1].answer("200"); !strings.Contains(m.text(), "Steps: 1.") {
				t.Errorf("c1's call 200 (not cancelled) answered %s", m.raw)
			}
			h.waitFor(func(s Stats) bool { return s.Clients[0].InFlight == 0 }, "c0's cancelled call to leave the books")
			for _, m := range clients[0].drain() {
				if m.Method == "" {
					t.Errorf("c0 got an answer after cancelling: %s", m.raw)
				}
			}

			if s := h.b.Stats(); s.UpstreamPID != pid || s.Restarts != 0 || len(s.Clients) != n {
				t.Errorf("stats %+v: want one upstream (pid %d), no restarts, %d clients", s, pid, n)
			}
		})
	}
}

// The real server's sampling/createMessage with two clients' calls in
// flight is refused, and the broker flags the server.
func TestEverythingSamplingRefused(t *testing.T) {
	// The server lives on past stdin EOF while its long operation runs:
	// the stop's SIGTERM comes sooner than the default.
	h := newHarness(t, everythingArgv(t), func(c *Config) { c.StopTimeout = 500 * time.Millisecond })
	a, b := h.attach("a"), h.attach("b")
	initEverything(t, a)
	initEverything(t, b)
	// The server registers its sampling tool once it has seen the first
	// client's capabilities, a moment after the handshake.
	for i := 0; ; i++ {
		b.send(`{"jsonrpc":"2.0","id":"l%d","method":"tools/list"}`, i)
		if m := b.answer(fmt.Sprintf(`"l%d"`, i)); strings.Contains(string(m.Result), `"trigger-sampling-request"`) {
			break
		}
		if i == 1000 {
			t.Fatal("server-everything never listed trigger-sampling-request")
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.call("1", "trigger-long-running-operation", `{"duration":30,"steps":30}`)
	h.waitFor(func(s Stats) bool { return s.Clients[0].InFlight == 1 }, "a's call in flight")
	b.call("1", "trigger-sampling-request", `{"prompt":"hi"}`)
	m := b.answer("1")
	if !strings.Contains(m.raw, "cannot be routed") {
		t.Errorf("sampling with two calls in flight answered %s, want the broker's refusal", m.raw)
	}
	if s := h.b.Stats(); !s.Unsafe || !strings.Contains(s.UnsafeReason, "sampling/createMessage") {
		t.Errorf("stats unsafe %v %q, want flagged for sampling/createMessage", s.Unsafe, s.UnsafeReason)
	}
	for _, m := range a.drain() {
		if m.Method == "sampling/createMessage" {
			t.Errorf("a was asked %s", m.raw)
		}
	}
}
