//go:build linux

package broker

import (
	"testing"
	"time"
)

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
