package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/internal/jsonrpc"
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
		b.init = initState{msg: clone(line), id: e.ID, tok: e.ProgressToken, requested: version, negotiated: b.cache.Negotiated, result: b.cache.Init}
		b.cacheHits++
		b.answerInit(c, id, version)
		return true
	}
	answer, cacheable := b.cache.answer(line, e, id)
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

// answer is c's answer to a server/discover or list request with id, nil
// if c has none; cacheable says whether c could have one.
func (c *Cache) answer(line []byte, e jsonrpc.Envelope, id []byte) (answer []byte, cacheable bool) {
	key := cacheKeyOf(line, e)
	if key == "" || c == nil {
		return nil, false
	}
	res, ok := c.Lists[key]
	if key == "server/discover" {
		res, ok = c.Discover, len(c.Discover) > 0
		if !ok && len(c.DiscoverError) > 0 {
			return errorAnswer(id, c.DiscoverError), true
		}
	}
	if !ok {
		return nil, true
	}
	return result(id, res), true
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
	if err := validEntry("initialize", res); err != nil {
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
		method := listMethod(key)
		b.emit("cache.changed", method+" differs from the cache; clients told")
		b.notifyListChanged(listMethods[method].notify)
	}
}

// listMethod is the method of a cache key.
func listMethod(key string) string {
	method, _, _ := strings.Cut(key, " ")
	return method
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

func errorAnswer(id, errObj []byte) []byte {
	m := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	m = append(m, `,"error":`...)
	m = append(m, errObj...)
	return append(m, '}')
}

// fillCache lists what the upstream's initialize result advertises, so
// the cache holds every list a lazy start needs (and learns of changes),
// and asks server/discover, which hosts probe with first.
func (b *Broker) fillCache() {
	if !b.cfg.Lazy || b.init.result == nil {
		return
	}
	b.fillDiscover()
	for method, m := range listMethods {
		if sp, err := jsonrpc.Lookup(b.init.result, "capabilities", m.capability); err == nil && sp.Present() {
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
	p := &pending{kind: kindFill, cacheKey: listKey(method, cursor, version)}
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
	if err := validEntry(method, res); err != nil {
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
		if err := validEntry(discoverErrorEntry, span(line, sp)); err != nil {
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
	if err := validEntry("server/discover", res); err != nil {
		b.emit("cache.invalid", fmt.Sprintf("server/discover answer not cached: %v", err))
		return
	}
	b.learnDiscover(line)
	b.cacheResult("server/discover", res)
	if !b.stateless {
		return
	}
	version := b.statelessVersion()
	for method, m := range listMethods {
		if sp, err := jsonrpc.Lookup(res, "capabilities", m.capability); err == nil && sp.Present() {
			b.fillRequest(method, nil, version)
		}
	}
}

// discoverErrorEntry names a cached server/discover refusal for
// validEntry.
const discoverErrorEntry = "server/discover error"

// validEntry checks that res has the shape an answer to method must have
// before the cache keeps it (or, loaded, answers from it): a client can
// make a server say anything in a tool's result, never make it the
// answer to tools/list.
func validEntry(method string, res []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res, &m); err != nil || m == nil {
		return fmt.Errorf("%s: not a JSON object", method)
	}
	field := func(name string, want byte) error {
		v, ok := m[name]
		if !ok || len(v) == 0 || v[0] != want {
			return fmt.Errorf("%s: %q missing or not a JSON %s", method, name, map[byte]string{'{': "object", '[': "array", '"': "string"}[want])
		}
		return nil
	}
	items := func(name string, keys ...string) error {
		if err := field(name, '['); err != nil {
			return err
		}
		var list []map[string]json.RawMessage
		if err := json.Unmarshal(m[name], &list); err != nil {
			return fmt.Errorf("%s: %q is not an array of objects", method, name)
		}
		for i, it := range list {
			for _, k := range keys {
				if v := it[k]; len(v) == 0 || v[0] != '"' {
					return fmt.Errorf("%s: %s[%d] has no string %q", method, name, i, k)
				}
			}
		}
		if nc, ok := m["nextCursor"]; ok && (len(nc) == 0 || nc[0] != '"' && string(nc) != "null") {
			return fmt.Errorf("%s: nextCursor is not a string", method)
		}
		return nil
	}
	switch method {
	case "initialize":
		for _, f := range []struct {
			name string
			want byte
		}{{"protocolVersion", '"'}, {"capabilities", '{'}, {"serverInfo", '{'}} {
			if err := field(f.name, f.want); err != nil {
				return err
			}
		}
		return nil
	case "server/discover":
		var versions []string
		if err := json.Unmarshal(m["supportedVersions"], &versions); err != nil || len(versions) == 0 {
			return fmt.Errorf("%s: supportedVersions missing or not an array of strings", method)
		}
		return nil
	case discoverErrorEntry:
		var code int
		if err := json.Unmarshal(m["code"], &code); err != nil {
			return fmt.Errorf("%s: no numeric code", method)
		}
		return field("message", '"')
	case "tools/list":
		return items("tools", "name")
	case "prompts/list":
		return items("prompts", "name")
	case "resources/list":
		return items("resources", "uri", "name")
	case "resources/templates/list":
		return items("resourceTemplates", "uriTemplate", "name")
	}
	return fmt.Errorf("%s: not a method the cache keeps", method)
}

// sanitize drops every entry of a loaded cache that fails validEntry (a
// cache written by an older broker, which kept clients' answers, or
// damaged on disk), saying why for each; a lazy broker whose cache lost
// anything starts its upstream at once, which refills it.
func (c *Cache) sanitize() (dropped []string) {
	if c == nil {
		return nil
	}
	if len(c.Init) > 0 {
		if err := validEntry("initialize", c.Init); err != nil {
			dropped = append(dropped, err.Error())
			c.Init, c.Requested, c.Negotiated = nil, "", ""
		}
	}
	if len(c.Discover) > 0 {
		if err := validEntry("server/discover", c.Discover); err != nil {
			dropped = append(dropped, err.Error())
			c.Discover = nil
		}
	}
	if len(c.DiscoverError) > 0 {
		if err := validEntry(discoverErrorEntry, c.DiscoverError); err != nil {
			dropped = append(dropped, err.Error())
			c.DiscoverError = nil
		}
	}
	for key, res := range c.Lists {
		if err := validEntry(listMethod(key), res); err != nil {
			dropped = append(dropped, fmt.Sprintf("%q: %v", key, err))
			delete(c.Lists, key)
		}
	}
	slices.Sort(dropped)
	return dropped
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
