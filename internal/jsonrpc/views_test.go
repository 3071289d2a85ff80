package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The decoders a relay's peers may be: each reads the routed values of an
// envelope its own way. Parse must refuse whatever two of them read
// differently (check, in jsonrpc_test.go).

// view is what one decoder reads: raw values, the method decoded.
type view struct {
	id, method, result, error, progressToken, notifToken, requestID, uri string
	jsonrpc, cursor, protocolVersion, metaVersion, metaSubscription      string
	methodRaw                                                            string // the raw method value
}

// odd reports a message Parse refuses on its own rule though decoders
// agree on it: a method that decoders that keep lone surrogates or stop
// at NUL read otherwise, or a message both request and response.
// (A key that only reads as a protocol key is refused even where the
// values agree; variantKeys finds those.)
func (v view) odd() bool {
	_, folds := foldsToRouted(v.method)
	return strings.HasPrefix(v.methodRaw, `"`) && (!plainText(v.method) || folds) || v.methodRaw != "" && (v.result != "" || v.error != "") || v.result != "" && v.error != ""
}

type namedView struct {
	name string
	view view
}

// views reads msg with every decoder; valid is false if msg is not a
// JSON object.
func views(msg []byte) (vs []namedView, valid bool) {
	if !json.Valid(msg) || !bytes.HasPrefix(bytes.TrimLeft(msg, " \t\r\n"), []byte("{")) {
		return nil, false
	}
	vs = append(vs, namedView{"encoding/json struct (case-insensitive, last wins)", foldView(msg)})
	for _, d := range []struct {
		name string
		opt  memberOpts
	}{
		{"case-sensitive, last wins (JSON.parse, Python)", memberOpts{}},
		{"case-sensitive, first wins", memberOpts{firstWins: true}},
		{"keys compared unescaped bytes", memberOpts{rawKeys: true}},
		{"keys cut at NUL (C strings)", memberOpts{cutNUL: true}},
		{"case-insensitive, first wins", memberOpts{fold: true, firstWins: true}},
	} {
		vs = append(vs, namedView{d.name, memberView(msg, d.opt)})
	}
	return vs, true
}

type foldEnvelope struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
	Params  json.RawMessage `json:"params"`
}

type foldParams struct {
	Meta          json.RawMessage `json:"_meta"`
	ProgressToken json.RawMessage `json:"progressToken"`
	RequestID     json.RawMessage `json:"requestId"`
	URI           json.RawMessage `json:"uri"`
	Cursor        json.RawMessage `json:"cursor"`
	Version       json.RawMessage `json:"protocolVersion"`
}

type foldMeta struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Version       json.RawMessage `json:"io.modelcontextprotocol/protocolVersion"`
	Subscription  json.RawMessage `json:"io.modelcontextprotocol/subscriptionId"`
}

// foldView is encoding/json's struct decoding, as Go MCP servers read.
func foldView(msg []byte) view {
	var e foldEnvelope
	json.Unmarshal(msg, &e)
	var p foldParams
	if isObject(e.Params) {
		json.Unmarshal(e.Params, &p)
	}
	var m foldMeta
	if isObject(p.Meta) {
		json.Unmarshal(p.Meta, &m)
	}
	v := view{id: string(e.ID), result: string(e.Result), error: string(e.Error),
		progressToken: string(m.ProgressToken), notifToken: string(p.ProgressToken), requestID: string(p.RequestID),
		jsonrpc: string(e.JSONRPC), cursor: string(p.Cursor), protocolVersion: string(p.Version),
		metaVersion: string(m.Version), metaSubscription: string(m.Subscription)}
	v.method, _ = str(e.Method)
	v.methodRaw = string(e.Method)
	v.uri = string(p.URI)
	return v
}

type memberOpts struct{ firstWins, rawKeys, cutNUL, fold bool }

// memberView reads the envelope member by member with case-sensitive keys.
func memberView(msg []byte, o memberOpts) view {
	top := members(msg, o)
	params := map[string]json.RawMessage{}
	if p := top["params"]; isObject(p) {
		params = members(p, o)
	}
	meta := map[string]json.RawMessage{}
	if m := params["_meta"]; isObject(m) {
		meta = members(m, o)
	}
	v := view{id: string(top["id"]), result: string(top["result"]), error: string(top["error"]),
		progressToken: string(meta["progressToken"]), notifToken: string(params["progressToken"]), requestID: string(params["requestId"]),
		jsonrpc: string(top["jsonrpc"]), cursor: string(params["cursor"]), protocolVersion: string(params["protocolVersion"]),
		metaVersion: string(meta["io.modelcontextprotocol/protocolVersion"]), metaSubscription: string(meta["io.modelcontextprotocol/subscriptionId"])}
	v.method, _ = str(top["method"])
	v.methodRaw = string(top["method"])
	v.uri = string(params["uri"])
	return v
}

// members splits a JSON object into its members, keys read as o says.
func members(obj []byte, o memberOpts) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	d := json.NewDecoder(bytes.NewReader(obj))
	if _, err := d.Token(); err != nil {
		return out
	}
	for d.More() {
		start := d.InputOffset()
		tok, err := d.Token()
		if err != nil {
			return out
		}
		key := tok.(string)
		if o.rawKeys {
			raw := strings.TrimRight(strings.TrimLeft(string(obj[start:d.InputOffset()]), " \t\r\n,"), " \t\r\n:")
			key = raw[1 : len(raw)-1]
		}
		if o.cutNUL {
			key, _, _ = strings.Cut(key, "\x00")
		}
		if o.fold {
			for _, names := range [][]string{topKeys, paramKeys, metaKeys} {
				for _, n := range names {
					if strings.EqualFold(key, n) {
						key = n
					}
				}
			}
		}
		var val json.RawMessage
		if err := d.Decode(&val); err != nil {
			return out
		}
		if _, seen := out[key]; seen && o.firstWins {
			continue
		}
		out[key] = val
	}
	return out
}

// variantKeys reports a protocol key written twice, or written so that it
// is one only once unescaped, case-folded or cut at NUL, at the levels
// Parse checks: the rule of issue 26, found member by member here.
func variantKeys(msg []byte) bool {
	type level struct {
		obj   []byte
		names []string
	}
	var walk func(l level) bool
	walk = func(l level) bool {
		d := json.NewDecoder(bytes.NewReader(l.obj))
		if _, err := d.Token(); err != nil {
			return false
		}
		seen := map[string]bool{}
		for d.More() {
			start := d.InputOffset()
			tok, err := d.Token()
			if err != nil {
				return false
			}
			raw := strings.TrimRight(strings.TrimLeft(string(l.obj[start:d.InputOffset()]), " \t\r\n,"), " \t\r\n:")
			raw = raw[1 : len(raw)-1]
			key := tok.(string)
			cut, _, _ := strings.Cut(key, "\x00")
			var val json.RawMessage
			if d.Decode(&val) != nil {
				return false
			}
			for _, n := range l.names {
				if !strings.EqualFold(key, n) && !strings.EqualFold(cut, n) {
					continue
				}
				if raw != n || seen[n] {
					return true
				}
				seen[n] = true
				switch {
				case n == "params" && isObject(val):
					if walk(level{val, paramKeys}) {
						return true
					}
				case n == "_meta" && isObject(val):
					if walk(level{val, metaKeys}) {
						return true
					}
				}
			}
		}
		return false
	}
	return walk(level{msg, topKeys})
}

// splitsLines reports a raw CR or LF before the message's last byte:
// where a reader that splits lines at a bare CR sees several messages.
func splitsLines(msg []byte) bool {
	return len(msg) > 1 && bytes.ContainsAny(msg[:len(msg)-1], "\r\n")
}

func isObject(v json.RawMessage) bool { return len(v) > 0 && v[0] == '{' }

func str(v json.RawMessage) (string, bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	var s string
	json.Unmarshal(v, &s)
	return s, true
}

// parsedView is what Parse read, as a view.
func parsedView(msg []byte, e Envelope) view {
	msp, _ := Lookup(msg, "method")
	v := view{id: string(slice(msg, e.ID)), method: e.Method, methodRaw: string(slice(msg, msp)),
		progressToken: string(slice(msg, e.ProgressToken)), notifToken: string(slice(msg, e.NotifToken)),
		requestID: string(slice(msg, e.RequestID))}
	for _, f := range []struct {
		to   *string
		path []string
	}{
		{&v.jsonrpc, []string{"jsonrpc"}}, {&v.uri, []string{"params", "uri"}}, {&v.cursor, []string{"params", "cursor"}}, {&v.protocolVersion, []string{"params", "protocolVersion"}},
		{&v.metaVersion, []string{"params", "_meta", "io.modelcontextprotocol/protocolVersion"}},
		{&v.metaSubscription, []string{"params", "_meta", "io.modelcontextprotocol/subscriptionId"}},
	} {
		sp, _ := Lookup(msg, f.path...)
		*f.to = string(slice(msg, sp))
	}
	if e.HasResult {
		sp, _ := Lookup(msg, "result")
		v.result = string(slice(msg, sp))
	}
	if e.HasError {
		sp, _ := Lookup(msg, "error")
		v.error = string(slice(msg, sp))
	}
	return v
}
