//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-86a41135/supervisor/api"
)

// buildGomcp builds fixture/gomcp (a Go SDK server speaking the stateless
// revision and the legacy one) into a directory of the test's own, so the
// test may touch it.
func buildGomcp(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "gomcp")
	build := exec.Command("go", "build", "-o", out, "../../internal/fixture/gomcp")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fixture/gomcp: %v\n%s", err, b)
	}
	return out
}

// goClient connects a Go SDK client (which tries server/discover first)
// through `supervisor ARGS`; onList, if set, is its tools/list_changed
// handler (the SDK then opens subscriptions/listen).
func goClient(ctx context.Context, t *testing.T, in *instance, name string, onList func(), args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = in.env
	cmd.Dir = filepath.Dir(in.state) // one directory for all: it is in the server key
	cmd.Stderr = &prefixWriter{t: t, prefix: name + ": "}
	var opts *mcp.ClientOptions
	if onList != nil {
		opts = &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { onList() }}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "0.0.0"}, opts).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("%s: connect: %v", name, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callText(ctx context.Context, t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("tools/call %s: error result %+v", tool, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// liveRecords is ps --json's live records.
func liveRecords(in *instance) []api.Process { return in.mustProcesses(false) }

// TestShareStatelessAutomatic: a server that speaks the stateless MCP
// revision (design §11) is shared without being asked to once a broker
// has seen it answer server/discover: a second session's plain `run`
// joins the broker of the first, later runs start a broker of their own
// (the registry remembers), `run --share=false` and an upgraded binary
// (a new fingerprint) run direct. List-changed notifications reach the
// real Go SDK client through the broker's own subscriptions/listen.
func TestShareStatelessAutomatic(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte("linger = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := buildGomcp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	defer cancel()

	heard := make(chan struct{}, 16)
	a := goClient(ctx, t, in, "a", func() { heard <- struct{}{} }, "run", "--share", "--session", "s-a", "--name", "gomcp", "--", server)
	pidA := callText(ctx, t, a, "pid", nil)
	b := goClient(ctx, t, in, "b", nil, "run", "--session", "s-b", "--name", "gomcp", "--", server)
	if pidB := callText(ctx, t, b, "pid", nil); pidB != pidA {
		t.Fatalf("the plain run of a stateless server got its own server (pid %s), want the shared one (pid %s)", pidB, pidA)
	}
	br := brokerOf(t, in)
	if len(br.Clients) != 2 {
		t.Fatalf("broker lists %d clients, want 2: %+v", len(br.Clients), br.Clients)
	}
	in.waitEvents(func(evs []api.Event) bool {
		for _, e := range evs {
			if e.Kind == "shared.auto" {
				return true
			}
		}
		return false
	})

	// b changes the tool list: a, listening, hears of it.
	if got := callText(ctx, t, b, "addtool", map[string]any{"name": "extra"}); got != "added extra" {
		t.Fatalf("addtool: %q", got)
	}
	select {
	case <-heard:
	case <-time.After(wait):
		t.Fatal("the listening client heard no tools/list_changed")
	}

	// Both leave; after the linger the broker is gone.
	a.Close()
	b.Close()
	waitCond(t, func() error {
		if ps := liveRecords(in); len(ps) > 0 {
			return fmt.Errorf("%d live records after the clients left", len(ps))
		}
		return nil
	})

	for _, tc := range []struct {
		name   string
		args   []string
		touch  bool
		broker bool
	}{
		{"remembered", []string{"run", "--name", "gomcp", "--", server}, false, true},
		{"opt-out", []string{"run", "--share=false", "--name", "gomcp", "--", server}, false, false},
		{"upgraded", []string{"run", "--name", "gomcp", "--", server}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.touch {
				later := time.Now().Add(time.Hour)
				if err := os.Chtimes(server, later, later); err != nil {
					t.Fatal(err)
				}
			}
			c := goClient(ctx, t, in, tc.name, nil, tc.args...)
			callText(ctx, t, c, "echo", map[string]any{"text": "x"})
			ps := liveRecords(in)
			if len(ps) != 1 || ps[0].Broker != tc.broker {
				t.Fatalf("live records %+v: want one with broker %v", ps, tc.broker)
			}
			c.Close()
			waitCond(t, func() error {
				if ps := liveRecords(in); len(ps) > 0 {
					return fmt.Errorf("%d live records after the client left", len(ps))
				}
				return nil
			})
		})
	}
}
