//go:build linux

package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Clients with colliding ids interleave calls: every answer reaches its
// own client, over one upstream that was initialized once.
func TestCollidingIDs(t *testing.T) {
	for _, n := range []int{2, 5} {
		t.Run(fmt.Sprintf("%d-clients", n), func(t *testing.T) {
			h := newHarness(t, fixtureArgv(), nil)
			pid := h.b.Stats().UpstreamPID
			clients := make([]*tclient, n)
			for i := range clients {
				clients[i] = h.attach(fmt.Sprintf("c%d", i))
				if m := clients[i].initialize("0", "2025-11-25"); m.Error != nil {
					t.Fatalf("initialize: %s", m.raw)
				}
			}
			const calls = 30
			var wg sync.WaitGroup
			errs := make(chan string, n*calls)
			for i, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 1; j <= calls; j++ { // the same ids in every client
						c.call(fmt.Sprint(j), "echo", fmt.Sprintf(`{"text":"client %d call %d"}`, i, j))
					}
					for range calls {
						m := <-c.in
						var j int
						fmt.Sscan(string(m.ID), &j)
						if want := fmt.Sprintf("client %d call %d", i, j); m.text() != want {
							errs <- fmt.Sprintf("client %d: answer to id %s is %q, want %q", i, m.ID, m.text(), want)
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
			st := clients[0].stats("99")
			if want := fmt.Sprintf("pid=%d initialize=1 initialized=1 ", pid); !strings.HasPrefix(st, want) {
				t.Errorf("fixture stats %q, want prefix %q (one upstream, initialized once)", st, want)
			}
			s := h.b.Stats()
			if s.UpstreamPID != pid || len(s.Clients) != n {
				t.Errorf("stats: pid %d with %d clients, want %d with %d", s.UpstreamPID, len(s.Clients), pid, n)
			}
			if s.Relayed < uint64(2*n*calls) {
				t.Errorf("stats: relayed %d, want at least %d", s.Relayed, 2*n*calls)
			}
		})
	}
}

// The legacy handshake: later clients are answered from the first result
// with their own ids; another protocol version is refused clearly.
func TestInitializeFromCache(t *testing.T) {
	h := newHarness(t, fixtureArgv(), nil)
	a, b, c := h.attach("a"), h.attach("b"), h.attach("c")
	first := a.initialize("1", "2025-06-18")
	second := b.initialize(`"init-b"`, "2025-06-18")
	if first.Error != nil || second.Error != nil {
		t.Fatalf("initialize: %s / %s", first.raw, second.raw)
	}
	if string(first.Result) != string(second.Result) {
		t.Errorf("cached result %s differs from the first %s", second.Result, first.Result)
	}
	other := c.initialize("7", "2025-11-25")
	if other.Error == nil || other.Error.Code != CodeNeedsOwnUpstream || !strings.Contains(other.Error.Message, "needs a server of its own") {
		t.Errorf("a client asking another version got %s, want error %d", other.raw, CodeNeedsOwnUpstream)
	}
	h.waitEvent("client.needs_own_upstream c:")
	if st := b.stats("2"); !strings.Contains(st, " initialize=1 initialized=1 ") {
		t.Errorf("fixture stats %q: want one initialize and one notifications/initialized", st)
	}
}

// Progress notifications reach the client whose request they belong to,
// with its own token; a cancellation reaches the upstream under the
// upstream's id and cancels only that client's call.
func TestProgressAndCancel(t *testing.T) {
	h := newHarness(t, fixtureArgv(), nil)
	a, b := h.attach("a"), h.attach("b")
	a.initialize("0", "2025-11-25")
	b.initialize("0", "2025-11-25")
	slow := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{"steps":%d,"ms":%d},"_meta":{"progressToken":"tok"}}}`
	a.send(slow, 3, 10)
	b.send(slow, 5, 10)
	for _, tc := range []struct {
		c     *tclient
		steps int
	}{{a, 3}, {b, 5}} {
		var progress []string
		for {
			m := tc.c.next()
			if m.Method == "notifications/progress" {
				progress = append(progress, string(m.Params))
				continue
			}
			if string(m.ID) != "5" || m.text() != fmt.Sprintf("done %d steps", tc.steps) {
				t.Fatalf("client %s: answer %s", tc.c.id, m.raw)
			}
			break
		}
		if len(progress) != tc.steps {
			t.Errorf("client %s got %d progress notifications, want %d: %q", tc.c.id, len(progress), tc.steps, progress)
		}
		for _, p := range progress {
			if !strings.Contains(p, `"progressToken":"tok"`) || !strings.Contains(p, fmt.Sprintf(`"total":%d`, tc.steps)) {
				t.Errorf("client %s got progress %s, want its own token and total %d", tc.c.id, p, tc.steps)
			}
		}
	}

	// Cancellation: both call id 9; a cancels its own.
	a.send(slow, 1000, 50)
	b.send(strings.Replace(slow, `"id":5`, `"id":9`, 1), 3, 10)
	a.send(strings.Replace(slow, `"id":5`, `"id":9`, 1), 1000, 50)
	h.waitFor(func(s Stats) bool { return s.Clients[0].InFlight == 2 }, "a's two calls in flight")
	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"reason":"test"}}`)
	for m := b.next(); m.Method != "" || string(m.ID) != "9"; m = b.next() {
	}
	h.waitFor(func(s Stats) bool { return s.Clients[0].InFlight == 1 }, "a's cancelled call to leave the books")
	st := a.stats("10")
	if !strings.Contains(st, " cancelled=1 ") {
		t.Errorf("fixture stats %q: want exactly one cancellation upstream", st)
	}
	// a's call 5 still runs: nothing but progress for it may have come.
	for _, m := range a.drain() {
		if m.Method == "" {
			t.Errorf("client a got an answer after cancelling: %s", m.raw)
		}
	}
}

// A client that goes away mid-call has its calls cancelled upstream; the
// others complete.
func TestDetachMidCall(t *testing.T) {
	for _, how := range []string{"eof", "detach"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t, fixtureArgv(), nil)
			a, b := h.attach("a"), h.attach("b")
			a.initialize("0", "2025-11-25")
			b.initialize("0", "2025-11-25")
			a.call("1", "slow", `{"steps":1000,"ms":50}`)
			b.call("1", "slow", `{"steps":5,"ms":20}`)
			h.waitFor(func(s Stats) bool { return s.Clients[0].InFlight == 1 && s.Clients[1].InFlight == 1 }, "both calls in flight")
			if how == "eof" {
				a.w.Close()
			} else {
				h.b.Detach("a")
			}
			a.closed()
			h.waitEvent("client.detach a:")
			if m := b.answer("1"); m.text() != "done 5 steps" {
				t.Errorf("b's call: %s", m.raw)
			}
			if st := b.stats("2"); !strings.Contains(st, " cancelled=1 ") {
				t.Errorf("fixture stats %q: want a's call cancelled upstream", st)
			}
			if s := h.b.Stats(); len(s.Clients) != 1 || s.Clients[0].ID != "b" {
				t.Errorf("clients after detach: %+v", s.Clients)
			}
		})
	}
}

// An upstream crash answers every call in flight with an error; the
// restarted upstream is re-initialized and serves the same clients.
func TestUpstreamCrash(t *testing.T) {
	h := newHarness(t, fixtureArgv(), nil)
	a, b := h.attach("a"), h.attach("b")
	a.initialize("0", "2025-11-25")
	b.initialize("0", "2025-11-25")
	pid := h.b.Stats().UpstreamPID
	const uri = "test://r/1"
	a.send(`{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":%q}}`, uri)
	a.answer(`"s"`)
	if s := h.b.Stats(); s.IdleSince.IsZero() {
		t.Errorf("stats idle since zero with nothing in flight")
	}
	a.call("1", "slow", `{"steps":1000,"ms":50}`)
	h.waitFor(func(s Stats) bool { return s.Clients[0].InFlight == 1 }, "a's call in flight")
	if s := h.b.Stats(); !s.IdleSince.IsZero() {
		t.Errorf("stats idle since %v with a call in flight, want zero", s.IdleSince)
	}
	b.call("1", "crash", "{}")
	for _, c := range []*tclient{a, b} {
		m := c.answer("1")
		if m.Error == nil || m.Error.Code != CodeInternal || !strings.Contains(m.Error.Message, "crashed") || !strings.Contains(m.Error.Message, "restarted") {
			t.Errorf("client %s: in-flight call answered %s, want error %d saying the server crashed", c.id, m.raw, CodeInternal)
		}
	}
	s := h.waitFor(func(s Stats) bool { return s.UpstreamPID != 0 && s.UpstreamPID != pid }, "the restart")
	if s.Restarts != 1 || len(s.Clients) != 2 {
		t.Errorf("after the crash: %d restarts, %d clients; want 1, 2", s.Restarts, len(s.Clients))
	}
	h.waitEvent("upstream.exit pid " + fmt.Sprint(pid))
	a.call("2", "echo", `{"text":"after"}`)
	if m := a.answer("2"); m.text() != "after" {
		t.Errorf("call after the restart: %s", m.raw)
	}
	// The new run was initialized once by the broker, from the cached
	// parameters, and a's subscription renewed.
	if st := b.stats("3"); st != fmt.Sprintf("pid=%d initialize=1 initialized=1 cancelled=0 subscribe=1 unsubscribe=0", s.UpstreamPID) {
		t.Errorf("restarted fixture stats %q, want one replayed initialize and subscribe", st)
	}
	b.call("4", "touch", fmt.Sprintf(`{"uri":%q}`, uri))
	b.answer("4")
	if m := a.next(); m.Method != "notifications/resources/updated" {
		t.Errorf("a after the restart got %s, want its subscription's update", m.raw)
	}
}

// Crashing past MaxRestarts within a minute trips the breaker: Run returns
// ErrBreaker and the clients are detached.
func TestBreaker(t *testing.T) {
	h := newHarness(t, fixtureArgv(), func(c *Config) { c.MaxRestarts = 2 })
	a := h.attach("a")
	for i := 1; i <= 3; i++ {
		h.waitFor(func(s Stats) bool { return s.UpstreamPID != 0 }, "the upstream")
		a.call(fmt.Sprint(i), "crash", "{}")
		if m := a.answer(fmt.Sprint(i)); m.Error == nil {
			t.Fatalf("crash call answered %s", m.raw)
		}
	}
	err := <-h.runErr
	if err == nil || !strings.Contains(err.Error(), "crashed 3 times within a minute") {
		t.Errorf("Run = %v, want the breaker's error", err)
	}
	a.closed()
	h.waitEvent("upstream.breaker")
}

// A server-to-client request goes to the one client with a request in
// flight, and is refused (and the upstream flagged) when two have.
func TestServerToClientRequests(t *testing.T) {
	h := newHarness(t, fixtureArgv(), nil)
	a, b := h.attach("a"), h.attach("b")
	a.initialize("0", "2025-11-25")
	b.initialize("0", "2025-11-25")

	b.call("1", "roots", "{}")
	req := b.next()
	if req.Method != "roots/list" {
		t.Fatalf("b got %s, want roots/list", req.raw)
	}
	b.send(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[{"uri":"file:///b"}]}}`, req.ID)
	if m := b.answer("1"); !strings.Contains(m.text(), "file:///b") {
		t.Errorf("roots call answered %s, want b's roots", m.raw)
	}
	if s := h.b.Stats(); !s.Unsafe || !strings.Contains(s.UnsafeReason, "routed to b") {
		t.Errorf("stats unsafe %v %q, want flagged as routed to b", s.Unsafe, s.UnsafeReason)
	}

	a.call("1", "slow", `{"steps":1000,"ms":50}`)
	h.waitFor(func(s Stats) bool { return s.Clients[0].InFlight == 1 }, "a's call in flight")
	b.call("2", "roots", "{}")
	m := b.answer("2") // the fixture answers with what it was told: the refusal
	if !strings.Contains(m.text(), "cannot be routed") {
		t.Errorf("roots with two calls in flight: %s, want the broker's refusal", m.raw)
	}
	if s := h.b.Stats(); !s.Unsafe || !strings.Contains(s.UnsafeReason, "refused") {
		t.Errorf("stats unsafe %v %q, want flagged as refused", s.Unsafe, s.UnsafeReason)
	}
	h.waitEvent("upstream.unsafe sent roots/list with 2 clients")
	for _, m := range a.drain() {
		if m.Method == "roots/list" {
			t.Errorf("a was asked %s", m.raw)
		}
	}
}

// Subscriptions are per client: updates reach subscribers only; the
// upstream sees one subscribe per uri and an unsubscribe when the last
// subscriber goes, whether by unsubscribing or detaching.
func TestSubscriptions(t *testing.T) {
	h := newHarness(t, fixtureArgv(), nil)
	a, b, c := h.attach("a"), h.attach("b"), h.attach("c")
	for _, cl := range []*tclient{a, b, c} {
		cl.initialize("0", "2025-11-25")
	}
	const uri = "test://r/1"
	for _, cl := range []*tclient{a, b} {
		cl.send(`{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":%q}}`, uri)
		if m := cl.answer(`"s"`); m.Error != nil {
			t.Fatalf("subscribe: %s", m.raw)
		}
	}
	if st := c.stats("1"); !strings.Contains(st, " subscribe=1 unsubscribe=0") {
		t.Errorf("fixture stats %q, want one subscribe", st)
	}
	c.call("2", "touch", fmt.Sprintf(`{"uri":%q}`, uri))
	c.answer("2")
	for _, cl := range []*tclient{a, b} {
		if m := cl.next(); m.Method != "notifications/resources/updated" || !strings.Contains(string(m.Params), uri) {
			t.Errorf("subscriber %s got %s, want the update", cl.id, m.raw)
		}
	}
	// list_changed reaches everyone; c's first message proves it got no update.
	a.call("3", "changed", "{}")
	a.answer("3")
	for _, cl := range []*tclient{a, b, c} {
		if m := cl.next(); m.Method != "notifications/tools/list_changed" {
			t.Errorf("client %s got %s, want list_changed", cl.id, m.raw)
		}
	}
	a.send(`{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":%q}}`, uri)
	a.answer("4")
	if st := c.stats("5"); !strings.Contains(st, " subscribe=1 unsubscribe=0") {
		t.Errorf("fixture stats %q: b still subscribes, want no unsubscribe upstream", st)
	}
	b.w.Close()
	b.closed()
	h.waitEvent("client.detach b:")
	if st := c.stats("6"); !strings.Contains(st, " subscribe=1 unsubscribe=1") {
		t.Errorf("fixture stats %q: want the last subscriber's detach to unsubscribe", st)
	}
}

// A client that stops reading is detached once its queue is full; the
// others never wait for it.
func TestSlowClientDetached(t *testing.T) {
	h := newHarness(t, fixtureArgv(), func(c *Config) { c.MaxQueue = 256 << 10 })
	a, b := h.attach("a"), h.attach("b")
	a.initialize("0", "2025-11-25")
	b.initialize("0", "2025-11-25")
	// The test's reader for a stops taking messages once its buffer (1024)
	// fills; the pipe then fills, then the broker's queue.
	big := strings.Repeat("x", 60<<10)
	go func() {
		for i := 0; i < 2000; i++ {
			if _, err := fmt.Fprintf(a.w, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`+"\n", i, big); err != nil {
				return // detached
			}
		}
	}()
	reason := h.waitEvent("client.detach a:")
	if !strings.Contains(reason, "did not read its output") {
		t.Errorf("detach reason %q", reason)
	}
	b.call("1", "echo", `{"text":"still here"}`)
	if m := b.answer("1"); m.text() != "still here" {
		t.Errorf("b after a's detach: %s", m.raw)
	}
}

// A line over MaxLine detaches its client with a clear reason.
func TestOverlongLine(t *testing.T) {
	h := newHarness(t, fixtureArgv(), func(c *Config) { c.MaxLine = 1 << 20 })
	a, b := h.attach("a"), h.attach("b")
	a.initialize("0", "2025-11-25")
	go fmt.Fprintf(a.w, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`+"\n", strings.Repeat("y", 2<<20))
	if reason := h.waitEvent("client.detach a:"); !strings.Contains(reason, "longer than the 1048576-byte limit") {
		t.Errorf("detach reason %q", reason)
	}
	a.closed()
	b.initialize("0", "2025-11-25")
	b.call("1", "echo", `{"text":"fine"}`)
	if m := b.answer("1"); m.text() != "fine" {
		t.Errorf("b: %s", m.raw)
	}
}

// Invalid messages get JSON-RPC errors and go nowhere.
func TestInvalidMessages(t *testing.T) {
	h := newHarness(t, fixtureArgv(), nil)
	a := h.attach("a")
	for _, tc := range []struct {
		line string
		code int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":`, -32700},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, -32600},
		{`{"jsonrpc":"2.0","id":{},"method":"ping"}`, -32600},
	} {
		a.send("%s", tc.line)
		if m := a.next(); m.Error == nil || m.Error.Code != tc.code || string(m.ID) != "null" {
			t.Errorf("%s answered %s, want error %d with id null", tc.line, m.raw, tc.code)
		}
	}
	a.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if m := a.answer("2"); m.Error != nil {
		t.Errorf("ping after invalid messages: %s", m.raw)
	}
}

// Stopping the broker closes the upstream's stdin (the fixture exits on
// EOF) and every client's output.
func TestStop(t *testing.T) {
	h := newHarness(t, fixtureArgv(), nil)
	a := h.attach("a")
	a.initialize("0", "2025-11-25")
	pid := h.b.Stats().UpstreamPID
	h.cancel()
	if err := <-h.runErr; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	h.b.Wait()
	a.closed()
	if e := h.waitEvent("upstream.exit"); !strings.Contains(e, fmt.Sprintf("pid %d stopped: exit status 0", pid)) {
		t.Errorf("exit event %q, want a clean exit on stdin EOF", e)
	}
	if err := h.b.Attach("late", nil, nil); err == nil {
		t.Error("Attach after stop succeeded")
	}
}

// An upstream that ignores its stdin's EOF and SIGTERM is killed.
func TestStopEscalates(t *testing.T) {
	h := newHarness(t, []string{bin, "_fixture", "ignore-term"}, func(c *Config) { c.StopTimeout = 100 * time.Millisecond })
	pid := h.b.Stats().UpstreamPID
	waitIgnoresTerm(t, pid) // a SIGTERM before that would end it: no test of the escalation
	h.cancel()
	if err := <-h.runErr; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if e := h.waitEvent("upstream.exit"); e != fmt.Sprintf("upstream.exit pid %d stopped: signal: killed", pid) {
		t.Errorf("exit event %q, want the SIGKILL", e)
	}
}

// An upstream that cannot start fails Run at once, with the reason.
func TestStartFails(t *testing.T) {
	b, err := New(Config{Argv: []string{filepath.Join(t.TempDir(), "no-such-server")}})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no-such-server") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Run = %v, want the start error", err)
	}
	b.Wait()
	if _, err := New(Config{}); err == nil {
		t.Error("New without Argv succeeded")
	}
}

// Messages that arrive while the upstream is down (before Run, or during a
// restart's backoff and re-initialize) wait and are delivered in order.
func TestHeldWhileDown(t *testing.T) {
	t.Run("before-run", func(t *testing.T) {
		b, err := New(Config{Argv: fixtureArgv()})
		if err != nil {
			t.Fatal(err)
		}
		h := &harness{t: t, b: b}
		c := h.attach("early")
		if err := b.Attach("early", nil, nil); !errors.Is(err, ErrDuplicate) {
			t.Errorf("a second Attach of the id: %v, want ErrDuplicate", err)
		}
		c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
		c.call("2", "echo", `{"text":"waited"}`)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- b.Run(ctx) }()
		defer func() { cancel(); <-done; b.Wait() }()
		if m := c.answer("1"); m.Error != nil {
			t.Errorf("initialize: %s", m.raw)
		}
		if m := c.answer("2"); m.text() != "waited" {
			t.Errorf("call: %s", m.raw)
		}
	})
	t.Run("restart", func(t *testing.T) {
		h := newHarness(t, fixtureArgv(), func(c *Config) { c.RestartMin = 300 * time.Millisecond })
		a := h.attach("a")
		a.initialize("0", "2025-11-25")
		pid := h.b.Stats().UpstreamPID
		a.call("1", "crash", "{}")
		a.answer("1")
		// The upstream is down for the backoff: these wait for the new
		// run and its replayed initialize.
		for i := 2; i < 12; i++ {
			a.call(fmt.Sprint(i), "echo", fmt.Sprintf(`{"text":"%d"}`, i))
		}
		for i := 2; i < 12; i++ {
			if m := a.answer(fmt.Sprint(i)); m.text() != fmt.Sprint(i) {
				t.Errorf("call %d after the crash: %s", i, m.raw)
			}
		}
		if st := a.stats("12"); strings.HasPrefix(st, fmt.Sprintf("pid=%d ", pid)) || !strings.Contains(st, " initialize=1 initialized=1 ") {
			t.Errorf("fixture stats %q: want a new run, initialized once", st)
		}
	})
}

// The broker answers the server's pings itself: no client is asked and the
// server is not flagged.
func TestServerPing(t *testing.T) {
	h := newHarness(t, fixtureArgv(), nil)
	a, b := h.attach("a"), h.attach("b")
	a.initialize("0", "2025-11-25")
	b.initialize("0", "2025-11-25")
	a.call("1", "slow", `{"steps":1000,"ms":50}`)
	b.call("1", "ping", "{}")
	if m := b.answer("1"); m.text() != "{}" {
		t.Errorf("ping answered %s, want the broker's empty result", m.raw)
	}
	if s := h.b.Stats(); s.Unsafe {
		t.Errorf("a ping flagged the server: %q", s.UnsafeReason)
	}
	for _, m := range append(a.drain(), b.drain()...) {
		if m.Method == "ping" {
			t.Errorf("a client was pinged: %s", m.raw)
		}
	}
}

// A client on raw descriptors (as received over a unix socket) wrapped by
// PollableFile is stopped by Detach even though it never writes.
func TestPollableFileDetach(t *testing.T) {
	h := newHarness(t, fixtureArgv(), nil)
	var in, out [2]int
	if err := syscall.Pipe(in[:]); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Pipe(out[:]); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(in[1])
	defer syscall.Close(out[0])
	r, err := PollableFile(in[0], "client-stdin")
	if err != nil {
		t.Fatal(err)
	}
	w, err := PollableFile(out[1], "client-stdout")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.b.Attach("fd", r, w); err != nil {
		t.Fatal(err)
	}
	h.b.Detach("fd")
	h.waitEvent("client.detach fd:")
	// The broker closed its ends: our read end of its output sees EOF.
	buf := make([]byte, 1)
	if n, err := syscall.Read(out[0], buf); n != 0 || err != nil {
		t.Errorf("read after detach = %d, %v; want EOF", n, err)
	}
}

// Large answers go through pooled buffers, recycled once written: many
// in flight to two clients at once, each must arrive whole and unmixed.
func TestLargeAnswersPooled(t *testing.T) {
	h := newHarness(t, fixtureArgv(), nil)
	clients := []*tclient{h.attach("a"), h.attach("b")}
	const n = 12
	text := func(c, i int) string {
		return strings.Repeat(fmt.Sprintf("%c%d.", 'a'+c, i), (poolMin+i*37<<10)/4)
	}
	for ci, c := range clients {
		c.initialize("0", "2025-11-25")
		go func() {
			for i := 1; i <= n; i++ {
				if _, err := fmt.Fprintf(c.w, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`+"\n", i, text(ci, i)); err != nil {
					return
				}
			}
		}()
	}
	for ci, c := range clients {
		for i := 1; i <= n; i++ {
			m := c.answer(strconv.Itoa(i))
			if got, want := m.text(), text(ci, i); got != want {
				t.Fatalf("client %s, answer %d: %d bytes starting %.20q, want %d bytes starting %.20q", c.id, i, len(got), got, len(want), want)
			}
		}
	}
}

// waitIgnoresTerm waits until pid ignores SIGTERM (its SigIgn mask in
// /proc says so): the fixture sets that up first thing, but a loaded
// machine may signal it before. Where /proc cannot tell, it returns.
func waitIgnoresTerm(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
				if mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64); err == nil && mask&(1<<(15-1)) != 0 {
					return
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("upstream %d does not ignore SIGTERM after 30s", pid)
}
