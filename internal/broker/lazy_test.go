//go:build linux

package broker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// warmCache runs a cold lazy broker once: it starts at once, and the
// handshake of one client plus the broker's own list calls fill the cache.
func warmCache(t *testing.T) *Cache {
	t.Helper()
	h := newHarness(t, fixtureArgv(), func(c *Config) { c.Lazy = true })
	c := h.attach("filler")
	c.send(`{"jsonrpc":"2.0","id":"probe","method":"server/discover","params":{}}`)
	c.answer(`"probe"`)
	if m := c.initialize("1", "2025-11-25"); m.Error != nil {
		t.Fatalf("initialize: %s", m.raw)
	}
	var cache *Cache
	h.waitFor(func(s Stats) bool {
		cache, _ = h.b.Cache()
		return cache.Warm() && cache.Lists["tools/list "] != nil
	}, "the cache to hold initialize and tools/list")
	if !strings.Contains(string(cache.Init), `"listChanged":true`) {
		t.Errorf("the cached initialize result does not advertise listChanged: %s", cache.Init)
	}
	return cache
}

// A lazy broker with a warm cache answers the handshake and tools/list
// without starting its upstream; the first call starts it; idle, it is
// stopped and started again by the next call; a call longer than the
// idle time is never interrupted.
func TestLazyAndIdle(t *testing.T) {
	cache := warmCache(t)
	const idle = 300 * time.Millisecond
	h := newHarness(t, fixtureArgv(), func(c *Config) { c.Lazy, c.Cache, c.Idle = true, cache, idle })
	c := h.attach("host")
	if m := c.initialize("0", "2025-11-25"); m.Error != nil || !strings.Contains(string(m.Result), `"listChanged":true`) {
		t.Fatalf("initialize from the cache: %s", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if m := c.answer("1"); m.Error != nil || !strings.Contains(string(m.Result), `"echo"`) {
		t.Fatalf("tools/list from the cache: %s", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	c.answer("2")
	// A host's stateless probe (Claude Code sends one first) gets the
	// server's refusal from the cache.
	c.send(`{"jsonrpc":"2.0","id":"probe","method":"server/discover","params":{}}`)
	if m := c.answer(`"probe"`); m.Error == nil {
		t.Fatalf("server/discover of a legacy server from the cache: %s, want its error", m.raw)
	}
	time.Sleep(100 * time.Millisecond) // time for a wrong start to show
	if s := h.b.Stats(); s.UpstreamPID != 0 || s.CacheHits != 3 || s.LazyStarts != 0 {
		t.Fatalf("after the handshake and tools/list: %+v, want no upstream and 3 cache hits", s)
	}

	c.call("3", "echo", `{"text":"first"}`)
	if m := c.answer("3"); m.text() != "first" {
		t.Fatalf("first call: %s", m.raw)
	}
	first := h.b.Stats()
	if first.UpstreamPID == 0 || first.LazyStarts != 1 {
		t.Fatalf("after the first call: %+v, want a running upstream started lazily once", first)
	}
	h.waitFor(func(s Stats) bool { return s.UpstreamPID == 0 && s.IdleStops == 1 }, "the idle upstream to stop")
	h.waitEvent("upstream.idle_stop")

	c.call("4", "echo", `{"text":"again"}`)
	if m := c.answer("4"); m.text() != "again" {
		t.Fatalf("call after the idle stop: %s", m.raw)
	}
	if s := h.b.Stats(); s.LazyStarts != 2 || s.Restarts != 0 {
		t.Fatalf("after the call that restarted it: %+v, want 2 lazy starts and no crash restarts", s)
	}
	// A call three times the idle time runs to its end.
	c.call("5", "slow", `{"steps":3,"ms":300}`)
	if m := c.answer("5"); m.Error != nil {
		t.Fatalf("slow call: %s", m.raw)
	}
	if s := h.b.Stats(); s.IdleStops != 1 {
		t.Fatalf("idle stops = %d during a long call, want 1", s.IdleStops)
	}
}

// A cache whose tools/list no longer matches the server: the lazy start
// refreshes it and tells the client its list changed.
func TestLazyListChanged(t *testing.T) {
	cache := warmCache(t)
	cache.Lists["tools/list "] = json.RawMessage(`{"tools":[{"name":"gone","inputSchema":{"type":"object"}}]}`)
	h := newHarness(t, fixtureArgv(), func(c *Config) { c.Lazy, c.Cache = true, cache })
	c := h.attach("host")
	c.initialize("0", "2025-11-25")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if m := c.answer("1"); !strings.Contains(string(m.Result), `"gone"`) {
		t.Fatalf("tools/list from the (stale) cache: %s", m.raw)
	}
	c.call("2", "echo", `{"text":"x"}`)
	c.answer("2")
	c.note("notifications/tools/list_changed")
	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	if m := c.answer("3"); !strings.Contains(string(m.Result), `"echo"`) {
		t.Fatalf("tools/list after the change: %s", m.raw)
	}
	got, _ := h.b.Cache()
	if !strings.Contains(string(got.Lists["tools/list "]), `"echo"`) {
		t.Fatalf("the cache was not refreshed: %s", got.Lists["tools/list "])
	}
}

// A client asking a protocol version the cache has no answer for starts
// the upstream and is initialized by it.
func TestLazyOtherVersion(t *testing.T) {
	cache := warmCache(t)
	h := newHarness(t, fixtureArgv(), func(c *Config) { c.Lazy, c.Cache = true, cache })
	c := h.attach("host")
	if m := c.initialize("0", "2024-11-05"); m.Error != nil {
		t.Fatalf("initialize 2024-11-05: %s", m.raw)
	}
	if s := h.b.Stats(); s.UpstreamPID == 0 || s.CacheMisses != 1 {
		t.Fatalf("%+v: want a started upstream and one cache miss", s)
	}
}

// Idle stop never takes an upstream that holds a subscription, or one
// that has sent a server-to-client request (its state may be a client's);
// it does once the last subscription is gone.
func TestIdleKeeps(t *testing.T) {
	const idle = 200 * time.Millisecond
	t.Run("subscription", func(t *testing.T) {
		h := newHarness(t, fixtureArgv(), func(c *Config) { c.Idle = idle })
		c := h.attach("a")
		c.initialize("0", "2025-11-25")
		c.send(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"test://r"}}`)
		c.answer("1")
		time.Sleep(4 * idle)
		if s := h.b.Stats(); s.IdleStops != 0 || s.UpstreamPID == 0 {
			t.Fatalf("stopped with a subscription held: %+v", s)
		}
		c.send(`{"jsonrpc":"2.0","id":2,"method":"resources/unsubscribe","params":{"uri":"test://r"}}`)
		c.answer("2")
		h.waitFor(func(s Stats) bool { return s.IdleStops == 1 && s.UpstreamPID == 0 }, "the idle stop once unsubscribed")
	})
	t.Run("server request", func(t *testing.T) {
		h := newHarness(t, fixtureArgv(), func(c *Config) { c.Idle = idle })
		c := h.attach("a")
		c.initialize("0", "2025-11-25")
		c.call("1", "roots", "{}")
		req := c.next()
		if req.Method != "roots/list" {
			t.Fatalf("got %s, want roots/list", req.raw)
		}
		c.send(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[]}}`, req.ID)
		c.answer("1")
		time.Sleep(4 * idle)
		if s := h.b.Stats(); s.IdleStops != 0 || s.UpstreamPID == 0 {
			t.Fatalf("stopped a server that sent roots/list: %+v", s)
		}
	})
}

// A lazy start that fails (the server's command is gone) answers the
// request that asked for it with an error saying so; the client stays.
func TestLazyStartFails(t *testing.T) {
	cache := warmCache(t)
	h := newHarness(t, []string{"/nonexistent/mcp-server"}, func(c *Config) { c.Lazy, c.Cache = true, cache })
	c := h.attach("host")
	if m := c.initialize("0", "2025-11-25"); m.Error != nil {
		t.Fatalf("initialize from the cache: %s", m.raw)
	}
	c.call("1", "echo", `{"text":"x"}`)
	m := c.answer("1")
	if m.Error == nil || m.Error.Code != CodeUnavailable || !strings.Contains(m.Error.Message, "could not be started") {
		t.Fatalf("call on a server that cannot start: %s, want an error saying so", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if m := c.answer("2"); m.Error != nil {
		t.Fatalf("tools/list from the cache after the failed start: %s", m.raw)
	}
}

// An idle-stopped upstream of a broker that is not lazy (run
// --idle D without --lazy) must start again on the next request.
func TestIdleWithoutLazyRestarts(t *testing.T) {
	const idle = 200 * time.Millisecond
	h := newHarness(t, fixtureArgv(), func(c *Config) { c.Idle = idle })
	c := h.attach("a")
	c.initialize("0", "2025-11-25")
	h.waitFor(func(s Stats) bool { return s.IdleStops == 1 && s.UpstreamPID == 0 }, "the idle stop")
	c.call("1", "echo", `{"text":"again"}`)
	if m := c.answer("1"); m.text() != "again" {
		t.Fatalf("call after the idle stop: %s", m.raw)
	}
}

// A client's subscriptions/listen reaching a lazy broker whose
// upstream is down is acknowledged (the upstream is started for it, or
// the broker answers), not held until some other request starts it.
func TestLazyListenAcknowledged(t *testing.T) {
	fill := newHarness(t, []string{gomcp}, func(c *Config) { c.Lazy = true })
	f := fill.attach("filler")
	if d := f.discover("1"); d.Error != nil {
		t.Fatalf("discover: %s", d.raw)
	}
	// The broker's own server/discover fills the cache, not the client's.
	var cache *Cache
	fill.waitFor(func(Stats) bool {
		cache, _ = fill.b.Cache()
		return cache.Warm()
	}, "the broker's own server/discover to warm the cache")
	h := newHarness(t, []string{gomcp}, func(c *Config) { c.Lazy, c.Cache = true, cache })
	a := h.attach("a")
	a.discover("1")
	a.send(`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},%s}}`, meta)
	done := make(chan struct{})
	go func() { defer close(done); a.note("notifications/subscriptions/acknowledged") }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("no acknowledgement of the listen within 5s: %+v", h.b.Stats())
	}
}
