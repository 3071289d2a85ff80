// Package lazycache is the lazy-start cache of a server (design §11): what
// a lazy broker, or a lazy client's front before any broker runs, answers
// a host from while the server is down, and the checks an answer must
// pass before it is kept or answered from.
package lazycache

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/seed-86a41135/supervisor/internal/jsonrpc"
)

// MetaProtocolVersion is the _meta key of a stateless request's protocol
// version.
const MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

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
	// Lists are list results by method and cursor (ListKey).
	Lists map[string]json.RawMessage `json:"lists,omitempty"`
}

// Warm reports whether c can answer a client's handshake.
func (c *Cache) Warm() bool { return c != nil && (len(c.Init) > 0 || len(c.Discover) > 0) }

func (c *Cache) Clone() *Cache {
	if c == nil {
		return nil
	}
	d := *c
	d.Lists = maps.Clone(c.Lists)
	return &d
}

// ListMethods are the calls the cache answers, with the notification that
// tells clients one changed and the capability that advertises it.
var ListMethods = map[string]struct{ Notify, Capability string }{
	"tools/list":               {"notifications/tools/list_changed", "tools"},
	"prompts/list":             {"notifications/prompts/list_changed", "prompts"},
	"resources/list":           {"notifications/resources/list_changed", "resources"},
	"resources/templates/list": {"notifications/resources/list_changed", "resources"},
}

// ListKey is the cache key of a list call: its method and raw cursor,
// and the protocol version a stateless request carries in _meta (a
// server may answer each revision its own way; "" for the legacy ones,
// whose version is the connection's).
func ListKey(method string, cursor []byte, version string) string {
	k := method + " " + string(cursor)
	if version != "" {
		k += " " + version
	}
	return k
}

// KeyOf is the cache key of a client request, "" if not cacheable.
func KeyOf(line []byte, e jsonrpc.Envelope) string {
	if e.Method == "server/discover" {
		return e.Method
	}
	if _, ok := ListMethods[e.Method]; !ok {
		return ""
	}
	var cursor []byte
	if sp, err := jsonrpc.Lookup(line, "params", "cursor"); err == nil && sp.Present() {
		cursor = span(line, sp)
	}
	version := ""
	if sp, err := jsonrpc.Lookup(line, "params", "_meta", MetaProtocolVersion); err == nil && sp.Present() {
		version, _ = jsonrpc.DecodeString(span(line, sp))
	}
	return ListKey(e.Method, cursor, version)
}

// answer is c's answer to a server/discover or list request with id, nil
// if c has none; cacheable says whether c could have one.
func (c *Cache) Answer(line []byte, e jsonrpc.Envelope, id []byte) (answer []byte, cacheable bool) {
	key := KeyOf(line, e)
	if key == "" || c == nil {
		return nil, false
	}
	res, ok := c.Lists[key]
	if key == "server/discover" {
		res, ok = c.Discover, len(c.Discover) > 0
		if !ok && len(c.DiscoverError) > 0 {
			return ErrorAnswer(id, c.DiscoverError), true
		}
	}
	if !ok {
		return nil, true
	}
	return Result(id, res), true
}

// ListMethod is the method of a cache key.
func ListMethod(key string) string {
	method, _, _ := strings.Cut(key, " ")
	return method
}

func ErrorAnswer(id, errObj []byte) []byte {
	m := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	m = append(m, `,"error":`...)
	m = append(m, errObj...)
	return append(m, '}')
}

// DiscoverErrorEntry names a cached server/discover refusal for
// ValidEntry.
const DiscoverErrorEntry = "server/discover error"

// ValidEntry checks that res has the shape an answer to method must have
// before the cache keeps it (or, loaded, answers from it): a client can
// make a server say anything in a tool's result, never make it the
// answer to tools/list.
func ValidEntry(method string, res []byte) error {
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
	case DiscoverErrorEntry:
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

// sanitize drops every entry of a loaded cache that fails ValidEntry (a
// cache written by an older broker, which kept clients' answers, or
// damaged on disk), saying why for each; a lazy broker whose cache lost
// anything starts its upstream at once, which refills it.
func (c *Cache) Sanitize() (dropped []string) {
	if c == nil {
		return nil
	}
	if len(c.Init) > 0 {
		if err := ValidEntry("initialize", c.Init); err != nil {
			dropped = append(dropped, err.Error())
			c.Init, c.Requested, c.Negotiated = nil, "", ""
		}
	}
	if len(c.Discover) > 0 {
		if err := ValidEntry("server/discover", c.Discover); err != nil {
			dropped = append(dropped, err.Error())
			c.Discover = nil
		}
	}
	if len(c.DiscoverError) > 0 {
		if err := ValidEntry(DiscoverErrorEntry, c.DiscoverError); err != nil {
			dropped = append(dropped, err.Error())
			c.DiscoverError = nil
		}
	}
	for key, res := range c.Lists {
		if err := ValidEntry(ListMethod(key), res); err != nil {
			dropped = append(dropped, fmt.Sprintf("%q: %v", key, err))
			delete(c.Lists, key)
		}
	}
	slices.Sort(dropped)
	return dropped
}

// Result is a JSON-RPC result message answering id.
func Result(id, res []byte) []byte {
	m := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	m = append(m, `,"result":`...)
	m = append(m, res...)
	return append(m, '}')
}

// span is the bytes of s in msg, nil if absent.
func span(msg []byte, s jsonrpc.Span) []byte {
	if !s.Present() {
		return nil
	}
	return msg[s.Start:s.End]
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }
