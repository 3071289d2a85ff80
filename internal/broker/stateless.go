package broker

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/internal/jsonrpc"
	"github.com/seed-86a41135/supervisor/internal/lazycache"
)

// The stateless revision of MCP (2026-07-28, SEP-2575) replaces the
// handshake with server/discover and per-request _meta, which need nothing
// from the broker but id mapping. Its subscriptions/listen does: a client
// opens one long-lived request and the server stamps that request's id
// (_meta subscriptionId) into every notification it streams for it.
// Servers keep listens per connection (the Go SDK keeps one per session:
// a second listen replaces the first, and the end of either drops both),
// so the broker never forwards a client's listen. It holds one listen of
// its own upstream and fans its notifications out to the clients that
// asked for them, each stamped with the client's own request id.
// Resource subscriptions in a listen are not honored (the acknowledgement
// says so, as the revision allows); resources/subscribe is.

const (
	metaSubscriptionID  = "io.modelcontextprotocol/subscriptionId"
	metaProtocolVersion = lazycache.MetaProtocolVersion
	// metaClientCapabilities is what a request of the revision declares
	// the client can do; the broker's own requests declare nothing.
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	// statelessRevision is the first protocol version without a handshake.
	statelessRevision = "2026-07-28"
)

// listenKinds are the list-changed notifications a listen asks for.
type listenKinds struct{ tools, prompts, resources bool }

var listenFields = [3]string{"toolsListChanged", "promptsListChanged", "resourcesListChanged"}

func (k listenKinds) flags() [3]bool { return [3]bool{k.tools, k.prompts, k.resources} }

func (k listenKinds) and(o listenKinds) listenKinds {
	return listenKinds{k.tools && o.tools, k.prompts && o.prompts, k.resources && o.resources}
}

// wants reports whether k covers the list-changed notification method.
func (k listenKinds) wants(method string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return k.tools
	case "notifications/prompts/list_changed":
		return k.prompts
	case "notifications/resources/list_changed":
		return k.resources
	}
	return false
}

func (k listenKinds) json() string {
	var parts []string
	for i, on := range k.flags() {
		if on {
			parts = append(parts, fmt.Sprintf("%q:true", listenFields[i]))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// parseListenKinds reads params.<at>.{toolsListChanged,...} of msg.
func parseListenKinds(msg []byte, at ...string) listenKinds {
	var f [3]bool
	for i, name := range listenFields {
		path := append(slices.Clone(at), name)
		if sp, err := jsonrpc.Lookup(msg, path...); err == nil && sp.Present() {
			f[i] = string(span(msg, sp)) == "true"
		}
	}
	return listenKinds{f[0], f[1], f[2]}
}

// clientListen is one client's open subscriptions/listen request.
type clientListen struct {
	c     *client
	id    []byte // its request id, raw
	want  listenKinds
	acked bool
}

// listenState is the broker's own listen upstream and the clients'.
type listenState struct {
	upID    uint64 // the broker's listen request upstream; 0: none open
	acked   bool   // the upstream acknowledged it
	granted listenKinds
	version string // the protocol version it is sent with
	clients []*clientListen
}

// clientListenRequest takes a client's subscriptions/listen: it is
// acknowledged with what the upstream granted and stays open until the
// client cancels it or goes.
func (b *Broker) clientListenRequest(c *client, line []byte, e jsonrpc.Envelope) {
	cl := &clientListen{c: c, id: clone(span(line, e.ID)), want: parseListenKinds(line, "params", "notifications")}
	b.listen.clients = append(b.listen.clients, cl)
	if v, err := jsonrpc.Lookup(line, "params", "_meta", metaProtocolVersion); err == nil && v.Present() && b.listen.version == "" {
		b.listen.version, _ = jsonrpc.DecodeString(span(line, v))
	}
	switch {
	case b.listen.upID == 0 && b.up == nil && b.cache != nil && len(b.cache.Discover) > 0:
		// The upstream is down (lazy, idle): nothing can change until it
		// starts, so the broker acknowledges what the cached discover
		// advertises; the next start opens the real listen (markReady).
		b.listen.granted = listChangedOf(b.cache.Discover)
		b.ackListen(cl)
	case b.listen.upID == 0:
		b.openListen()
		if b.up == nil {
			b.wake()
		}
	case b.listen.acked:
		b.ackListen(cl)
	}
}

// listChangedOf is what a server/discover or initialize result advertises
// as list-changed notifications.
func listChangedOf(res []byte) listenKinds {
	var f [3]bool
	for i, name := range []string{"tools", "prompts", "resources"} {
		if sp, err := jsonrpc.Lookup(res, "capabilities", name, "listChanged"); err == nil && sp.Present() {
			f[i] = string(span(res, sp)) == "true"
		}
	}
	return listenKinds{f[0], f[1], f[2]}
}

// notifyListChanged tells every client that a list changed: a client
// listening for it (stateless revision) in each such listen, stamped with
// its id; a client with no listen (legacy) plainly.
func (b *Broker) notifyListChanged(method string) {
	plain := notification(method, "")
	listening := map[*client]bool{}
	for _, cl := range b.listen.clients {
		listening[cl.c] = true
		if cl.want.wants(method) {
			b.deliver(cl.c, notification(method, fmt.Sprintf(`{"_meta":{%q:%s}}`, metaSubscriptionID, cl.id)))
		}
	}
	for _, c := range b.clients {
		if !listening[c] {
			b.deliver(c, plain)
		}
	}
}

// openListen sends the broker's own listen for every list-changed kind.
func (b *Broker) openListen() {
	version := b.listen.version
	if version == "" {
		version = statelessRevision
	}
	id := b.newID()
	p := &pending{kind: kindListen}
	b.pending[id] = p
	b.listen.upID, b.listen.acked = id, false
	msg := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":%s,"_meta":{%q:%s,%q:{}}}}`,
		id, listenKinds{true, true, true}.json(), metaProtocolVersion, quote(version), metaClientCapabilities)
	b.sendUp(msg, p)
}

// ackListen acknowledges a client's listen with what it asked for and
// the upstream granted.
func (b *Broker) ackListen(cl *clientListen) {
	cl.acked = true
	params := fmt.Sprintf(`{"_meta":{%q:%s},"notifications":%s}`, metaSubscriptionID, cl.id, cl.want.and(b.listen.granted).json())
	b.deliver(cl.c, notification("notifications/subscriptions/acknowledged", params))
}

// dropListens removes c's listens (all, or the one with request id),
// reporting whether one was found; the broker's own listen is cancelled
// once nobody listens.
func (b *Broker) dropListens(c *client, id []byte) bool {
	found := false
	b.listen.clients = slices.DeleteFunc(b.listen.clients, func(cl *clientListen) bool {
		if cl.c == c && (id == nil || string(cl.id) == string(id)) {
			found = true
			return true
		}
		return false
	})
	if found && len(b.listen.clients) == 0 && b.listen.upID != 0 {
		up := b.listen.upID
		delete(b.pending, up)
		b.listen.upID, b.listen.acked = 0, false
		b.sendUp(cancelled(up, "no client listens any more"), nil)
		if len(b.pending) == 0 {
			b.idleSince = time.Now()
		}
	}
	return found
}

// upstreamListenNote routes the upstream's acknowledgement or list-changed
// notification stamped with a subscription id; false if msg carries none.
func (b *Broker) upstreamListenNote(line []byte, e jsonrpc.Envelope) bool {
	sp, err := jsonrpc.Lookup(line, "params", "_meta", metaSubscriptionID)
	if err != nil || !sp.Present() {
		return false
	}
	if n, ok := parseID(line, sp); !ok || n != b.listen.upID || n == 0 {
		return true // a listen that is no longer ours
	}
	if e.Method == "notifications/subscriptions/acknowledged" {
		b.listen.acked = true
		b.listen.granted = parseListenKinds(line, "params", "notifications")
		for _, cl := range b.listen.clients {
			if !cl.acked {
				b.ackListen(cl)
			}
		}
		return true
	}
	for _, cl := range b.listen.clients {
		if cl.want.wants(e.Method) {
			b.deliver(cl.c, jsonrpc.Splice(line, jsonrpc.Edit{Span: sp, Value: cl.id}))
		}
	}
	return true
}

// listenEnded is the upstream's answer to the broker's listen: the
// server ended it, and every client's listen ends with the same outcome.
func (b *Broker) listenEnded(line []byte, e jsonrpc.Envelope) {
	b.listen.upID, b.listen.acked = 0, false
	for _, cl := range b.listen.clients {
		if e.HasError {
			b.deliver(cl.c, jsonrpc.Splice(line, jsonrpc.Edit{Span: e.ID, Value: cl.id}))
		} else {
			b.deliver(cl.c, lazycache.Result(cl.id, fmt.Appendf(nil, `{"_meta":{%q:%s}}`, metaSubscriptionID, cl.id)))
		}
	}
	b.listen.clients = nil
}

// learnDiscover reads a server/discover result: a server that supports
// the stateless revision keeps no state per connection, which is what
// makes sharing it automatic (design §11).
func (b *Broker) learnDiscover(line []byte) {
	var versions []string
	// A list that does not decode (not an array of strings) names no
	// revision: the server is taken for one without the stateless one.
	if sp, err := jsonrpc.Lookup(line, "result", "supportedVersions"); err == nil && sp.Present() {
		if err := json.Unmarshal(span(line, sp), &versions); err != nil {
			versions = nil
		}
	} else if sp, err := jsonrpc.Lookup(line, "error", "data", "supported"); err == nil && sp.Present() {
		// A refusal of the version the client asked for (SEP-2575's
		// unsupported protocol version error) lists what it does support.
		if err := json.Unmarshal(span(line, sp), &versions); err != nil {
			versions = nil
		}
	}
	if !slices.ContainsFunc(versions, isStatelessRevision) {
		// An answer without the revision (or an error): whatever was
		// learned before of this server is not so any more.
		b.stateless, b.legacy, b.versions = false, true, versions
		return
	}
	b.legacy = false
	if b.stateless {
		return
	}
	b.stateless, b.versions = true, versions
	b.emit("upstream.stateless", "supports "+strings.Join(versions, ", "))
}

// isStatelessRevision: a protocol version (a YYYY-MM-DD date) at or after
// the stateless revision; anything else (a draft's name) is not trusted.
func isStatelessRevision(v string) bool {
	if len(v) != len(statelessRevision) || v[4] != '-' || v[7] != '-' {
		return false
	}
	for i, r := range v {
		if i != 4 && i != 7 && (r < '0' || r > '9') {
			return false
		}
	}
	return v >= statelessRevision
}
