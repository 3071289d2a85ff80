package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/internal/jsonrpc"
	"github.com/seed-86a41135/supervisor/internal/lazycache"
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

// fromCache answers a client's request while the upstream is down, if the
// cache (or the broker itself) can; false sends it on.
func (b *Broker) fromCache(c *client, line []byte, e jsonrpc.Envelope) bool {
	if (!b.cfg.Lazy && b.cfg.Idle <= 0) || b.up != nil {
		return false // (an idle-stopped upstream's broker answers ping only)
	}
	id := clone(span(line, e.ID))
	switch e.Method {
	case "ping":
		b.deliver(c, lazycache.Result(id, []byte("{}")))
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
		b.init = initState{msg: clone(line), id: e.ID, tok: e.ProgressToken, requested: version, negotiated: b.cache.Negotiated, result: b.cache.Init}
		b.cacheHits++
		b.answerInit(c, id, version)
		return true
	}
	answer, cacheable := b.cache.Answer(line, e, id)
	if !cacheable {
		return false
	}
	if answer == nil {
		b.cacheMisses++
		return false
	}
	b.cacheHits++
	b.deliver(c, answer)
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
	if err := lazycache.ValidEntry("initialize", res); err != nil {
		b.emit("cache.invalid", fmt.Sprintf("initialize answer not cached: %v", err))
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

// cacheResult keeps the answer to one of the broker's own fill requests;
// a list that differs from the cached one is announced to every client.
func (b *Broker) cacheResult(key string, res []byte) {
	if !b.cfg.Lazy || key == "" {
		return
	}
	if b.cache == nil {
		b.cache = &Cache{}
	}
	if key == "server/discover" {
		if !bytes.Equal(b.cache.Discover, res) || b.cache.DiscoverError != nil {
			b.cache.Discover, b.cache.DiscoverError = clone(res), nil
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
		method := lazycache.ListMethod(key)
		b.emit("cache.changed", method+" differs from the cache; clients told")
		b.notifyListChanged(lazycache.ListMethods[method].Notify)
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
	if !bytes.Equal(b.cache.DiscoverError, errObj) || b.cache.Discover != nil {
		b.cache.DiscoverError, b.cache.Discover = clone(errObj), nil
		b.cacheGen++
	}
}

// fillCache lists what the upstream's initialize result advertises, so
// the cache holds every list a lazy start needs (and learns of changes),
// and asks server/discover, which hosts probe with first.
func (b *Broker) fillCache() {
	if !b.cfg.Lazy || b.init.result == nil {
		return
	}
	b.fillDiscover()
	for method, m := range lazycache.ListMethods {
		if sp, err := jsonrpc.Lookup(b.init.result, "capabilities", m.Capability); err == nil && sp.Present() {
			b.fillRequest(method, nil, "")
		}
	}
}

// fillDiscover asks the upstream's server/discover once per run; for a
// server of the stateless revision its answer leads to the list fills.
func (b *Broker) fillDiscover() {
	if !b.cfg.Lazy || b.discoverAsked || b.up == nil {
		return
	}
	b.discoverAsked = true
	id := b.newID()
	p := &pending{kind: kindFill, cacheKey: "server/discover"}
	b.pending[id] = p
	b.sendUp(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"server/discover","params":{"_meta":{%q:%s,%q:{}}}}`,
		id, metaProtocolVersion, quote(b.statelessVersion()), metaClientCapabilities), p)
}

// statelessVersion is the newest stateless revision the upstream named,
// or the first one.
func (b *Broker) statelessVersion() string {
	v := statelessRevision
	for _, s := range b.versions {
		if isStatelessRevision(s) && s > v {
			v = s
		}
	}
	return v
}

// fillRequest asks the upstream for one list page (cursor nil: the first),
// under version's _meta for a server of the stateless revision ("" for a
// legacy one).
func (b *Broker) fillRequest(method string, cursor []byte, version string) {
	id := b.newID()
	p := &pending{kind: kindFill, cacheKey: lazycache.ListKey(method, cursor, version)}
	b.pending[id] = p
	var params []string
	if cursor != nil {
		params = append(params, `"cursor":`+string(cursor))
	}
	if version != "" {
		params = append(params, fmt.Sprintf(`"_meta":{%q:%s,%q:{}}`, metaProtocolVersion, quote(version), metaClientCapabilities))
	}
	b.sendUp([]byte(`{"jsonrpc":"2.0","id":`+strconv.FormatUint(id, 10)+`,"method":"`+method+`","params":{`+strings.Join(params, ",")+`}}`), p)
}

// filled takes the answer to a fill request, following its next page.
// Only an answer of the shape its method must have is kept.
func (b *Broker) filled(p *pending, line []byte, e jsonrpc.Envelope) {
	if p.cacheKey == "server/discover" {
		b.filledDiscover(line, e)
		return
	}
	if !e.HasResult {
		return
	}
	sp, err := jsonrpc.Lookup(line, "result")
	if err != nil || !sp.Present() {
		return
	}
	method, rest, _ := strings.Cut(p.cacheKey, " ")
	res := span(line, sp)
	if err := lazycache.ValidEntry(method, res); err != nil {
		b.log.Warn("the upstream's answer to the broker's own list call has the wrong shape; not cached", "method", method, "err", err)
		b.emit("cache.invalid", fmt.Sprintf("%s answer not cached: %v", method, err))
		return
	}
	b.cacheResult(p.cacheKey, res)
	if next, err := jsonrpc.Lookup(line, "result", "nextCursor"); err == nil && next.Present() && line[next.Start] == '"' {
		version := ""
		if _, v, ok := strings.Cut(rest, " "); ok {
			version = v
		}
		b.fillRequest(method, clone(span(line, next)), version)
	}
}

// filledDiscover keeps the answer to the broker's own server/discover:
// its result, or a legacy server's refusal. A server of the stateless
// revision then gets its lists asked under that revision.
func (b *Broker) filledDiscover(line []byte, e jsonrpc.Envelope) {
	if e.HasError {
		sp, err := jsonrpc.Lookup(line, "error")
		if err != nil || !sp.Present() {
			return
		}
		if err := lazycache.ValidEntry(lazycache.DiscoverErrorEntry, span(line, sp)); err != nil {
			b.emit("cache.invalid", fmt.Sprintf("server/discover error not cached: %v", err))
			return
		}
		b.learnDiscover(line) // a refusal: not the stateless revision
		b.cacheDiscoverError(span(line, sp))
		return
	}
	sp, err := jsonrpc.Lookup(line, "result")
	if err != nil || !sp.Present() {
		return
	}
	res := span(line, sp)
	if err := lazycache.ValidEntry("server/discover", res); err != nil {
		b.emit("cache.invalid", fmt.Sprintf("server/discover answer not cached: %v", err))
		return
	}
	b.learnDiscover(line)
	b.cacheResult("server/discover", res)
	if !b.stateless {
		return
	}
	version := b.statelessVersion()
	for method, m := range lazycache.ListMethods {
		if sp, err := jsonrpc.Lookup(res, "capabilities", m.Capability); err == nil && sp.Present() {
			b.fillRequest(method, nil, version)
		}
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

// Cache is what a lazy broker answers from while its upstream is down
// (lazycache.Cache).
type Cache = lazycache.Cache

// Handover is what a lazy client's front leaves to the broker
// (lazycache.Handover).
type Handover = lazycache.Handover
