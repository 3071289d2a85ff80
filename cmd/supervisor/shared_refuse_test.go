//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// rpcLine reads the next JSON-RPC message from a shim's stdout.
func rpcLine(t *testing.T, s *shimProc, who string) map[string]json.RawMessage {
	t.Helper()
	line, err := readLine(s.stdout, wait)
	if err != nil {
		t.Fatalf("%s: read: %v", who, err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("%s: %q is not JSON: %v", who, line, err)
	}
	return m
}

// answerTo reads until the answer to id, failing on an answer to another.
func answerTo(t *testing.T, s *shimProc, who, id string) string {
	t.Helper()
	for {
		m := rpcLine(t, s, who)
		if _, note := m["method"]; note {
			continue
		}
		if string(m["id"]) != id {
			t.Fatalf("%s: an answer to id %s, want %s: %v", who, m["id"], id, m)
		}
		raw, _ := json.Marshal(m)
		return string(raw)
	}
}

func send(t *testing.T, s *shimProc, who, format string, args ...any) {
	t.Helper()
	if _, err := fmt.Fprintf(s.stdin, format+"\n", args...); err != nil {
		t.Fatalf("%s: write: %v", who, err)
	}
}

// Issue 26's first two reproductions through the real binary: two
// sessions sharing one Go server (encoding/json reads keys regardless of
// case), one of them writing "ID" and "RequestId" to reach the other's
// call. The other's call is answered with its own result, the upstream
// never hears the cancellations, and the refusals are evented and
// counted.
func TestShareRefusesSmuggledKeys(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	args := func(session string) []string {
		return []string{"--share", "--name", "fx", "--session", session, "--", bin, "_fixture", "mcp"}
	}
	a, b := in.startShim(args("sess-a")...), in.startShim(args("sess-b")...)
	for _, c := range []struct {
		s   *shimProc
		who string
	}{{a, "a"}, {b, "b"}} {
		send(t, c.s, c.who, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":%q,"version":"1"}}}`, c.who)
		if got := answerTo(t, c.s, c.who, "0"); !strings.Contains(got, `"result"`) {
			t.Fatalf("%s: initialize: %s", c.who, got)
		}
		send(t, c.s, c.who, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	send(t, b, "b", `{"jsonrpc":"2.0","id":"b-secret","method":"tools/call","params":{"name":"slow","arguments":{"steps":1,"ms":2000}}}`)
	for n := 1; n <= 19; n++ {
		send(t, a, "a", `{"jsonrpc":"2.0","ID":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"INJECTED"}}}`, n)
		send(t, a, "a", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a1","RequestId":%d}}`, n)
	}
	send(t, a, "a", `{"jsonrpc":"2.0","id":7,"Method":"tools/list","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	if got := answerTo(t, a, "a", "7"); !strings.Contains(got, "-32600") || !strings.Contains(got, "case-sensitive") {
		t.Fatalf("a: an ambiguous request: %s, want -32600 saying keys are case-sensitive", got)
	}
	if got := answerTo(t, b, "b", `"b-secret"`); !strings.Contains(got, "done 1 steps") {
		t.Fatalf("b's call was answered with %s, want its own result", got)
	}
	send(t, a, "a", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"stats","arguments":{}}}`)
	if got := answerTo(t, a, "a", "8"); !strings.Contains(got, "cancelled=0") {
		t.Fatalf("the upstream heard a smuggled cancellation: %s", got)
	}
	deadline := time.Now().Add(wait)
	for {
		m := in.mustRun("metrics")
		if strings.Contains(m, `supervisor_broker_refused_total{kind="ambiguous"} 39`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics do not count 39 refusals:\n%s", m)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ev := in.mustRun("events"); !strings.Contains(ev, "shared.refused") || !strings.Contains(ev, "ambiguous messages refused") {
		t.Fatalf("events lack shared.refused:\n%s", ev)
	}
	a.stdin.Close()
	b.stdin.Close()
	for _, s := range []*shimProc{a, b} {
		if code := s.exitCode(t); code != 0 {
			t.Errorf("shim exit %d, want 0", code)
		}
	}
}
