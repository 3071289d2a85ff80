package broker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/internal/jsonrpc"
	"github.com/seed-86a41135/supervisor/internal/lazycache"
)

// client is one attached client. Its fields other than in, out, q and
// stop are guarded by Broker.mu.
type client struct {
	id      string
	in      io.ReadCloser
	out     io.WriteCloser
	q       *queue
	stop    chan struct{} // closed on detach
	inOnce  sync.Once
	outOnce sync.Once
	log     hclog.Logger

	detached  bool
	fromCache bool              // its initialize was answered from the cache
	byOrig    map[string]uint64 // its request id (raw) -> upstream id, for cancellations
	subs      map[string]bool   // uris it subscribed to
	inflight  int
	messages  uint64
	// replay and rest are what its front left (AttachAfterFront), read
	// before in; muted counts, by raw id, the answers to replayed
	// requests still to be dropped: the front gave them already.
	replay, rest []byte
	muted        map[string]int
	// handshakeFailed is why its initialize failed (the server crashed
	// or refused it): until it initializes again, its requests are
	// answered with that, never sent to a server it has no handshake
	// with, whenever they arrive.
	handshakeFailed string
}

type pendingKind int

const (
	kindClient    pendingKind = iota // a client's request
	kindInit                         // the first client's initialize: its result is cached
	kindSubscribe                    // the upstream's one subscribe for a uri
	kindReinit                       // the initialize replayed after a restart: swallowed
	kindInternal                     // the broker's own request: answer swallowed
	kindDiscover                     // a client's server/discover: its result is learned from
	kindListen                       // the broker's own subscriptions/listen
	kindFill                         // the broker's own list call, filling the cache
)

// pending is a request sent (or waiting to be sent) upstream.
type pending struct {
	kind      pendingKind
	c         *client // nil once it detached (kindInit, kindSubscribe go on)
	origID    []byte
	origToken []byte // its _meta.progressToken; nil if none
	uri       string // kindSubscribe
	cacheKey  string // kindFill: where its answer goes in the lazy cache (listKey)
	sent      bool   // queued to the current upstream (not held)
}

// srvReq is a server-to-client request forwarded to c.
type srvReq struct {
	c    *client
	up   *upstream
	upID []byte // the id the server chose
}

// sub is the upstream's subscription to one uri.
type sub struct {
	clients map[*client]bool
	active  bool     // the upstream accepted it
	waiters []waiter // later subscribers while the first subscribe is in flight
}

type waiter struct {
	c  *client
	id []byte
}

// initState is the legacy handshake: the first client's initialize goes
// upstream; its result answers every later client asking the same version.
type initState struct {
	msg        []byte // the first client's initialize, replayed after restarts
	id         jsonrpc.Span
	tok        jsonrpc.Span // its _meta.progressToken: replayed as the new id, never as the client's
	requested  string       // protocol version the first client asked for
	negotiated string       // and the one the server answered
	result     []byte       // the cached result; nil until the first success
	inFlight   bool
	waiters    []initWaiter
}

type initWaiter struct {
	c       *client
	id      []byte
	version string
}

func (s *initState) replay(id uint64) []byte {
	n := strconv.AppendUint(nil, id, 10)
	return jsonrpc.Splice(s.msg, jsonrpc.Edit{Span: s.id, Value: n}, jsonrpc.Edit{Span: s.tok, Value: n})
}

// matches reports whether a client asking version gets the cached result:
// the server answered the first client's version with negotiated, and
// would answer negotiated itself with negotiated.
func (s *initState) matches(version string) bool {
	return version == s.requested || version == s.negotiated
}

// upstreamLimit is how much may wait for the upstream before clients'
// readers pause (backpressure), and how much is held while it restarts.
const upstreamLimit = 16 << 20

func (b *Broker) newID() uint64 {
	b.nextID++
	return b.nextID
}

// readClient routes the client's messages until EOF or detach.
func (b *Broker) readClient(c *client) {
	defer b.wg.Done()
	if !b.replayFront(c) {
		return
	}
	var in io.Reader = c.in
	if len(c.rest) > 0 {
		in = io.MultiReader(bytes.NewReader(c.rest), c.in)
		c.rest = nil
	}
	lr := newLineReader(in, b.cfg.MaxLine)
	for {
		line, err := lr.next()
		if err != nil {
			reason := "closed its input (EOF)"
			switch {
			case errors.Is(err, errLineTooLong):
				reason = fmt.Sprintf("sent a message longer than the %d-byte limit", b.cfg.MaxLine)
				c.log.Error("client sent an overlong message; detaching it", "limit", b.cfg.MaxLine)
			case !errors.Is(err, io.EOF):
				reason = "read: " + err.Error()
			}
			b.mu.Lock()
			b.detachLocked(c, reason, false)
			b.unlock()
			return
		}
		if !b.waitUpstreamRoom(c) {
			return
		}
		b.fromClient(c, line)
	}
}

// replayFront reads what c's front consumed as c's own messages, their
// answers muted; false if c is detached meanwhile.
func (b *Broker) replayFront(c *client) bool {
	replay := c.replay
	c.replay = nil
	for len(replay) > 0 {
		line, after, _ := bytes.Cut(replay, []byte{'\n'})
		replay = after
		if e, err := jsonrpc.Parse(line); err == nil && e.IsRequest() {
			b.mu.Lock()
			if c.muted == nil {
				c.muted = map[string]int{}
			}
			c.muted[string(span(line, e.ID))]++
			b.unlock()
		}
		if !b.waitUpstreamRoom(c) {
			return false
		}
		b.fromClient(c, line)
	}
	return true
}

// mutedAnswer reports whether msg answers a request of c's front (and
// counts it off): the front answered it already. refused says the answer
// is an error, where the front had answered with a result.
func mutedAnswer(c *client, msg []byte) (muted, refused bool) {
	if len(c.muted) == 0 {
		return false, false
	}
	e, err := jsonrpc.Parse(msg)
	if err != nil || !e.IsResponse() {
		return false, false
	}
	id := string(span(msg, e.ID))
	n := c.muted[id]
	if n == 0 {
		return false, false
	}
	if n == 1 {
		delete(c.muted, id)
	} else {
		c.muted[id] = n - 1
	}
	return true, !e.HasResult
}

// waitUpstreamRoom pauses a client's reader while the upstream is behind
// on its input; false if the client is detached meanwhile.
func (b *Broker) waitUpstreamRoom(c *client) bool {
	for {
		b.mu.Lock()
		u := b.up
		b.mu.Unlock()
		if u == nil {
			return true
		}
		full, drained := u.q.over(upstreamLimit)
		if !full {
			return true
		}
		select {
		case <-drained:
		case <-u.exited:
		case <-c.stop:
			return false
		}
	}
}

// writeClient writes the client's queue to its output until the queue
// is closed and empty (a detach), then closes the output.
func (b *Broker) writeClient(c *client) {
	defer b.wg.Done()
	defer c.closeOut()
	w := bufio.NewWriterSize(c.out, 64<<10)
	for {
		batch, ok := c.q.take(nil)
		if !ok {
			return
		}
		if err := writeBatch(w, batch, c.q.pool); err != nil {
			b.mu.Lock()
			b.detachLocked(c, "write: "+err.Error(), true)
			b.unlock()
			return
		}
		c.q.done()
	}
}

// drainTimeout bounds how long a detached client's queued messages (the
// errors of a crash, say) are still written before its output is closed.
const drainTimeout = 5 * time.Second

func (c *client) closeIn()  { c.inOnce.Do(func() { c.in.Close() }) }
func (c *client) closeOut() { c.outOnce.Do(func() { c.out.Close() }) }

// detachLocked removes c: its requests in flight are cancelled upstream,
// its subscriptions dropped, server requests to it refused, its input
// closed. What is queued for it is still written (for up to drainTimeout)
// unless force: a client that does not read gets its output closed now.
func (b *Broker) detachLocked(c *client, reason string, force bool) {
	if c.detached {
		return
	}
	c.detached = true
	delete(b.clients, c.id)
	close(c.stop)
	c.q.close()
	for id, p := range b.pending {
		if p.c != c {
			continue
		}
		switch p.kind {
		case kindInit, kindSubscribe:
			// Shared outcomes: the cache and the other subscribers still
			// need the answer.
			b.unclaim(p)
		default:
			b.sendUp(cancelled(id, "client disconnected"), nil)
			b.dropPending(id, p)
		}
	}
	b.init.waiters = dropWaiters(b.init.waiters, func(w initWaiter) bool { return w.c == c })
	b.dropListens(c, nil)
	for uri := range c.subs {
		s := b.subs[uri]
		if s == nil {
			continue
		}
		delete(s.clients, c)
		s.waiters = dropWaiters(s.waiters, func(w waiter) bool { return w.c == c })
		if len(s.clients) == 0 && s.active {
			delete(b.subs, uri)
			b.internalRequest("resources/unsubscribe", uri)
		}
	}
	for id, r := range b.srvReqs {
		if r.c == c {
			b.answerServer(r.up, r.upID, CodeInternal, "supervisor broker: the client this request went to disconnected")
			delete(b.srvReqs, id)
		}
	}
	b.emit("client.detach", c.id+": "+reason)
	c.log.Info("client detached", "reason", reason)
	c.closeIn()
	if force {
		c.closeOut()
	} else {
		time.AfterFunc(drainTimeout, c.closeOut)
	}
}

func dropWaiters[W any](ws []W, drop func(W) bool) []W {
	out := ws[:0]
	for _, w := range ws {
		if !drop(w) {
			out = append(out, w)
		}
	}
	return out
}

// unclaim detaches a pending request from its client, which no longer
// waits for it.
func (b *Broker) unclaim(p *pending) {
	if p.c != nil {
		p.c.inflight--
		p.c = nil
	}
}

func (b *Broker) addPending(id uint64, p *pending) {
	b.pending[id] = p
	if p.c != nil {
		p.c.inflight++
		p.c.byOrig[string(p.origID)] = id
	}
}

func (b *Broker) dropPending(id uint64, p *pending) {
	delete(b.pending, id)
	if p.c != nil {
		p.c.inflight--
		if b.pending[p.c.byOrig[string(p.origID)]] == nil {
			delete(p.c.byOrig, string(p.origID))
		}
	}
	if len(b.pending) == 0 {
		b.idleSince = time.Now()
	}
}

// failPending answers a pending request with an error (to its client and
// anyone waiting on the same outcome) and forgets it.
func (b *Broker) failPending(id uint64, p *pending, code int, msg string) {
	switch p.kind {
	case kindListen:
		// The upstream went; markReady opens the listen on the next one,
		// and the clients' listens stay open.
		b.listen.upID, b.listen.acked = 0, false
	case kindInit:
		why := "supervisor broker: the MCP server's handshake failed (" + msg + "); initialize again"
		for _, w := range b.init.waiters {
			b.deliver(w.c, errorResponse(w.id, code, msg))
			w.c.handshakeFailed = why
		}
		if p.c != nil {
			p.c.handshakeFailed = why
		}
		b.init = initState{}
		defer b.abortHandshake(why)
	case kindReinit:
		if b.up != nil && !b.stopped {
			// The replay's answer was lost (refused as ambiguous): the
			// clients initialized long ago, so the run goes on as if it
			// had been refused.
			defer b.reinitialized()
		}
	case kindSubscribe:
		if s := b.subs[p.uri]; s != nil {
			for _, w := range s.waiters {
				b.deliver(w.c, errorResponse(w.id, code, msg))
				delete(s.clients, w.c)
				delete(w.c.subs, p.uri)
			}
			if p.c != nil {
				delete(s.clients, p.c)
				delete(p.c.subs, p.uri)
			}
			s.waiters = nil
			if len(s.clients) == 0 {
				delete(b.subs, p.uri)
			}
		}
	}
	if p.c != nil {
		b.deliver(p.c, errorResponse(p.origID, code, msg))
	}
	b.dropPending(id, p)
}

// heldMsg is a message waiting for a ready upstream, with the pending
// request it carries (nil for a notification).
type heldMsg struct {
	b []byte
	p *pending
}

// sendUp queues a client's message for the upstream in order: held while
// the upstream is down, re-initializing or not yet initialized. p, if
// any, is the pending request msg carries.
func (b *Broker) sendUp(msg []byte, p *pending) bool {
	b.relayed++
	if b.up != nil && b.ready {
		b.enqueue(b.up.q, msg, 0)
		if p != nil {
			p.sent = true
		}
		return true
	}
	if b.heldN+len(msg) > upstreamLimit {
		return false
	}
	b.held = append(b.held, heldMsg{msg, p})
	b.heldN += len(msg)
	return true
}

// markReady lets clients' messages through to the current upstream:
// subscriptions are renewed first, then what was held is sent, up to and
// including a first initialize: what follows it waits until the upstream
// has its answer and notifications/initialized (initAnswered), so no
// client's request reaches a fresh upstream before its handshake is done.
func (b *Broker) markReady() {
	b.ready = true
	if b.init.msg == nil || b.initialized {
		// Once per run, and not ahead of a first initialize.
		b.renew()
	}
	for i, m := range b.held {
		b.enqueue(b.up.q, m.b, 0)
		b.heldN -= len(m.b)
		if m.p == nil {
			continue
		}
		m.p.sent = true
		if m.p.kind == kindInit {
			b.ready = false
			b.held = slices.Delete(b.held, 0, i+1)
			return
		}
	}
	b.held, b.heldN = nil, 0
}

// renew renews the clients' subscriptions on a new run (once) and opens
// the broker's listen if clients listen.
func (b *Broker) renew() {
	if !b.renewed {
		b.renewed = true
		for uri, s := range b.subs {
			if s.active {
				id := b.newID()
				b.pending[id] = &pending{kind: kindInternal, sent: true}
				b.enqueue(b.up.q, request(id, "resources/subscribe", uri), 0)
			}
		}
	}
	if len(b.listen.clients) > 0 && b.listen.upID == 0 {
		b.openListen()
	}
}

// abortHandshake ends a first initialize that got no result (refused,
// lost, or its upstream died): what waited behind it was meant for an
// initialized server, so it is answered with msg, never sent to one that
// is not; the gate opens for whatever comes next (a new initialize).
func (b *Broker) abortHandshake(msg string) {
	for id, p := range b.pending {
		if !p.sent {
			b.failPending(id, p, CodeUnavailable, msg)
		}
	}
	b.held, b.heldN = nil, 0
	if b.up != nil && !b.stopped {
		b.ready = true
	}
}

// reinitialized ends a restart's replayed initialize: the upstream hears
// notifications/initialized, then what waited, then the cache's fills.
func (b *Broker) reinitialized() {
	b.enqueue(b.up.q, notification("notifications/initialized", ""), 0)
	b.initialized = true
	b.markReady()
	b.fillCache()
}

// internalRequest sends the broker's own request; its answer is dropped.
func (b *Broker) internalRequest(method, uri string) {
	id := b.newID()
	p := &pending{kind: kindInternal}
	b.pending[id] = p
	b.sendUp(request(id, method, uri), p)
}

// answerServer answers a server-to-client request of u with an error.
func (b *Broker) answerServer(u *upstream, id []byte, code int, msg string) {
	if u != nil && u == b.up {
		b.enqueue(u.q, errorResponse(id, code, msg), 0)
	}
}

// deliver queues msg for c; a client that has let MaxQueue bytes pile up
// is detached rather than allowed to hold up the others.
func (b *Broker) deliver(c *client, msg []byte) {
	b.deliverMsg(c, outMsg{b: msg})
}

func (b *Broker) deliverMsg(c *client, msg outMsg) {
	if c == nil || c.detached {
		return
	}
	if muted, refused := mutedAnswer(c, msg.b); muted {
		if msg.buf != nil {
			b.bufs.put(msg.buf)
		}
		if refused {
			// The front told the host yes (its initialize, say, from the
			// cache) and the broker says no (the shared server speaks
			// another version now): the host cannot be told otherwise
			// after the fact, so it loses the connection, as a server
			// that fails would end it.
			c.log.Warn("the broker refuses what the client's front answered; detaching it", "answer", preview(msg.b))
			b.emit("client.front_refused", c.id+": "+preview(msg.b))
			b.detachLocked(c, "the broker refused what its front had answered: "+preview(msg.b), true)
		}
		return
	}
	if !b.enqueueMsg(c.q, msg, b.cfg.MaxQueue) {
		c.log.Warn("client is not reading its output; detaching it", "queued_limit", b.cfg.MaxQueue)
		b.detachLocked(c, fmt.Sprintf("did not read its output: over %d bytes queued", b.cfg.MaxQueue), true)
		return
	}
	c.messages++
	b.relayed++
}

// splice is jsonrpc.Splice for a message to one peer: a large one goes
// into a pooled buffer, recycled once written.
func (b *Broker) splice(line []byte, e jsonrpc.Edit) outMsg {
	n := jsonrpc.SplicedLen(line, e)
	if n < poolMin {
		return outMsg{b: jsonrpc.AppendSplice(make([]byte, 0, n), line, e)}
	}
	buf := b.bufs.get(n)
	m := jsonrpc.AppendSplice(buf, line, e)
	return outMsg{b: m, buf: m}
}

// fromClient routes one message from c.
func (b *Broker) fromClient(c *client, line []byte) {
	if len(trimSpace(line)) == 0 {
		return
	}
	e, err := jsonrpc.Parse(line)
	b.mu.Lock()
	defer b.unlock()
	if c.detached {
		return
	}
	c.messages++
	if errors.Is(err, jsonrpc.ErrAmbiguous) {
		b.refuseClient(c, line, err)
		return
	}
	if err != nil {
		code, msg := -32700, "supervisor broker: parse error: "+err.Error()
		if errors.Is(err, jsonrpc.ErrBatch) || errors.Is(err, jsonrpc.ErrNotObject) || errors.Is(err, jsonrpc.ErrEnvelope) {
			code = -32600
			msg = "supervisor broker: invalid request: " + err.Error()
		}
		c.log.Warn("client sent an invalid message", "err", err)
		b.deliver(c, errorResponse([]byte("null"), code, msg))
		return
	}
	if string(span(line, e.JSONRPC)) != `"2.0"` {
		// Some servers close the connection on another version (the Go
		// SDK's does): one client must not end the server for all.
		c.log.Warn("client sent a message without \"jsonrpc\":\"2.0\"; refusing it")
		if e.IsRequest() {
			b.deliver(c, errorResponse(clone(span(line, e.ID)), -32600, `supervisor broker: invalid request: "jsonrpc" must be "2.0"`))
		}
		return
	}
	switch {
	case e.IsRequest():
		if c.handshakeFailed != "" {
			if e.Method != "initialize" {
				b.deliver(c, errorResponse(clone(span(line, e.ID)), CodeUnavailable, c.handshakeFailed))
				return
			}
			c.handshakeFailed = ""
		}
		if b.fromCache(c, line, e) {
			return
		}
		switch e.Method {
		case "initialize":
			b.clientInitialize(c, line, e)
		case "resources/subscribe":
			b.clientSubscribe(c, line, e)
		case "resources/unsubscribe":
			b.clientUnsubscribe(c, line, e)
		case "subscriptions/listen":
			b.clientListenRequest(c, line, e)
		case "server/discover":
			b.forward(c, line, e, kindDiscover)
		default:
			b.forward(c, line, e, kindClient)
		}
	case e.IsResponse():
		n, ok := parseID(line, e.ID)
		r := b.srvReqs[n]
		if !ok || r == nil || r.c != c {
			c.log.Debug("dropping a response to no request of ours", "id", string(span(line, e.ID)))
			return
		}
		delete(b.srvReqs, n)
		if r.up == b.up && b.up != nil {
			b.enqueue(b.up.q, jsonrpc.Splice(line, jsonrpc.Edit{Span: e.ID, Value: r.upID}), 0)
			b.relayed++
		}
	case e.IsNotification():
		switch e.Method {
		case "notifications/initialized":
			// The broker owns the upstream's handshake: it sends this
			// itself once the upstream answered initialize (initAnswered).
			return
		case "notifications/cancelled":
			if b.dropListens(c, span(line, e.RequestID)) {
				return // a listen ends without an answer
			}
			id, ok := c.byOrig[string(span(line, e.RequestID))]
			p := b.pending[id]
			if !ok || p == nil || (p.kind != kindClient && p.kind != kindDiscover) {
				return // answered already, or not cancellable (initialize)
			}
			b.sendUp(jsonrpc.Splice(line, jsonrpc.Edit{Span: e.RequestID, Value: strconv.AppendUint(nil, id, 10)}), nil)
			b.dropPending(id, p)
		default:
			b.sendUp(clone(line), nil)
		}
	default:
		if e.ID.Present() {
			b.deliver(c, errorResponse(clone(span(line, e.ID)), -32600, "supervisor broker: invalid request: a message with an id needs a method, a result or an error"))
		}
	}
}

// forward sends a client's request upstream under a broker-unique id (and
// progress token), remembering how to map the answer back.
func (b *Broker) forward(c *client, line []byte, e jsonrpc.Envelope, kind pendingKind) *pending {
	id := b.newID()
	idb := strconv.AppendUint(nil, id, 10)
	p := &pending{kind: kind, c: c, origID: clone(span(line, e.ID))}
	if b.up == nil {
		b.wake() // a lazy or idle-stopped upstream is wanted now
	}
	edits := [2]jsonrpc.Edit{{Span: e.ID, Value: idb}}
	if e.ProgressToken.Present() {
		// The token is the upstream id: unique, and found again in one lookup.
		p.origToken = clone(span(line, e.ProgressToken))
		edits[1] = jsonrpc.Edit{Span: e.ProgressToken, Value: idb}
	}
	msg := jsonrpc.Splice(line, edits[:]...)
	b.addPending(id, p)
	if !b.sendUp(msg, p) {
		b.failPending(id, p, CodeUnavailable, "supervisor broker: the MCP server is restarting and too much is queued for it; retry shortly")
		return nil
	}
	return p
}

func (b *Broker) clientInitialize(c *client, line []byte, e jsonrpc.Envelope) {
	version := ""
	if sp, err := jsonrpc.Lookup(line, "params", "protocolVersion"); err == nil && sp.Present() {
		version, _ = jsonrpc.DecodeString(span(line, sp))
	}
	id := clone(span(line, e.ID))
	switch {
	case b.init.result != nil:
		b.answerInit(c, id, version)
	case b.init.inFlight:
		b.init.waiters = append(b.init.waiters, initWaiter{c, id, version})
	default:
		p := b.forward(c, line, e, kindInit)
		if p == nil {
			return
		}
		b.init = initState{msg: clone(line), id: e.ID, tok: e.ProgressToken, requested: version, inFlight: true}
		if p.sent {
			b.ready = false // the rest waits for the handshake (markReady)
		}
	}
}

// answerInit answers a later client's initialize from the cache.
func (b *Broker) answerInit(c *client, id []byte, version string) {
	if !b.init.matches(version) {
		msg := fmt.Sprintf("supervisor broker: this shared MCP server speaks protocol version %s; a client asking for %s needs a server of its own (run it without sharing)", b.init.negotiated, version)
		b.emit("client.needs_own_upstream", fmt.Sprintf("%s: asked for protocol version %s, the shared server speaks %s", c.id, version, b.init.negotiated))
		b.deliver(c, errorResponse(id, CodeNeedsOwnUpstream, msg))
		return
	}
	c.fromCache = true
	b.deliver(c, lazycache.Result(id, b.init.result))
}

func (b *Broker) clientSubscribe(c *client, line []byte, e jsonrpc.Envelope) {
	uri := e.URI
	id := clone(span(line, e.ID))
	s := b.subs[uri]
	switch {
	case c.subs[uri] && s != nil && s.active:
		b.deliver(c, lazycache.Result(id, []byte("{}")))
	case s == nil:
		s = &sub{clients: map[*client]bool{c: true}}
		b.subs[uri] = s
		c.subs[uri] = true
		if p := b.forward(c, line, e, kindSubscribe); p != nil {
			p.uri = uri
		}
	case !s.active:
		s.clients[c] = true
		c.subs[uri] = true
		s.waiters = append(s.waiters, waiter{c, id})
	default:
		s.clients[c] = true
		c.subs[uri] = true
		b.deliver(c, lazycache.Result(id, []byte("{}")))
	}
}

func (b *Broker) clientUnsubscribe(c *client, line []byte, e jsonrpc.Envelope) {
	uri := e.URI
	s := b.subs[uri]
	if !c.subs[uri] || s == nil {
		b.deliver(c, lazycache.Result(clone(span(line, e.ID)), []byte("{}")))
		return
	}
	delete(c.subs, uri)
	delete(s.clients, c)
	if len(s.clients) == 0 && s.active {
		delete(b.subs, uri)
		b.forward(c, line, e, kindClient) // the last subscriber: the upstream answers it
		return
	}
	b.deliver(c, lazycache.Result(clone(span(line, e.ID)), []byte("{}")))
}

// fromUpstream routes one message from u.
func (b *Broker) fromUpstream(u *upstream, line []byte) {
	if len(trimSpace(line)) == 0 {
		return
	}
	e, err := jsonrpc.Parse(line)
	b.mu.Lock()
	defer b.unlock()
	if u != b.up {
		return // a dead run's last words: its requests were answered already
	}
	if errors.Is(err, jsonrpc.ErrAmbiguous) {
		b.refuseUpstream(u, line, err)
		return
	}
	if err != nil {
		b.log.Warn("upstream wrote a line that is not a JSON-RPC message; dropping it", "pid", u.pid, "err", err, "line", preview(line))
		return
	}
	switch {
	case e.IsResponse():
		n, ok := parseID(line, e.ID)
		p := b.pending[n]
		if !ok || p == nil {
			b.log.Debug("dropping an answer to no request in flight", "id", string(span(line, e.ID)))
			return
		}
		b.upstreamAnswer(n, p, line, e)
	case e.IsRequest():
		b.serverRequest(u, line, e)
	case e.IsNotification():
		switch e.Method {
		case "notifications/progress":
			n, ok := parseID(line, e.NotifToken)
			p := b.pending[n]
			if !ok || p == nil || p.origToken == nil || p.c == nil {
				return
			}
			b.deliver(p.c, jsonrpc.Splice(line, jsonrpc.Edit{Span: e.NotifToken, Value: p.origToken}))
		case "notifications/cancelled":
			raw := span(line, e.RequestID)
			for id, r := range b.srvReqs {
				if r.up == u && string(r.upID) == string(raw) {
					delete(b.srvReqs, id)
					b.deliver(r.c, jsonrpc.Splice(line, jsonrpc.Edit{Span: e.RequestID, Value: strconv.AppendUint(nil, id, 10)}))
				}
			}
		case "notifications/resources/updated":
			if s := b.subs[e.URI]; s != nil {
				msg := clone(line)
				for c := range s.clients {
					b.deliver(c, msg)
				}
			}
		default:
			if b.upstreamListenNote(line, e) {
				return
			}
			// list_changed, logging messages and the rest concern everyone.
			msg := clone(line)
			for _, c := range b.clients {
				b.deliver(c, msg)
			}
		}
	default:
		b.log.Warn("upstream wrote a message that is neither request, response nor notification; dropping it", "pid", u.pid, "line", preview(line))
	}
}

// upstreamAnswer routes the answer to pending request n.
func (b *Broker) upstreamAnswer(n uint64, p *pending, line []byte, e jsonrpc.Envelope) {
	reply := func(c *client, id []byte) {
		if c != nil && !c.detached {
			b.deliverMsg(c, b.splice(line, jsonrpc.Edit{Span: e.ID, Value: id}))
		}
	}
	switch p.kind {
	case kindClient:
		// A client's answer never fills the lazy cache: only the broker's
		// own requests do (lazy.go), so no client can choose what another
		// session is told.
		if p.c != nil {
			reply(p.c, p.origID)
		}
	case kindDiscover:
		if p.c != nil {
			reply(p.c, p.origID)
		}
		// A result, or the refusal of a server that has no such method,
		// says what the server speaks; any other error says only that
		// this client's request was wrong, which must not unlearn it.
		if code, err := jsonrpc.Lookup(line, "error", "code"); e.HasResult || err == nil && string(span(line, code)) == "-32601" {
			b.learnDiscover(line)
		}
		if b.stateless {
			b.fillDiscover()
		}
	case kindFill:
		b.filled(p, line, e)
	case kindListen:
		b.listenEnded(line, e)
	case kindInit:
		if p.c != nil {
			reply(p.c, p.origID)
		}
		waiters := b.init.waiters
		if !e.HasResult {
			why := "supervisor broker: the MCP server refused the initialize this request waited behind; initialize again"
			for _, w := range waiters {
				reply(w.c, w.id)
				w.c.handshakeFailed = why
			}
			if p.c != nil {
				p.c.handshakeFailed = why
			}
			b.init = initState{}
			b.abortHandshake(why)
			break
		}
		// The handshake ends here, before anything held reaches the
		// upstream: the client would send this next, and any other
		// client's request must not overtake it.
		b.enqueue(b.up.q, notification("notifications/initialized", ""), 0)
		b.initialized = true
		sp, _ := jsonrpc.Lookup(line, "result")
		b.init.result = clone(span(line, sp))
		if v, err := jsonrpc.Lookup(line, "result", "protocolVersion"); err == nil && v.Present() {
			b.init.negotiated, _ = jsonrpc.DecodeString(span(line, v))
		}
		b.init.inFlight, b.init.waiters = false, nil
		b.cacheInit(b.init.requested, b.init.negotiated, b.init.result)
		for _, w := range waiters {
			b.answerInit(w.c, w.id, w.version)
		}
		b.markReady()
		b.fillCache()
	case kindReinit:
		if e.HasError {
			b.log.Warn("the restarted upstream refused the replayed initialize", "line", preview(line))
		} else if sp, err := jsonrpc.Lookup(line, "result"); err == nil {
			negotiated := b.init.negotiated
			if v, err := jsonrpc.Lookup(line, "result", "protocolVersion"); err == nil && v.Present() {
				negotiated, _ = jsonrpc.DecodeString(span(line, v))
			}
			b.cacheInit(b.init.requested, negotiated, span(line, sp))
		}
		b.reinitialized()
	case kindSubscribe:
		s := b.subs[p.uri]
		if s == nil {
			break
		}
		if p.c != nil {
			reply(p.c, p.origID)
		}
		for _, w := range s.waiters {
			reply(w.c, w.id)
		}
		if e.HasError {
			// Everyone who asked hears the refusal and holds no subscription.
			for _, w := range s.waiters {
				delete(s.clients, w.c)
				delete(w.c.subs, p.uri)
			}
			if p.c != nil {
				delete(s.clients, p.c)
				delete(p.c.subs, p.uri)
			}
		}
		s.waiters = nil
		if e.HasError && len(s.clients) == 0 {
			delete(b.subs, p.uri)
			break
		}
		s.active = true
		if len(s.clients) == 0 {
			delete(b.subs, p.uri)
			b.internalRequest("resources/unsubscribe", p.uri)
		}
	}
	b.dropPending(n, p)
}

// serverRequest routes a server-to-client request: to the one client with
// a request in flight, or refused.
func (b *Broker) serverRequest(u *upstream, line []byte, e jsonrpc.Envelope) {
	upID := clone(span(line, e.ID))
	if e.Method == "ping" {
		b.enqueue(u.q, lazycache.Result(upID, []byte("{}")), 0) // the broker is alive; no client need answer
		return
	}
	var busy []*client
	for _, c := range b.clients {
		if c.inflight > 0 {
			busy = append(busy, c)
		}
	}
	if len(busy) != 1 {
		reason := fmt.Sprintf("sent %s with %d clients' requests in flight; refused, since it cannot tell whose it is", e.Method, len(busy))
		b.markUnsafe(reason)
		b.log.Warn("refusing a server-to-client request", "method", e.Method, "clients_in_flight", len(busy))
		b.answerServer(u, upID, CodeInternal, fmt.Sprintf("supervisor broker: %s cannot be routed: this MCP server is shared and %d clients have requests in flight; run it without sharing to use %s", e.Method, len(busy), e.Method))
		return
	}
	c := busy[0]
	b.markUnsafe(fmt.Sprintf("sent %s (routed to %s, the only client with a request in flight)", e.Method, c.id))
	b.nextSrv++
	b.srvReqs[b.nextSrv] = &srvReq{c: c, up: u, upID: upID}
	b.deliver(c, jsonrpc.Splice(line, jsonrpc.Edit{Span: e.ID, Value: strconv.AppendUint(nil, b.nextSrv, 10)}))
}

// markUnsafe flags the upstream as not safely shareable.
func (b *Broker) markUnsafe(reason string) {
	if b.unsafeReason == reason {
		return
	}
	b.unsafe, b.unsafeReason = true, reason
	b.emit("upstream.unsafe", reason)
}

func parseID(msg []byte, s jsonrpc.Span) (uint64, bool) {
	if !s.Present() {
		return 0, false
	}
	n, err := strconv.ParseUint(string(msg[s.Start:s.End]), 10, 64)
	return n, err == nil
}

func span(msg []byte, s jsonrpc.Span) []byte {
	if !s.Present() {
		return nil
	}
	return msg[s.Start:s.End]
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}

func preview(line []byte) string {
	if len(line) > 200 {
		return string(line[:200]) + "..."
	}
	return string(line)
}

func quote(s string) []byte {
	q, _ := json.Marshal(s)
	return q
}

func errorResponse(id []byte, code int, msg string) []byte {
	m := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	m = fmt.Appendf(m, `,"error":{"code":%d,"message":`, code)
	m = append(m, quote(msg)...)
	return append(m, "}}"...)
}

func request(id uint64, method, uri string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":%s,"params":{"uri":%s}}`, id, quote(method), quote(uri))
}

func notification(method, params string) []byte {
	if params == "" {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":%s}`, quote(method))
	}
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":%s,"params":%s}`, quote(method), params)
}

func cancelled(id uint64, reason string) []byte {
	return notification("notifications/cancelled", fmt.Sprintf(`{"requestId":%d,"reason":%s}`, id, quote(reason)))
}
