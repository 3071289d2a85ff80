//go:build linux

package broker

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/lazycache"
)

// What a front consumed reaches the broker as the client's own messages:
// the upstream is initialized with the host's initialize, and the client
// hears no second answer to anything the front answered; what the front
// read after is read before the client's input.
func TestFrontHandsOverToTheBroker(t *testing.T) {
	cache := warmCache(t)
	raw, _ := json.Marshal(cache)
	f, err := lazycache.NewFront(raw)
	if err != nil {
		t.Fatal(err)
	}
	hostR, hostW := io.Pipe()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	served := make(chan Handover, 1)
	go func() {
		h, err := f.Serve(hostR, outW)
		outW.Close()
		if err != nil {
			t.Error(err)
		}
		served <- h
	}()
	go func() {
		io.WriteString(hostW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"host","version":"1"}}}`+"\n"+
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
			`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n"+
			`{"jsonrpc":"2.0","id":2,"method":"ping"}`+"\n"+
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"first"}}}`+"\n"+
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"stats","arguments":{}}}`+"\n")
		hostW.Close()
	}()
	var fr Handover
	select {
	case fr = <-served:
	case <-time.After(wait):
		t.Fatal("the front did not hand over")
	}
	sc := bufio.NewScanner(outR)
	var answered []string
	for sc.Scan() {
		var m msg
		json.Unmarshal(sc.Bytes(), &m)
		answered = append(answered, string(m.ID))
	}
	if strings.Join(answered, ",") != "0,1,2" {
		t.Fatalf("the front answered ids %v, want 0,1,2", answered)
	}

	h := newHarness(t, fixtureArgv(), func(c *Config) { c.Lazy, c.Cache = true, cache })
	c := h.attachAfterFront("host", fr)
	if m := c.answer("3"); m.text() != "first" {
		t.Fatalf("the call the front left: %s", m.raw)
	}
	if st := c.answer("4").text(); !strings.Contains(st, "initialize=1 initialized=1") {
		t.Fatalf("upstream stats %q, want it initialized once, by the host's own handshake", st)
	}
	// A second answer to what the front answered would have come before
	// 3's (one queue, in order), and answer fails on a foreign id; drain
	// checks what it passed over.
	for _, m := range c.drain() {
		if m.Method == "" {
			t.Errorf("a second answer to what the front answered: %s", m.raw)
		}
	}
	if s := h.b.Stats(); s.LazyStarts != 1 {
		t.Errorf("lazy starts %d, want 1", s.LazyStarts)
	}
}

// A client whose front told it yes where the broker says no (its
// initialize from the cache, and the shared server speaking another
// version by the time it came) is detached: it cannot be told otherwise
// after the fact, and must not go on with a server it did not agree with.
func TestFrontAnswerRefusedDetaches(t *testing.T) {
	cache := warmCache(t)
	h := newHarness(t, fixtureArgv(), func(c *Config) { c.Lazy, c.Cache = true, cache })
	a := h.attach("a")
	if m := a.initialize("0", "2025-06-18"); m.Error != nil {
		t.Fatalf("initialize at another version: %s", m.raw)
	}
	b := h.attachAfterFront("b", Handover{
		Replay: []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}` + "\n" +
			`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"),
		Rest: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n"),
	})
	b.closed()
	h.waitEvent("client.front_refused")
	for _, m := range b.drain() {
		if m.Method == "" && string(m.ID) == "0" {
			t.Errorf("a second answer to the front's initialize: %s", m.raw)
		}
	}
	a.call("2", "echo", `{"text":"still"}`)
	if m := a.answer("2"); m.text() != "still" {
		t.Fatalf("the other client after the detach: %s", m.raw)
	}
}
