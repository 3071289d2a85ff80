package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// seeds are real MCP messages (and the awkward corners of JSON around
// them); they seed the fuzzer and drive the table tests.
var seeds = []string{
	`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"sampling":{}},"clientInfo":{"name":"claude-code","version":"2.1.0"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}},"serverInfo":{"name":"everything","version":"1.0"}}}`,
	`{"jsonrpc":"2.0","id":"c-7","method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":5,"steps":5},"_meta":{"progressToken":"tok-1"}}}`,
	`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"_meta":{"progressToken":42},"name":"echo","arguments":{"message":"h\u00e9llo \ud83d\ude00 \"quoted\" \\ back"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok-1","progress":2,"total":5,"message":"step 2"}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-7","reason":"user pressed Esc"}}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"server crashed"}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
	`{"jsonrpc":"2.0","id":-1.5e3,"result":{}}`,
	`{"jsonrpc":"2.0","id":5,"method":"roots/list"}`,
	`{"jsonrpc":"2.0","id":"x","method":"resources/subscribe","params":{"uri":"test://static/resource/1"}}`,
	`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///tmp/a%20b","title":"\u00e9"}}`,
	`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
	` { "id" : 1 , "method" : "ping" , "id" : "two" } `,
	`{"\u0069d":7,"m\u0065thod":"tools/list","params":[1,2,{"_meta":{"progressToken":1}}]}`,
	`{"id":1,"method":"x","params":{"uri":"a","_meta":{"progressToken":1}},"params":{"requestId":9}}`,
	`{"id":1,"result":{"content":[{"type":"text","text":"[{\"nested\":\"json\"}]"}],"isError":false}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
	`"just a string"`,
	`{"id":{"a":1},"method":"x"}`,
	`{"id":1,"method":2}`,
	`{"id":1,"method":"x"`,
	`{"id":01}`,
	`{"id":"\x01"}`,
	``,
	`{"method":"\ud800 lone \udc00 surrogates"}`,
	"{\"method\":\"bad utf8 \xff\xfe\"}",
}

// reference is what encoding/json says the envelope is; ok false means
// Parse must fail.
func reference(msg []byte) (e Envelope, raws map[string][]byte, ok bool) {
	raws = map[string][]byte{}
	if !json.Valid(msg) {
		return e, nil, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil {
		return e, nil, false // array, string, number...
	}
	if id, has := top["id"]; has {
		switch c := id[0]; {
		case c == '"', c == 'n', c == '-', c >= '0' && c <= '9':
		default:
			return e, nil, false
		}
		raws["id"] = id
	}
	if m, has := top["method"]; has {
		if m[0] != '"' {
			return e, nil, false
		}
		json.Unmarshal(m, &e.Method)
	}
	_, e.HasResult = top["result"]
	_, e.HasError = top["error"]
	var params map[string]json.RawMessage
	if p := top["params"]; len(p) > 0 && p[0] == '{' {
		json.Unmarshal(p, &params)
	}
	if m := params["_meta"]; len(m) > 0 && m[0] == '{' {
		var meta map[string]json.RawMessage
		json.Unmarshal(m, &meta)
		if v, has := meta["progressToken"]; has {
			raws["progressToken"] = v
		}
	}
	if v, has := params["progressToken"]; has {
		raws["notifToken"] = v
	}
	if v, has := params["requestId"]; has {
		raws["requestId"] = v
	}
	if v := params["uri"]; len(v) > 0 && v[0] == '"' {
		json.Unmarshal(v, &e.URI)
	}
	return e, raws, true
}

func decodeAny(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return m
}

func check(t *testing.T, msg []byte) {
	t.Helper()
	got, err := Parse(msg)
	want, raws, ok := reference(msg)
	if !ok {
		if err == nil {
			t.Fatalf("Parse(%q) = %+v, want an error", msg, got)
		}
		return
	}
	if err != nil {
		t.Fatalf("Parse(%q): %v, want %+v", msg, err, want)
	}
	spans := map[string]Span{"id": got.ID, "progressToken": got.ProgressToken, "notifToken": got.NotifToken, "requestId": got.RequestID}
	for name, sp := range spans {
		raw, has := raws[name]
		if has != sp.Present() || has && !bytes.Equal(msg[sp.Start:sp.End], raw) {
			t.Fatalf("Parse(%q).%s = %v (%q), want %q (present %v)", msg, name, sp, slice(msg, sp), raw, has)
		}
	}
	if got.Method != want.Method || got.URI != want.URI || got.HasResult != want.HasResult || got.HasError != want.HasError {
		t.Fatalf("Parse(%q) = method %q uri %q result %v error %v, want %q %q %v %v", msg,
			got.Method, got.URI, got.HasResult, got.HasError, want.Method, want.URI, want.HasResult, want.HasError)
	}
	// Splicing the id (and the progress token, to exercise two edits)
	// changes only those values.
	newID, newTok := []byte(`"b-\u00e9-9"`), []byte(`123456789`)
	out := Splice(msg, Edit{got.ProgressToken, newTok}, Edit{got.ID, newID})
	if !json.Valid(out) {
		t.Fatalf("Splice(%q) = %q: invalid JSON", msg, out)
	}
	orig, spliced := decodeAny(t, msg), decodeAny(t, out)
	if got.ID.Present() {
		orig["id"] = "b-é-9"
	}
	if got.ProgressToken.Present() {
		orig["params"].(map[string]any)["_meta"].(map[string]any)["progressToken"] = json.Number("123456789")
	}
	if !reflect.DeepEqual(orig, spliced) {
		t.Fatalf("Splice(%q) = %q\ndecodes to %v\nwant       %v", msg, out, spliced, orig)
	}
}

func slice(b []byte, s Span) []byte {
	if !s.Present() {
		return nil
	}
	return b[s.Start:s.End]
}

func FuzzParseSplice(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) { check(t, msg) })
}

func TestParseAgreesWithReference(t *testing.T) {
	for _, s := range seeds {
		t.Run(strings.ReplaceAll(s[:min(len(s), 40)], "/", "|"), func(t *testing.T) { check(t, []byte(s)) })
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		msg                       string
		id, method, tok, ntok, rq string // raw values
		uri                       string
		req, notif, resp          bool
		err                       error
	}{
		{msg: seeds[0], id: `0`, method: "initialize", req: true},
		{msg: seeds[1], method: "notifications/initialized", notif: true},
		{msg: seeds[2], id: `1`, resp: true},
		{msg: seeds[3], id: `"c-7"`, method: "tools/call", tok: `"tok-1"`, req: true},
		{msg: seeds[5], method: "notifications/progress", ntok: `"tok-1"`, notif: true},
		{msg: seeds[6], method: "notifications/cancelled", rq: `"c-7"`, notif: true},
		{msg: seeds[8], id: `null`, resp: true},
		{msg: seeds[11], id: `"x"`, method: "resources/subscribe", uri: "test://static/resource/1", req: true},
		{msg: seeds[14], id: `"two"`, method: "ping", req: true},
		{msg: seeds[15], id: `7`, method: "tools/list", req: true},
		{msg: seeds[16], id: `1`, method: "x", rq: `9`, req: true},
		{msg: `{"id":1}`, id: `1`},
		{msg: seeds[18], err: ErrBatch},
		{msg: seeds[19], err: ErrNotObject},
		{msg: seeds[20], err: ErrEnvelope},
		{msg: seeds[21], err: ErrEnvelope},
		{msg: seeds[22], err: ErrSyntax},
		{msg: `{"a":1}x`, err: ErrSyntax},
		{msg: strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), err: ErrSyntax},
		{msg: `{"a":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.msg[:min(len(tt.msg), 30)], func(t *testing.T) {
			msg := []byte(tt.msg)
			e, err := Parse(msg)
			if tt.err != nil || err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			for _, c := range []struct {
				name string
				sp   Span
				want string
			}{{"id", e.ID, tt.id}, {"progressToken", e.ProgressToken, tt.tok}, {"notifToken", e.NotifToken, tt.ntok}, {"requestId", e.RequestID, tt.rq}} {
				if got := string(slice(msg, c.sp)); got != c.want {
					t.Errorf("%s = %q, want %q", c.name, got, c.want)
				}
			}
			if e.Method != tt.method || e.URI != tt.uri {
				t.Errorf("method, uri = %q, %q, want %q, %q", e.Method, e.URI, tt.method, tt.uri)
			}
			if e.IsRequest() != tt.req || e.IsNotification() != tt.notif || e.IsResponse() != tt.resp {
				t.Errorf("request, notification, response = %v %v %v, want %v %v %v",
					e.IsRequest(), e.IsNotification(), e.IsResponse(), tt.req, tt.notif, tt.resp)
			}
		})
	}
}

func TestSplice(t *testing.T) {
	msg := []byte(`{"id":1,"params":{"_meta":{"progressToken":"t"}}}`)
	e, err := Parse(msg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		edits []Edit
		want  string
	}{
		{nil, string(msg)},
		{[]Edit{{e.ID, []byte(`"abc"`)}}, `{"id":"abc","params":{"_meta":{"progressToken":"t"}}}`},
		{[]Edit{{e.ProgressToken, []byte(`7`)}, {e.ID, []byte(`12345`)}}, `{"id":12345,"params":{"_meta":{"progressToken":7}}}`},
		{[]Edit{{Span{}, []byte(`x`)}, {e.ID, []byte(`2`)}}, `{"id":2,"params":{"_meta":{"progressToken":"t"}}}`},
	}
	for _, tt := range tests {
		if got := string(Splice(msg, tt.edits...)); got != tt.want {
			t.Errorf("Splice(%v) = %s, want %s", tt.edits, got, tt.want)
		}
	}
	if string(msg) != `{"id":1,"params":{"_meta":{"progressToken":"t"}}}` {
		t.Errorf("Splice modified its input: %s", msg)
	}
}

func TestLookup(t *testing.T) {
	msg := []byte(`{"id":1,"result":{"protocolVersion":"2025-06-18","x":{"protocolVersion":1}},"result":{"protocolVersion":"2025-11-25"}}`)
	tests := []struct {
		path []string
		want string
	}{
		{[]string{"result", "protocolVersion"}, `"2025-11-25"`},
		{[]string{"id"}, `1`},
		{[]string{"id", "x"}, ``},
		{[]string{"nope"}, ``},
		{nil, string(msg)},
	}
	for _, tt := range tests {
		sp, err := Lookup(msg, tt.path...)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(slice(msg, sp)); got != tt.want {
			t.Errorf("Lookup(%v) = %q, want %q", tt.path, got, tt.want)
		}
	}
	if _, err := Lookup([]byte(`{"a":`), "a"); !errors.Is(err, ErrSyntax) {
		t.Errorf("Lookup of a truncated message: err = %v, want ErrSyntax", err)
	}
}

func TestParseSkipsWithoutAllocating(t *testing.T) {
	msg := []byte(seeds[4])
	if n := testing.AllocsPerRun(100, func() { Parse(msg) }); n != 0 {
		t.Errorf("Parse allocates %v times per message, want 0", n)
	}
}

func benchMessages() map[string][]byte {
	arg := strings.Repeat("x", 1024-150)
	call := []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + arg + `"},"_meta":{"progressToken":12}}}`)
	text := strings.Repeat(`lorem ipsum \"dolor\" sit amet \u00e9 `, (1<<20)/40)
	result := []byte(`{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`)
	blob := []byte(`{"id":12,"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 1<<20) + `"}]}}`)
	return map[string][]byte{"call-1KiB": call, "result-1MiB": result, "blob-1MiB": blob}
}

func BenchmarkParseSplice(b *testing.B) {
	for name, msg := range benchMessages() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				e, err := Parse(msg)
				if err != nil {
					b.Fatal(err)
				}
				Splice(msg, Edit{e.ID, []byte(`1234567`)}, Edit{e.ProgressToken, []byte(`1234567`)})
			}
		})
	}
}
