package broker

import (
	"bytes"
	"encoding/json"
	"maps"
	"strconv"
	"time"

	"github.com/seed-86a41135/supervisor/jsonrpc"
)

// Lazy start and idle stop (design §11). A lazy broker with a warm cache
// starts no upstream: a client's initialize, server/discover and list
// calls are answered from the cache, and ping by the broker. The first
// request the cache cannot answer starts the upstream, which is
// initialized with the first client's own initialize (replayed, its answer
// swallowed) before the held requests go to it. Every upstream run
// refreshes the cache (the broker lists what the server advertises); a
// list that changed is announced to every client with its list_changed
// notification, which is why the cached initialize result advertises
// listChanged. An idle upstream (Config.Idle with nothing in flight, no
// subscription, no listen, no server-to-client request ever) is stopped
// and started again on the next request, clients staying attached.

// Cache is what a lazy broker answers from while its upstream is down.
type Cache struct {
	Requested  string          `json:"requested,omitempty"`  // protocol version the cached initialize asked for
	Negotiated string          `json:"negotiated,omitempty"` // and the one the server answered
	Init       json.RawMessage `json:"init,omitempty"`       // the initialize result, listChanged advertised
	Discover   json.RawMessage `json:"discover,omitempty"`   // the server/discover result
	// DiscoverError is the error a legacy server answers server/discover
	// with: hosts probe with it first (Claude Code does), and a cached
	// refusal spares a start as much as a cached result.
	DiscoverError json.RawMessage `json:"discover_error,omitempty"`
	// Lists are list results by method and cursor (listKey).
	Lists map[string]json.RawMessage `json:"lists,omitempty"`
}

// Warm reports whether c can answer a client's handshake.
func (c *Cache) Warm() bool { return c != nil && (len(c.Init) > 0 || len(c.Discover) > 0) }

func (c *Cache) clone() *Cache {
	if c == nil {
		return nil
	}
	d := *c
	d.Lists = maps.Clone(c.Lists)
	return &d
}

// listMethods are the calls the cache answers, with the notification that
// tells clients one changed and the capability that advertises it.
var listMethods = map[string]struct{ notify, capability string }{
	"tools/list":               {"notifications/tools/list_changed", "tools"},
	"prompts/list":             {"notifications/prompts/list_changed", "prompts"},
	"resources/list":           {"notifications/resources/list_changed", "resources"},
	"resources/templates/list": {"notifications/resources/list_changed", "resources"},
}

// listKey is the cache key of a list call: its method and raw cursor,
// and the protocol version a stateless request carries in _meta (a
// server may answer each revision its own way; "" for the legacy ones,
// whose version is the connection's).
func listKey(method string, cursor []byte, version string) string {
	k := method + " " + string(cursor)
	if version != "" {
		k += " " + version
	}
	return k
}

// cacheKeyOf is the cache key of a client request, "" if not cacheable.
func cacheKeyOf(line []byte, e jsonrpc.Envelope) string {
	if e.Method == "server/discover" {
		return e.Method
	}
	if _, ok := listMethods[e.Method]; !ok {
		return ""
	}
	var cursor []byte
	if sp, err := jsonrpc.Lookup(line, "params", "cursor"); err == nil && sp.Present() {
		cursor = span(line, sp)
	}
	version := ""
	if sp, err := jsonrpc.Lookup(line, "params", "_meta", metaProtocolVersion); err == nil && sp.Present() {
		version, _ = jsonrpc.DecodeString(span(line, sp))
	}
	return listKey(e.Method, cursor, version)
}

// fromCache answers a client's request while the upstream is down, if the
// cache (or the broker itself) can; false sends it on.
func (b *Broker) fromCache(c *client, line []byte, e jsonrpc.Envelope) bool {
	if (!b.cfg.Lazy && b.cfg.Idle <= 0) || b.up != nil {
		return false // (an idle-stopped upstream's broker answers ping only)
	}
	id := clone(span(line, e.ID))
	switch e.Method {
	case "ping":
		b.deliver(c, result(id, []byte("{}")))
		return true
	case "initialize":
		if b.init.msg != nil || b.cache == nil || len(b.cache.Init) == 0 {
			return false // answered as for a running upstream, or a miss
		}
		version := ""
		if sp, err := jsonrpc.Lookup(line, "params", "protocolVersion"); err == nil && sp.Present() {
			version, _ = jsonrpc.DecodeString(span(line, sp))
		}
		if version != b.cache.Requested && version != b.cache.Negotiated {
			b.cacheMisses++
			return false
		}
		// The upstream will be initialized with this client's own request.
		b.init = initState{msg: clone(line), id: e.ID, requested: version, negotiated: b.cache.Negotiated, result: b.cache.Init}
		b.cacheHits++
		b.answerInit(c, id, version)
		return true
	}
	key := cacheKeyOf(line, e)
	if key == "" || b.cache == nil {
		return false
	}
	res, ok := b.cache.Lists[key]
	if key == "server/discover" {
		res, ok = b.cache.Discover, len(b.cache.Discover) > 0
		if !ok && len(b.cache.DiscoverError) > 0 {
			b.cacheHits++
			b.deliver(c, errorAnswer(id, b.cache.DiscoverError))
			return true
		}
	}
	if !ok {
		b.cacheMisses++
		return false
	}
	b.cacheHits++
	b.deliver(c, result(id, res))
	return true
}

// wake asks Run to start the upstream (a request waits for it).
func (b *Broker) wake() {
	select {
	case b.wantUp <- struct{}{}:
	default:
	}
}

// cacheInit keeps an initialize result, advertising listChanged for every
// list capability it has (the broker announces lists that changed).
func (b *Broker) cacheInit(requested, negotiated string, res []byte) {
	if !b.cfg.Lazy {
		return
	}
	var m map[string]any
	if json.Unmarshal(res, &m) == nil {
		if caps, ok := m["capabilities"].(map[string]any); ok {
			for _, name := range []string{"tools", "prompts", "resources"} {
				if cp, ok := caps[name].(map[string]any); ok {
					cp["listChanged"] = true
				}
			}
		}
		if patched, err := json.Marshal(m); err == nil {
			res = patched
		}
	}
	if b.cache == nil {
		b.cache = &Cache{}
	}
	if b.cache.Requested == requested && b.cache.Negotiated == negotiated && bytes.Equal(b.cache.Init, res) {
		return
	}
	b.cache.Requested, b.cache.Negotiated, b.cache.Init = requested, negotiated, clone(res)
	b.cacheGen++
}

// cacheResult keeps the answer to a cacheable request; a list that
// differs from the cached one is announced to every client.
func (b *Broker) cacheResult(key string, res []byte) {
	if !b.cfg.Lazy || key == "" {
		return
	}
	if b.cache == nil {
		b.cache = &Cache{}
	}
	if key == "server/discover" {
		if !bytes.Equal(b.cache.Discover, res) {
			b.cache.Discover = clone(res)
			b.cacheGen++
		}
		return
	}
	old, had := b.cache.Lists[key]
	if had && bytes.Equal(old, res) {
		return
	}
	if b.cache.Lists == nil {
		b.cache.Lists = map[string]json.RawMessage{}
	}
	b.cache.Lists[key] = clone(res)
	b.cacheGen++
	if had {
		method := key[:bytes.IndexByte([]byte(key), ' ')]
		b.emit("cache.changed", method+" differs from the cache; clients told")
		b.notifyListChanged(listMethods[method].notify)
	}
}

// cacheDiscoverError keeps a server's refusal of server/discover.
func (b *Broker) cacheDiscoverError(errObj []byte) {
	if !b.cfg.Lazy {
		return
	}
	if b.cache == nil {
		b.cache = &Cache{}
	}
	if !bytes.Equal(b.cache.DiscoverError, errObj) {
		b.cache.DiscoverError = clone(errObj)
		b.cacheGen++
	}
}

func errorAnswer(id, errObj []byte) []byte {
	m := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	m = append(m, `,"error":`...)
	m = append(m, errObj...)
	return append(m, '}')
}

// fillCache lists what the upstream's initialize result advertises, so
// the cache holds every list a lazy start needs (and learns of changes).
func (b *Broker) fillCache() {
	if !b.cfg.Lazy || b.init.result == nil {
		return
	}
	for method, m := range listMethods {
		if sp, err := jsonrpc.Lookup(b.init.result, "capabilities", m.capability); err == nil && sp.Present() {
			b.fillRequest(method, nil)
		}
	}
}

// fillRequest asks the upstream for one list page (cursor nil: the first).
func (b *Broker) fillRequest(method string, cursor []byte) {
	id := b.newID()
	p := &pending{kind: kindFill, cacheKey: listKey(method, cursor, "")}
	b.pending[id] = p
	params := "{}"
	if cursor != nil {
		params = `{"cursor":` + string(cursor) + `}`
	}
	b.sendUp([]byte(`{"jsonrpc":"2.0","id":`+strconv.FormatUint(id, 10)+`,"method":"`+method+`","params":`+params+`}`), p)
}

// filled takes the answer to a fill request, following its next page.
func (b *Broker) filled(p *pending, line []byte, e jsonrpc.Envelope) {
	if !e.HasResult {
		return
	}
	sp, err := jsonrpc.Lookup(line, "result")
	if err != nil || !sp.Present() {
		return
	}
	b.cacheResult(p.cacheKey, span(line, sp))
	if next, err := jsonrpc.Lookup(line, "result", "nextCursor"); err == nil && next.Present() {
		method := p.cacheKey[:bytes.IndexByte([]byte(p.cacheKey), ' ')]
		b.fillRequest(method, clone(span(line, next)))
	}
}

// idleNow reports whether the upstream may be stopped for idleness: up,
// nothing in flight or held, no subscription or listen, and it never sent
// a server-to-client request (its state may be a client's).
func (b *Broker) idleNow(now time.Time) (bool, time.Duration) {
	if b.cfg.Idle <= 0 || b.up == nil || !b.ready {
		return false, b.cfg.Idle
	}
	if len(b.pending) > 0 || len(b.held) > 0 || len(b.subs) > 0 || len(b.listen.clients) > 0 || len(b.srvReqs) > 0 || b.unsafe {
		return false, b.cfg.Idle
	}
	left := b.cfg.Idle - now.Sub(b.idleSince)
	return left <= 0, left
}
