package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
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
	// The attacks of issue 26, and their cousins.
	"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":\r{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}\r}",
	`{"jsonrpc":"2.0","method":"NOTIFICATIONS/CANCELLED","params":{"requestId":3}}`,
	`{"jsonrpc":"2.0","ID":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"injected"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a1","RequestId":3}}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/list","Method":"tools/call","params":{"name":"echo","arguments":{"message":"POISON"}}}`,
	"{\"id\":1,\"method\":\"tools/call\",\"params\":{\"_meta\":{\"progressTo\u212Aen\":5}}}",
	"{\"method\":\"notifications/cancelled\",\"params\":{\"reque\u017FtId\":3}}",
	`{"id":1,"method":"x\u0000y"}`,
	`{"id\u0000":1,"method":"x"}`,
	`{"id":1,"method":"tools/call","params":{"_meta":{"progressToken":1},"_Meta":{"progressToken":2}}}`,
	`{"id":1,"method":"x","result":{}}`,
	`{"id":1,"result":{},"error":{"code":1,"message":"m"}}`,
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

// check holds Parse to the rule of one meaning per message: whenever two
// decoders (views.go) read the envelope differently, Parse refuses it;
// whenever Parse accepts it, every decoder reads what Parse read; and a
// refusal as ambiguous names something a decoder does read differently.
func check(t *testing.T, msg []byte) {
	t.Helper()
	got, err := Parse(msg)
	vs, valid := views(msg)
	if !valid {
		if err == nil {
			t.Fatalf("Parse(%q) = %+v, want an error (not a JSON object)", msg, got)
		}
		return
	}
	agree := true
	for _, v := range vs[1:] {
		if v.view != vs[0].view {
			agree = false
			if err == nil {
				t.Fatalf("Parse(%q) accepted a message decoders read differently:\n%s: %+v\n%s: %+v", msg, vs[0].name, vs[0].view, v.name, v.view)
			}
			if !errors.Is(err, ErrEnvelope) {
				t.Fatalf("Parse(%q): %v, want ErrAmbiguous (decoders disagree)", msg, err)
			}
		}
	}
	if err != nil {
		if errors.Is(err, ErrAmbiguous) && agree && !vs[0].view.odd() && !variantKeys(msg) && !splitsLines(msg) {
			t.Fatalf("Parse(%q) refused as ambiguous (%v) a message every decoder reads alike: %+v", msg, err, vs[0].view)
		}
		if !errors.Is(err, ErrAmbiguous) && !errors.Is(err, ErrTooDeep) && (vs[0].view.id == "" || IDValue([]byte(vs[0].view.id))) && (vs[0].view.methodRaw == "" || vs[0].view.methodRaw[0] == '"') {
			t.Fatalf("Parse(%q): %v, for a valid message %+v", msg, err, vs[0].view)
		}
		return
	}
	if pv := parsedView(msg, got); pv != vs[0].view {
		t.Fatalf("Parse(%q) = %+v\nwant %+v", msg, pv, vs[0].view)
	}
	if uri, _ := str(json.RawMessage(vs[0].view.uri)); got.URI != uri {
		t.Fatalf("Parse(%q).URI = %q, want %q", msg, got.URI, uri)
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

// TestParseRefusesEveryVariant builds envelopes from every way of writing
// a routed key (exact, case variants, Unicode folds, escapes, a NUL tail,
// duplicates) and holds Parse to check's rule on each.
func TestParseRefusesEveryVariant(t *testing.T) {
	variants := func(k string) []string {
		vs := []string{k, strings.ToUpper(k), strings.ToUpper(k[:1]) + k[1:], `\u` + fmt.Sprintf("%04x", k[0]) + k[1:], k + `\u0000`}
		for _, r := range []struct{ from, to string }{{"k", "\u212a"}, {"s", "\u017f"}, {"K", "\u212a"}} {
			if strings.Contains(k, r.from) {
				vs = append(vs, strings.Replace(k, r.from, r.to, 1))
			}
		}
		return vs
	}
	values := []string{`1`, `"a"`, `2`, `null`, `{}`, `"tools/list"`, `"tools/call"`, `{"progressToken":7}`}
	rng := rand.New(rand.NewPCG(26, 1))
	member := func(keys []string) string {
		k := keys[rng.IntN(len(keys))]
		vs := variants(k)
		return `"` + vs[rng.IntN(len(vs))] + `":` + values[rng.IntN(len(values))]
	}
	object := func(keys []string, n int, inner func() string) string {
		parts := make([]string, 0, n)
		for range n {
			if inner != nil && rng.IntN(3) == 0 {
				parts = append(parts, inner())
				continue
			}
			parts = append(parts, member(keys))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	refused := 0
	for i := 0; i < 20000; i++ {
		meta := func() string {
			return `"_meta":` + object([]string{"progressToken", "io.modelcontextprotocol/protocolVersion", "other"}, 1+rng.IntN(3), nil)
		}
		params := func() string {
			return `"params":` + object([]string{"requestId", "progressToken", "uri", "cursor", "protocolVersion", "name"}, 1+rng.IntN(4), meta)
		}
		msg := []byte(object([]string{"jsonrpc", "id", "method", "result", "error", "x"}, 1+rng.IntN(5), params))
		if _, err := Parse(msg); err != nil {
			refused++
		}
		check(t, msg)
	}
	if refused == 0 || refused == 20000 {
		t.Fatalf("%d of 20000 generated envelopes refused: the generator does not exercise both sides", refused)
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
		{msg: seeds[14], err: ErrAmbiguous},
		{msg: seeds[15], err: ErrAmbiguous},
		{msg: seeds[16], err: ErrAmbiguous},
		{msg: seeds[26], err: ErrAmbiguous},
		{msg: seeds[27], err: ErrAmbiguous},
		{msg: `{"id":1,"params":[{"requestId":1}],"method":"tools/list"}`, id: `1`, method: "tools/list", req: true},
		{msg: `{"id":"\u0049D","method":"m\u0065thod","params":{"name":"requestId","ID":1,"arguments":{"id":2,"id":3,"Method":4}}}`, id: `"\u0049D"`, method: "method", req: true},
		{msg: `{"id":1}`, id: `1`},
		{msg: seeds[18], err: ErrBatch},
		{msg: seeds[19], err: ErrNotObject},
		{msg: seeds[20], err: ErrEnvelope},
		{msg: seeds[21], err: ErrEnvelope},
		{msg: seeds[22], err: ErrSyntax},
		{msg: `{"a":1}x`, err: ErrSyntax},
		{msg: strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), err: ErrTooDeep},
		{msg: `{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`, err: ErrTooDeep},
		{msg: "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":\r{\"id\":1,\"method\":\"tools/call\"}\r}", err: ErrAmbiguous},
		{msg: "{\"id\":1,\"method\":\"ping\"}\r", id: `1`, method: "ping", req: true},
		{msg: `{"method":"Notifications/Cancelled","params":{"requestId":1}}`, err: ErrAmbiguous},
		{msg: "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}", id: `3`, method: "tools/list", req: true},
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
