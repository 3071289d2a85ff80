//go:build linux

package broker

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// meta is the per-request _meta of the stateless revision.
const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func (c *tclient) discover(id string) msg {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":%s,"method":"server/discover","params":{%s}}`, id, meta)
	return c.answer(id)
}

func (c *tclient) callMeta(id, tool, args string) {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s,%s}}`, id, tool, args, meta)
}

// note waits for the next notification with method, failing on an answer.
func (c *tclient) note(method string) msg {
	c.t.Helper()
	for {
		m := c.next()
		if m.Method == method {
			return m
		}
		if m.Method == "" {
			c.t.Fatalf("client %s: an answer while waiting for %s: %s", c.id, method, m.raw)
		}
	}
}

func subscriptionID(t *testing.T, m msg) string {
	t.Helper()
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatalf("params of %s: %v", m.raw, err)
	}
	return string(p.Meta[metaSubscriptionID])
}

// Clients of a server speaking the stateless revision: discover is
// learned from, each client's subscriptions/listen (with colliding ids)
// gets its own acknowledgement and list-changed notifications stamped
// with its own id, a cancelled listen hears no more, and listens survive
// an upstream restart.
func TestStatelessListen(t *testing.T) {
	h := newHarness(t, []string{gomcp}, nil)
	a, b := h.attach("a"), h.attach("b")
	d := a.discover("1")
	if d.Error != nil || !strings.Contains(string(d.Result), `"2026-07-28"`) {
		t.Fatalf("discover: %s", d.raw)
	}
	h.waitEvent("upstream.stateless")
	if s := h.b.Stats(); !s.Stateless || len(s.Versions) == 0 {
		t.Fatalf("stats after discover: %+v", s)
	}
	b.discover("1")

	for _, c := range []*tclient{a, b} {
		c.send(`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":true},%s}}`, meta)
		ack := c.note("notifications/subscriptions/acknowledged")
		if got := subscriptionID(t, ack); got != "7" {
			t.Fatalf("client %s: ack stamped %s, want its own id 7: %s", c.id, got, ack.raw)
		}
		// The server has no prompts: only what both asked and it granted.
		if !strings.Contains(ack.raw, `"toolsListChanged":true`) || strings.Contains(ack.raw, "prompts") {
			t.Fatalf("client %s: ack %s, want tools only", c.id, ack.raw)
		}
	}
	if s := h.b.Stats(); s.Listens != 2 {
		t.Fatalf("listens = %d, want 2", s.Listens)
	}

	a.callMeta("2", "addtool", `{"name":"one"}`)
	if m := a.answer("2"); m.text() != "added one" {
		t.Fatalf("addtool: %s", m.raw)
	}
	for _, c := range []*tclient{a, b} {
		if got := subscriptionID(t, c.note("notifications/tools/list_changed")); got != "7" {
			t.Fatalf("client %s: list_changed stamped %s, want 7", c.id, got)
		}
	}

	// b cancels its listen: it hears nothing more, a still does.
	b.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	h.waitFor(func(s Stats) bool { return s.Listens == 1 }, "b's listen to end")
	a.callMeta("3", "addtool", `{"name":"two"}`)
	a.answer("3")
	a.note("notifications/tools/list_changed")
	b.callMeta("3", "echo", `{"text":"b"}`)
	if m := b.answer("3"); m.text() != "b" {
		t.Fatalf("b's echo: %s", m.raw)
	}
	for _, m := range b.drain() {
		if strings.Contains(m.Method, "list_changed") {
			t.Fatalf("b heard %s after cancelling its listen", m.raw)
		}
	}

	// The upstream dies: a's listen is renewed on the next one.
	old := h.b.Stats().UpstreamPID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.waitFor(func(s Stats) bool { return s.UpstreamPID != 0 && s.UpstreamPID != old }, "the upstream to restart")
	// The renewed listen may not be registered yet when a tool is added:
	// add tools until one is heard of.
	for i := 0; ; i++ {
		id := strconv.Itoa(100 + i)
		a.callMeta(id, "addtool", fmt.Sprintf(`{"name":"t%d"}`, i))
		if m := a.answer(id); m.Error != nil {
			t.Logf("addtool after the restart: %s", m.raw)
		}
		if m, ok := a.noteWithin("notifications/tools/list_changed", 500*time.Millisecond); ok {
			if got := subscriptionID(t, m); got != "7" {
				t.Fatalf("after the restart: list_changed stamped %s, want 7", got)
			}
			break
		}
		if i == 40 {
			t.Fatal("no list_changed reached the listening client after the upstream restarted")
		}
	}
}

// noteWithin waits up to d for a notification with method.
func (c *tclient) noteWithin(method string, d time.Duration) (msg, bool) {
	c.t.Helper()
	for _, m := range c.drain() {
		if m.Method == method {
			return m, true
		}
	}
	deadline := time.After(d)
	for {
		select {
		case m := <-c.in:
			if m.Method == method {
				return m, true
			}
		case <-deadline:
			return msg{}, false
		}
	}
}

// What server/discover teaches: a stateless version (a date at or after
// 2026-07-28, also when listed in a version refusal) or not; a refusal
// or a legacy list unlearns it.
func TestLearnDiscover(t *testing.T) {
	for _, tc := range []struct {
		answer          string
		stateless, lgcy bool
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28","2025-11-25"]}}`, true, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2027-01-15"]}}`, true, false},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"unsupported","data":{"supported":["2026-07-28"],"requested":"2030-01-01"}}}`, true, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2025-11-25"]}}`, false, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["DRAFT-2026-v1","draft"]}}`, false, true},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`, false, true},
	} {
		b, err := New(Config{Argv: []string{"unused"}})
		if err != nil {
			t.Fatal(err)
		}
		b.stateless = !tc.stateless // what was learned before is overridden
		b.learnDiscover([]byte(tc.answer))
		if b.stateless != tc.stateless || b.legacy != tc.lgcy {
			t.Errorf("%s: stateless %v legacy %v, want %v %v", tc.answer, b.stateless, b.legacy, tc.stateless, tc.lgcy)
		}
	}
}
