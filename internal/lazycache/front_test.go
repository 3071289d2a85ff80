//go:build linux

package lazycache

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// frontCache is a warm cache as the daemon hands it to a front.
func frontCache(t *testing.T) []byte {
	t.Helper()
	raw, err := json.Marshal(&Cache{
		Requested: "2025-11-25", Negotiated: "2025-11-25",
		Init:  json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"1"}}`),
		Lists: map[string]json.RawMessage{"tools/list ": json.RawMessage(`{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`)},
		// A legacy server's refusal of server/discover.
		DiscoverError: json.RawMessage(`{"code":-32601,"message":"Method not found"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// A front answers what a lazy broker with its upstream down answers from
// the cache, and nothing else: every other message, and every message it
// could read otherwise than the broker (or the server) would, goes to the
// broker unanswered.
func TestFrontAnswers(t *testing.T) {
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`
	for _, tc := range []struct {
		name   string
		before []string // consumed first
		line   string
		want   string // the reply ("" none); "-" not consumed
	}{
		{"initialize", nil, init, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25"`},
		{"initialized notification", []string{init}, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, ""},
		{"tools/list", []string{init}, `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`, `{"jsonrpc":"2.0","id":"a","result":{"tools":[{"name":"echo"`},
		{"ping", nil, `{"jsonrpc":"2.0","id":7,"method":"ping"}`, `{"jsonrpc":"2.0","id":7,"result":{}}`},
		{"discover refused", nil, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601`},
		{"empty line", nil, `  `, ""},
		{"tools/call", []string{init}, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`, "-"},
		{"uncached list", []string{init}, `{"jsonrpc":"2.0","id":2,"method":"prompts/list"}`, "-"},
		{"list page not cached", []string{init}, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"x"}}`, "-"},
		{"other version", nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}`, "-"},
		{"second initialize", []string{init}, init, "-"},
		{"duplicate id", nil, `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, "-"},
		{"case-variant method", nil, `{"jsonrpc":"2.0","id":1,"Method":"ping"}`, "-"},
		{"escaped key", nil, `{"jsonrpc":"2.0","\u0069d":1,"method":"ping"}`, "-"},
		{"not 2.0", nil, `{"jsonrpc":"1.0","id":1,"method":"ping"}`, "-"},
		{"batch", nil, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "-"},
		{"not JSON", nil, `ping`, "-"},
		{"other notification", []string{init}, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, "-"},
		{"a response", nil, `{"jsonrpc":"2.0","id":1,"result":{}}`, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewFront(frontCache(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.before {
				if _, ok := f.Answer([]byte(l)); !ok {
					t.Fatalf("%s not consumed", l)
				}
			}
			reply, ok := f.Answer([]byte(tc.line))
			switch {
			case tc.want == "-" && ok:
				t.Fatalf("consumed %s (reply %s), want it left to the broker", tc.line, reply)
			case tc.want == "-":
			case !ok:
				t.Fatalf("%s not consumed", tc.line)
			case !strings.HasPrefix(string(reply), tc.want) || tc.want == "" && reply != nil:
				t.Fatalf("reply %s, want %s...", reply, tc.want)
			}
		})
	}
}

// A cache that cannot answer a handshake, or holds an entry of the wrong
// shape, serves no front.
func TestFrontRefusesAnUnverifiedCache(t *testing.T) {
	for name, c := range map[string]*Cache{
		"empty":         {},
		"no initialize": {Discover: json.RawMessage(`{"supportedVersions":["2026-07-28"]}`)},
		"bad list": {Requested: "v", Negotiated: "v", Init: json.RawMessage(`{"protocolVersion":"v","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`),
			Lists: map[string]json.RawMessage{"tools/list ": json.RawMessage(`{"tools":"not a list"}`)}},
	} {
		raw, _ := json.Marshal(c)
		if _, err := NewFront(raw); err == nil {
			t.Errorf("%s: a front from %s", name, raw)
		}
	}
	if _, err := NewFront([]byte(`{`)); err == nil {
		t.Error("a front from a cache that does not decode")
	}
}

// Serve answers until a request needs the server and hands over what it
// read; a client that ends its input first ends it.
func TestFrontServe(t *testing.T) {
	f, err := NewFront(frontCache(t))
	if err != nil {
		t.Fatal(err)
	}
	in := strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}` + "\n" + `{"jsonrpc":"2.0","id":2,"me`)
	var out strings.Builder
	h, err := f.Serve(in, &out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "\n"); got != 1 || !strings.HasPrefix(out.String(), `{"jsonrpc":"2.0","id":0,"result"`) {
		t.Fatalf("answered %q, want the initialize alone", out.String())
	}
	if strings.Count(string(h.Replay), "\n") != 2 || !strings.Contains(string(h.Replay), "notifications/initialized") {
		t.Fatalf("replay %q, want initialize and initialized", h.Replay)
	}
	if want := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}` + "\n" + `{"jsonrpc":"2.0","id":2,"me`; string(h.Rest) != want {
		t.Fatalf("rest %q, want %q", h.Rest, want)
	}

	f, _ = NewFront(frontCache(t))
	out.Reset()
	_, err = f.Serve(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"), &out)
	if !IsFrontEOF(err) || out.String() != `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n" {
		t.Fatalf("after ping and EOF: %v, answered %q", err, out.String())
	}

	// A line longer than a front holds goes to the broker as it is.
	f, _ = NewFront(frontCache(t))
	long := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":"` + strings.Repeat("a", frontMaxLine) + `"}}` + "\n"
	h, err = f.Serve(strings.NewReader(long), io.Discard)
	if err != nil || len(h.Replay) != 0 || !strings.HasPrefix(long, string(h.Rest)) || len(h.Rest) < frontMaxLine {
		t.Fatalf("long line: %v, replay %d bytes, rest %d bytes", err, len(h.Replay), len(h.Rest))
	}
}

// A front keeps for the broker only the handshake: a host's keep-alive
// pings over hours of listing-only use never fill it up.
func TestFrontKeepsOnlyTheHandshake(t *testing.T) {
	f, err := NewFront(frontCache(t))
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
	}
	for i := range frontMaxReplay / 20 {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i+2))
	}
	for _, l := range lines {
		if _, ok := f.Answer([]byte(l)); !ok {
			t.Fatalf("%s not consumed", l)
		}
	}
	if want := lines[0] + "\n" + lines[1] + "\n"; string(f.replay) != want {
		t.Fatalf("replay %d bytes, want the handshake alone", len(f.replay))
	}
}
