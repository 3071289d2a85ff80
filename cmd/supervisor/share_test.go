//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/spawn"
)

// shareCase is a real npm server run with --share.
type shareCase struct {
	name string
	argv func(npm, root string) []string
	tool string
	args func(client, call int) map[string]any
	want func(client, call int, root string) string
}

func shareCases() []shareCase {
	entry := func(npm, pkg string) string {
		return filepath.Join(npm, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	}
	return []shareCase{
		{"everything", func(npm, _ string) []string { return []string{"node", entry(npm, "server-everything"), "stdio"} },
			"echo",
			func(c, i int) map[string]any {
				return map[string]any{"message": fmt.Sprintf("client %d call %d", c, i)}
			},
			func(c, i int, _ string) string { return fmt.Sprintf("Echo: client %d call %d", c, i) }},
		{"filesystem", func(npm, root string) []string { return []string{"node", entry(npm, "server-filesystem"), root} },
			"read_text_file",
			func(c, i int) map[string]any { return map[string]any{"path": fmt.Sprintf("f-%d-%d.txt", c, i%4)} },
			func(c, i int, _ string) string { return fmt.Sprintf("content of client %d file %d", c, i%4) }},
	}
}

// sharedClient is one Go SDK client of a --share server.
type sharedClient struct {
	cmd *exec.Cmd
	cs  *mcp.ClientSession
}

// TestShareConcurrentClients: N clients (2 and 5) of the real
// server-everything and server-filesystem through `run --share`, each from
// the official Go SDK (whose request ids start at 1 in every client, so
// they collide), interleave tools/call: every answer reaches its own
// client, and one server process exists. When the last client has gone
// and the linger has passed, the broker and its server are gone.
func TestShareConcurrentClients(t *testing.T) {
	t.Parallel()
	npm := npmDeps(t)
	for _, c := range shareCases() {
		for _, n := range []int{2, 5} {
			t.Run(fmt.Sprintf("%s/%d", c.name, n), func(t *testing.T) {
				in := newInstance(t)
				if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte("linger = \"1s\"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				root := mcpRoot(t)
				for cl := 0; cl < n; cl++ {
					for f := 0; f < 4; f++ {
						os.WriteFile(filepath.Join(root, fmt.Sprintf("f-%d-%d.txt", cl, f)), []byte(fmt.Sprintf("content of client %d file %d", cl, f)), 0o600)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
				defer cancel()
				// One environment for all: a difference would give each
				// client its own upstream (the server key).
				env := mcpEnv(t, in)
				clients := make([]*sharedClient, n)
				var wg sync.WaitGroup
				errs := make(chan error, n*40)
				for i := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						args := append([]string{"run", "--share", "--name", c.name, "--"}, c.argv(npm, root)...)
						cmd := exec.Command(bin, args...)
						cmd.Dir = root
						cmd.Env = env
						cmd.Stderr = &prefixWriter{t: t, prefix: fmt.Sprintf("client %d: ", i)}
						client := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("share-%d", i), Version: "0.0.0"}, nil)
						cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
						if err != nil {
							errs <- fmt.Errorf("client %d: connect: %v", i, err)
							return
						}
						clients[i] = &sharedClient{cmd: cmd, cs: cs}
					}()
				}
				wg.Wait()
				t.Cleanup(func() {
					for _, cl := range clients {
						if cl != nil {
							cl.cs.Close()
						}
					}
				})
				select {
				case err := <-errs:
					t.Fatal(err)
				default:
				}
				// Every client calls 8 times at once, all clients at once.
				for i, cl := range clients {
					for k := 0; k < 8; k++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							res, err := cl.cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args(i, k)})
							if err != nil {
								errs <- fmt.Errorf("client %d call %d: %v", i, k, err)
								return
							}
							var text []string
							for _, ct := range res.Content {
								if tc, ok := ct.(*mcp.TextContent); ok {
									text = append(text, tc.Text)
								}
							}
							if want := c.want(i, k, root); res.IsError || !strings.Contains(strings.Join(text, "\n"), want) {
								errs <- fmt.Errorf("client %d call %d: got %q (isError %v), want %q", i, k, text, res.IsError, want)
							}
						}()
					}
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}

				// One broker, every client attached, one server process.
				var brokers []api.Process
				for _, p := range in.mustProcesses(false) {
					if p.Broker {
						brokers = append(brokers, p)
					}
				}
				if len(brokers) != 1 || len(brokers[0].Clients) != n {
					t.Fatalf("ps: %d brokers (%+v), want 1 with %d clients", len(brokers), brokers, n)
				}
				br := brokers[0]
				servers := serverProcs(t, br.ID)
				if len(servers) != 1 {
					t.Errorf("server processes under broker %s: %v, want exactly 1", br.ID, servers)
				}

				// The clients go; the broker and its server follow after
				// the linger.
				for _, cl := range clients {
					cl.cs.Close()
				}
				waitGonePID(t, br.PID, br.Token)
				for _, s := range servers {
					waitGonePID(t, s.pid, s.tok)
				}
				p := waitRecord(t, in, br.PID, func(p api.Process) bool { return p.State.Final() })
				if len(p.Clients) != 0 {
					t.Errorf("broker record %s still lists clients %+v", p.ID, p.Clients)
				}
			})
		}
	}
}

// serverProcs lists the live node processes carrying procID's marker: the
// upstream servers of a broker.
func serverProcs(t *testing.T, procID string) []tracked {
	t.Helper()
	return markedProcs(t, map[string]bool{procID: true}, func(argv []string) bool {
		return len(argv) > 0 && filepath.Base(argv[0]) == "node"
	})
}

// markedProcs lists the processes carrying the marker of one of the
// records ids whose command line keep accepts.
func markedProcs(t *testing.T, ids map[string]bool, keep func(argv []string) bool) []tracked {
	t.Helper()
	infos, err := proc.Scan()
	if err != nil {
		t.Fatal(err)
	}
	var out []tracked
	for _, info := range infos {
		env, err := proc.Environ(info.PID)
		if err != nil {
			continue
		}
		if v, _ := proc.EnvValue(env, spawn.EnvProcID); !ids[v] {
			continue
		}
		if argv, _ := proc.Cmdline(info.PID); keep(argv) {
			out = append(out, tracked{strings.Join(argv, " "), info.PID, info.Token})
		}
	}
	return out
}

// shareSetup starts an instance with a short linger and n Go SDK clients
// of the real server-everything through `run --share`.
func shareSetup(t *testing.T, n int) (*instance, []*sharedClient, context.Context) {
	return shareSetupWith(t, n, []string{"--share"}, "", nil)
}

// shareSetupWith is shareSetup with the run flags, config lines and
// client options (by client) given.
func shareSetupWith(t *testing.T, n int, flags []string, config string, opts func(i int) *mcp.ClientOptions) (*instance, []*sharedClient, context.Context) {
	t.Helper()
	npm := npmDeps(t)
	in := newInstance(t)
	if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte("linger = \"1s\"\n"+config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	t.Cleanup(cancel)
	env := mcpEnv(t, in)
	dir := t.TempDir()
	var clients []*sharedClient
	for i := 0; i < n; i++ {
		args := append(append([]string{"run"}, flags...), "--name", "everything", "--", "node",
			filepath.Join(npm, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio")
		cmd := in.command(args...) // the lean entry under SUPERVISOR_TEST_LEAN=1
		cmd.Dir = dir
		cmd.Env = env
		cmd.Stderr = &prefixWriter{t: t, prefix: fmt.Sprintf("client %d: ", i)}
		var o *mcp.ClientOptions
		if opts != nil {
			o = opts(i)
		}
		client := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("share-%d", i), Version: "0.0.0"}, o)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
		if err != nil {
			t.Fatalf("client %d: connect: %v", i, err)
		}
		cl := &sharedClient{cmd: cmd, cs: cs}
		clients = append(clients, cl)
		t.Cleanup(func() { cl.cs.Close() })
	}
	return in, clients, ctx
}

// onFirstProgress is client options that tell on inFlight (buffered) that
// a progress notification came: a call that sent one is in flight at the
// server, which a test waits on instead of sleeping for it.
func onFirstProgress(inFlight chan<- struct{}) *mcp.ClientOptions {
	return &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
		select {
		case inFlight <- struct{}{}:
		default:
		}
	}}
}

// awaitProgress waits for a call's first progress on inFlight: it is in
// flight at the server. The call ending first (on ended, when not nil), or
// ctx, fails the test.
func awaitProgress(t *testing.T, ctx context.Context, inFlight <-chan struct{}, ended <-chan error, what string) {
	t.Helper()
	select {
	case <-inFlight:
	case err := <-ended:
		t.Fatalf("%s ended before any progress: %v", what, err)
	case <-ctx.Done():
		t.Fatalf("%s sent no progress", what)
	}
}

// echoes are clients' echo loops: each calls echo until stop is closed,
// and counts the calls it completed, which a test waits on instead of
// sleeping for traffic to flow.
type echoes struct {
	res   []<-chan error
	calls []*atomic.Int64
}

// add starts client cl's loop; the first error (a call that failed or came
// back wrong) ends it, and a loop stopped before its first call is one.
func (e *echoes) add(ctx context.Context, i int, cl *sharedClient, stop <-chan struct{}) {
	res := make(chan error, 1)
	calls := new(atomic.Int64)
	e.res, e.calls = append(e.res, res), append(e.calls, calls)
	go func() {
		for k := 0; ; k++ {
			select {
			case <-stop:
				if k == 0 {
					res <- fmt.Errorf("client %d made no call", i)
				} else {
					res <- nil
				}
				return
			default:
			}
			msg := fmt.Sprintf("client %d call %d", i, k)
			r, err := cl.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
			if err != nil {
				res <- fmt.Errorf("client %d call %d: %v", i, k, err)
				return
			}
			if len(r.Content) == 0 || r.Content[0].(*mcp.TextContent).Text != "Echo: "+msg {
				res <- fmt.Errorf("client %d call %d: got %+v", i, k, r.Content)
				return
			}
			calls.Add(1)
		}
	}()
}

// waitMore waits until every loop has completed n more calls than now:
// traffic flows through each client at this point of the test.
func (e *echoes) waitMore(t *testing.T, n int64) {
	t.Helper()
	base := make([]int64, len(e.calls))
	for i, c := range e.calls {
		base[i] = c.Load()
	}
	waitCond(t, func() error {
		for i, c := range e.calls {
			if got := c.Load() - base[i]; got < n {
				return fmt.Errorf("echo loop %d made %d calls of the %d waited for", i, got, n)
			}
		}
		return nil
	})
}

// errs waits for every loop (stop closed) and returns their errors.
func (e *echoes) errs() []error {
	var out []error
	for _, r := range e.res {
		if err := <-r; err != nil {
			out = append(out, err)
		}
	}
	return out
}

// brokerOf returns the instance's one live broker record.
func brokerOf(t *testing.T, in *instance) api.Process {
	t.Helper()
	var out []api.Process
	for _, p := range in.mustProcesses(false) {
		if p.Broker {
			out = append(out, p)
		}
	}
	if len(out) != 1 {
		t.Fatalf("want one live broker, got %+v", out)
	}
	return out[0]
}

// TestShareSurvivesDaemonLoss: clients of a shared server keep calling
// while the daemon is SIGKILLed and then restarted: no call fails, no
// client's shim exits, the broker and its one server live on, and the new
// daemons know every client again.
func TestShareSurvivesDaemonLoss(t *testing.T) {
	t.Parallel()
	in, clients, ctx := shareSetup(t, 3)
	br := brokerOf(t, in)
	servers := serverProcs(t, br.ID)
	for _, how := range []string{"SIGKILL", "daemon restart"} {
		stop := make(chan struct{})
		var loops echoes
		for i, cl := range clients {
			loops.add(ctx, i, cl, stop)
		}
		loops.waitMore(t, 3) // traffic under way
		old := in.daemonPID()
		if how == "SIGKILL" {
			in.killDaemon(t)
		} else {
			in.mustRun("daemon", "restart")
		}
		// The shims find the next daemon (SIGKILL: they start it) and
		// re-attach; the traffic never stopped.
		in.waitNewDaemon(t, old)
		waitCond(t, func() error {
			if p := brokerOf(t, in); len(p.Clients) != len(clients) {
				return fmt.Errorf("after %s: broker lists %d clients, want %d", how, len(p.Clients), len(clients))
			}
			return nil
		})
		loops.waitMore(t, 3) // and flows on through the next daemon
		close(stop)
		for _, err := range loops.errs() {
			t.Errorf("after %s: %v", how, err)
		}
		for i, cl := range clients {
			if cl.cmd.ProcessState != nil {
				t.Errorf("after %s: client %d's shim exited: %v", how, i, cl.cmd.ProcessState)
			}
		}
		if p := brokerOf(t, in); p.ID != br.ID || p.PID != br.PID {
			t.Errorf("after %s: broker %s (pid %d), want the same %s (pid %d)", how, p.ID, p.PID, br.ID, br.PID)
		}
		if now := serverProcs(t, br.ID); len(now) != 1 || now[0].pid != servers[0].pid {
			t.Errorf("after %s: server processes %v, want the one %v", how, now, servers)
		}
	}
}

// TestShareClientKilledMidCall: one client's host is SIGKILLed (its pipes
// close) while calls are in flight: the other clients' calls complete,
// the upstream lives on for them, and goes only after the last client and
// the linger.
func TestShareClientKilledMidCall(t *testing.T) {
	t.Parallel()
	// The victim's slow call's first progress says it is in flight.
	inFlight := make(chan struct{}, 1)
	opts := func(i int) *mcp.ClientOptions {
		if i != 0 {
			return nil
		}
		return onFirstProgress(inFlight)
	}
	in, clients, ctx := shareSetupWith(t, 3, []string{"--share"}, "", opts)
	br := brokerOf(t, in)
	servers := serverProcs(t, br.ID)
	stop := make(chan struct{})
	var loops echoes
	for i, cl := range clients[1:] {
		loops.add(ctx, i+1, cl, stop)
	}
	// The victim's calls are in flight when its pipes close: a slow tool
	// keeps one open.
	victim := clients[0]
	long := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 5, "steps": 5}}
	long.SetProgressToken("victim")
	go victim.cs.CallTool(ctx, long)
	awaitProgress(t, ctx, inFlight, nil, "the victim's slow call")
	go victim.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}})
	victim.cs.Close() // closes its pipes: as a SIGKILLed host's would
	waitCond(t, func() error {
		if p := brokerOf(t, in); len(p.Clients) != len(clients)-1 {
			return fmt.Errorf("broker lists %d clients, want %d", len(p.Clients), len(clients)-1)
		}
		return nil
	})
	loops.waitMore(t, 3) // the others' calls go on after the victim's
	close(stop)
	for _, err := range loops.errs() {
		t.Error(err)
	}
	if now := serverProcs(t, br.ID); len(now) != 1 || now[0].pid != servers[0].pid {
		t.Errorf("server processes %v, want the one %v", now, servers)
	}
	for _, cl := range clients[1:] {
		cl.cs.Close()
	}
	waitGonePID(t, br.PID, br.Token)
	waitGonePID(t, servers[0].pid, servers[0].tok)
}

// TestShareFromConfig: `[servers.NAME] share = true` shares a server whose
// host config says plain `supervisor run --name NAME` (no --share).
func TestShareFromConfig(t *testing.T) {
	t.Parallel()
	in, clients, ctx := shareSetupWith(t, 2, nil, "[servers.everything]\nshare = true\n", nil)
	br := brokerOf(t, in)
	if len(br.Clients) != 2 {
		t.Fatalf("broker %s lists %d clients, want 2", br.ID, len(br.Clients))
	}
	stop := make(chan struct{})
	var loops echoes
	for i, cl := range clients {
		loops.add(ctx, i, cl, stop)
	}
	loops.waitMore(t, 3)
	close(stop)
	for _, err := range loops.errs() {
		t.Error(err)
	}
	var sessions []api.SessionInfo
	if err := json.Unmarshal([]byte(in.mustRun("sessions", "--json")), &sessions); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, s := range sessions {
		total += s.Shared
	}
	if total != 2 {
		t.Errorf("sessions --json counts %d shared clients, want 2: %+v", total, sessions)
	}
	if got := in.mustRun("config", "show"); !strings.Contains(got, "servers.everything.share") {
		t.Errorf("config show does not list servers.everything.share:\n%s", got)
	}
	// The lean entry's run is declined (it is not exec'd in place) before
	// anything is recorded for it: no failed record is left.
	for _, p := range in.mustProcesses(true) {
		if p.State == api.StateFailed {
			t.Errorf("a failed record %s (%s): %s", p.ID, p.Name, p.Error)
		}
	}
}

// TestShareRefusesAmbiguousServerRequest: a shared server that asks its
// client for roots/list while two clients have calls in flight cannot be
// answered by the right client: the broker refuses it, and ps flags the
// server as not safely shareable (its HEALTH, --json's unsafe, an event).
func TestShareRefusesAmbiguousServerRequest(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	dir := t.TempDir()
	var css []*mcp.ClientSession
	// The slow call's first progress says it is in flight at the server.
	inFlight := make(chan struct{}, 1)
	for i := 0; i < 2; i++ {
		cmd := exec.Command(bin, "run", "--share", "--name", "fixture", "--", bin, "_fixture", "mcp")
		cmd.Dir = dir
		cmd.Env = in.env
		cmd.Stderr = &prefixWriter{t: t, prefix: fmt.Sprintf("client %d: ", i)}
		var opts *mcp.ClientOptions
		if i == 0 {
			opts = onFirstProgress(inFlight)
		}
		client := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("roots-%d", i), Version: "0.0.0"}, opts)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
		if err != nil {
			t.Fatalf("client %d: connect: %v", i, err)
		}
		defer cs.Close()
		css = append(css, cs)
	}
	slow := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 10, "ms": 200}}
		p.SetProgressToken("in-flight")
		_, err := css[0].CallTool(ctx, p)
		slow <- err
	}()
	awaitProgress(t, ctx, inFlight, slow, "the slow call")
	res, err := css[1].CallTool(ctx, &mcp.CallToolParams{Name: "roots", Arguments: map[string]any{}})
	// The fixture answers with what its roots/list got back: here the
	// broker's JSON-RPC error, not a client's roots.
	if err != nil {
		t.Fatalf("roots: %v", err)
	}
	if len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "cannot be routed") {
		t.Errorf("roots with two calls in flight: got %q, want the broker's refusal (a JSON-RPC error)", res.Content[0].(*mcp.TextContent).Text)
	}
	if err := <-slow; err != nil {
		t.Errorf("the other client's slow call: %v", err)
	}
	br := brokerOf(t, in)
	if br.Unsafe == "" {
		t.Errorf("ps --json: broker %s not flagged unsafe", br.ID)
	}
	if out := in.mustRun("ps"); !strings.Contains(out, "unsafe") {
		t.Errorf("ps does not flag the server:\n%s", out)
	}
	found := false
	for _, ev := range in.eventsJSON("--lines", "0") {
		found = found || ev.Kind == "shared.unsafe" && ev.Process == br.ID
	}
	if !found {
		t.Errorf("no shared.unsafe event for %s", br.ID)
	}
}

// TestShareProgressAndCancel: two clients of the real server-everything
// run its long-running tool with the same progress token ("p"): each gets
// its own progress notifications and no other's. A client that cancels
// its call gets the cancellation; the other's call completes.
func TestShareProgressAndCancel(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	progress := make([][]float64, 2)
	// Client 1's first progress says its call is in flight: then it is
	// cancelled.
	cancelable := make(chan struct{}, 1)
	opts := func(i int) *mcp.ClientOptions {
		return &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if req.Params.ProgressToken == "p" {
				// The total tells whose call it was: 5 steps or 10.
				progress[i] = append(progress[i], req.Params.Total)
				if i == 1 {
					select {
					case cancelable <- struct{}{}:
					default:
					}
				}
			}
		}}
	}
	_, clients, ctx := shareSetupWith(t, 2, []string{"--share"}, "", opts)
	call := func(ctx context.Context, cl *sharedClient, steps int) error {
		p := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": steps / 5.0, "steps": steps}}
		p.SetProgressToken("p")
		res, err := cl.cs.CallTool(ctx, p)
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %+v", res.Content)
		}
		return err
	}
	// Client 0: 5 steps, to the end; client 1: 10 steps, cancelled.
	done0 := make(chan error, 1)
	go func() { done0 <- call(ctx, clients[0], 5) }()
	cctx, cancel := context.WithCancel(ctx)
	done1 := make(chan error, 1)
	go func() { done1 <- call(cctx, clients[1], 10) }()
	awaitProgress(t, ctx, cancelable, done1, "client 1's call")
	cancel()
	if err := <-done1; err == nil {
		t.Errorf("client 1's cancelled call returned no error")
	}
	if err := <-done0; err != nil {
		t.Errorf("client 0's call: %v", err)
	}
	// The SDK may run a notification's handler after the call's answer
	// has returned: wait for the fifth.
	for deadline := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(progress[0])
		mu.Unlock()
		if n >= 5 || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress[0]) != 5 || slices.ContainsFunc(progress[0], func(total float64) bool { return total != 5 }) {
		t.Errorf("client 0 got progress totals %v, want its own five (total 5)", progress[0])
	}
	if len(progress[1]) == 0 || slices.ContainsFunc(progress[1], func(total float64) bool { return total != 10 }) {
		t.Errorf("client 1 got progress totals %v, want some of its own (total 10) and none of client 0's", progress[1])
	}
	// The upstream still serves both.
	stop := make(chan struct{})
	var loops echoes
	loops.add(ctx, 0, clients[0], stop)
	loops.add(ctx, 1, clients[1], stop)
	loops.waitMore(t, 3)
	close(stop)
	for _, err := range loops.errs() {
		t.Error(err)
	}
}

// TestShareUpstreamCrash: the shared server crashes while a call is in
// flight: that caller gets a JSON-RPC error, the clients stay connected
// (their shims live), and after the broker's restart the next calls of
// both succeed.
func TestShareUpstreamCrash(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	dir := t.TempDir()
	var css []*mcp.ClientSession
	var cmds []*exec.Cmd
	// The slow call's first progress says it is in flight at the server.
	inFlight := make(chan struct{}, 1)
	for i := 0; i < 2; i++ {
		cmd := exec.Command(bin, "run", "--share", "--name", "fixture", "--", bin, "_fixture", "mcp")
		cmd.Dir = dir
		cmd.Env = in.env
		cmd.Stderr = &prefixWriter{t: t, prefix: fmt.Sprintf("client %d: ", i)}
		var opts *mcp.ClientOptions
		if i == 0 {
			opts = onFirstProgress(inFlight)
		}
		client := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("crash-%d", i), Version: "0.0.0"}, opts)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
		if err != nil {
			t.Fatalf("client %d: connect: %v", i, err)
		}
		defer cs.Close()
		css = append(css, cs)
		cmds = append(cmds, cmd)
	}
	br := brokerOf(t, in)
	slow := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 20, "ms": 200}}
		p.SetProgressToken("in-flight")
		_, err := css[0].CallTool(ctx, p)
		slow <- err
	}()
	awaitProgress(t, ctx, inFlight, slow, "the slow call")
	css[1].CallTool(ctx, &mcp.CallToolParams{Name: "crash", Arguments: map[string]any{}}) // its answer is the crash's error
	select {
	case err := <-slow:
		if err == nil {
			t.Errorf("the call in flight when the server crashed returned no error")
		}
	case <-time.After(wait):
		t.Fatalf("the call in flight when the server crashed was never answered")
	}
	for i, cs := range css {
		waitCond(t, func() error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "again"}})
			if err != nil || res.IsError {
				return fmt.Errorf("client %d after the restart: %v %+v", i, err, res)
			}
			return nil
		})
		if cmds[i].ProcessState != nil {
			t.Errorf("client %d's shim exited: %v", i, cmds[i].ProcessState)
		}
	}
	if after := brokerOf(t, in); after.ID != br.ID || after.Restarts < 1 {
		t.Errorf("broker after the crash: %s restarts %d, want %s with at least 1 restart", after.ID, after.Restarts, br.ID)
	}
}

// TestShareTSSDKClients: three clients of the official TypeScript SDK
// (client.mjs, a host in miniature) share one server-everything through
// `run --share`: each gets its own echo back and one broker lists them.
// One host is SIGKILLed: only its client is detached, the server stays
// for the others; when they have closed their sessions the broker goes
// after the linger.
func TestShareTSSDKClients(t *testing.T) {
	t.Parallel()
	npm := npmDeps(t)
	in := newInstance(t)
	if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte("linger = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := mcpEnv(t, in)
	entry := filepath.Join(npm, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	var clients []*mcpClient
	for i := 0; i < 3; i++ {
		msg := fmt.Sprintf("from ts client %d", i)
		config, err := json.Marshal(mcpHostConfig{Command: bin, Args: []string{"run", "--share", "--name", "everything", "--", "node", entry, "stdio"},
			Cwd: npm, Tool: "echo", Arguments: map[string]any{"message": msg}})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("node", filepath.Join(npm, "client.mjs"))
		cmd.Dir = npm
		cmd.Env = append(slices.Clone(env), "SUPERVISOR_TEST_MCP_CLIENT="+string(config))
		cl := startClientProc(t, cmd, fmt.Sprintf("ts client %d: ", i))
		if cl.result.Event != "connected" || cl.result.Text != "Echo: "+msg {
			t.Errorf("ts client %d: got %+v, want its own echo %q", i, cl.result, msg)
		}
		clients = append(clients, cl)
	}
	br := brokerOf(t, in)
	if len(br.Clients) != 3 {
		t.Errorf("broker %s lists %d clients, want 3", br.ID, len(br.Clients))
	}
	servers := serverProcs(t, br.ID)
	if len(servers) != 1 {
		t.Errorf("server processes of broker %s: %v, want 1", br.ID, servers)
	}
	clients[0].cmd.Process.Kill() // the host dies: its pipes close
	<-clients[0].done
	waitCond(t, func() error {
		if p := brokerOf(t, in); len(p.Clients) != 2 {
			return fmt.Errorf("broker lists %d clients after a host's death, want 2", len(p.Clients))
		}
		return nil
	})
	if now := serverProcs(t, br.ID); len(now) != 1 || now[0].pid != servers[0].pid {
		t.Errorf("after a host's death: server processes %v, want the one %v", now, servers)
	}
	for i, cl := range clients[1:] {
		io.WriteString(cl.stdin, "close\n")
		if r := cl.next(t); r.Event != "closed" {
			t.Errorf("ts client %d: got %+v, want closed", i, r)
		}
	}
	waitGonePID(t, br.PID, br.Token)
	for _, s := range servers {
		waitGonePID(t, s.pid, s.tok)
	}
}

// TestShareKeyByEnvironment: clients whose environments differ get servers
// of their own, unless the variable is volatile (built in, such as
// CLAUDE_CODE_SESSION_ID, or added by the config's volatile_env).
func TestShareKeyByEnvironment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, variable, config string
		brokers                int
	}{
		{"differing variable", "MY_TOKEN", "", 2},
		{"built-in volatile", "CLAUDE_CODE_SESSION_ID", "", 1},
		{"volatile by config", "MY_TOKEN", "volatile_env = [\"MY_*\"]\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newInstance(t)
			if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			dir := t.TempDir()
			for i := 0; i < 2; i++ {
				cmd := exec.Command(bin, "run", "--share", "--name", "fixture", "--", bin, "_fixture", "mcp")
				cmd.Dir = dir
				cmd.Env = append(slices.Clone(in.env), fmt.Sprintf("%s=value-%d", tc.variable, i))
				cmd.Stderr = &prefixWriter{t: t, prefix: fmt.Sprintf("client %d: ", i)}
				client := mcp.NewClient(&mcp.Implementation{Name: "key", Version: "0.0.0"}, nil)
				cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
				if err != nil {
					t.Fatalf("client %d: connect: %v", i, err)
				}
				defer cs.Close()
			}
			n := 0
			for _, p := range in.mustProcesses(false) {
				if p.Broker {
					n++
				}
			}
			if n != tc.brokers {
				t.Errorf("%s differing: %d brokers, want %d", tc.variable, n, tc.brokers)
			}
		})
	}
}

// TestShareAcrossLingerEnd: clients that come just as a broker's linger
// ends (before, during and after its exit) are all served: one whose
// broker is going away is handed to a fresh one.
func TestShareAcrossLingerEnd(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte("linger = \"100ms\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	defer cancel()
	dir := t.TempDir()
	for i := 0; i < 24; i++ {
		cmd := exec.Command(bin, "run", "--share", "--name", "fixture", "--", bin, "_fixture", "mcp")
		cmd.Dir = dir
		cmd.Env = in.env
		cmd.Stderr = &prefixWriter{t: t, prefix: fmt.Sprintf("client %d: ", i)}
		client := mcp.NewClient(&mcp.Implementation{Name: "linger", Version: "0.0.0"}, nil)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
		if err != nil {
			t.Fatalf("client %d: connect: %v", i, err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil || res.IsError {
			t.Errorf("client %d: echo: %v %+v", i, err, res)
		}
		cs.Close()
		// From well inside the linger to past the broker's exit.
		time.Sleep(time.Duration(60+5*i) * time.Millisecond)
	}
}

// TestShareLogs: a shared server's stderr (and its broker's) is captured
// like any server's: `supervisor logs NAME` shows it.
func TestShareLogs(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.Command(bin, "run", "--share", "--name", "loud", "--", bin, "_fixture", "mcp", "--stderr")
	cmd.Dir = t.TempDir()
	cmd.Env = in.env
	client := mcp.NewClient(&mcp.Implementation{Name: "logs", Version: "0.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	waitCond(t, func() error {
		out, errOut, code := in.run("logs", "loud")
		if code != 0 || !strings.Contains(out, "mcp: tools/call") {
			return fmt.Errorf("logs loud: exit %d, %q %q; want the server's stderr lines", code, out, errOut)
		}
		return nil
	})
}

// TestShareBrokerGOMAXPROCS: the broker runs with GOMAXPROCS=1 (its memory,
// issue 14) without its upstream seeing it, and a client's own GOMAXPROCS
// reaches both unchanged.
func TestShareBrokerGOMAXPROCS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, client, broker, upstream string // "" for unset
	}{
		{"client sets none", "", "1", ""},
		{"client sets one", "3", "3", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newInstance(t)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			env := slices.DeleteFunc(slices.Clone(in.env), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
			if tc.client != "" {
				env = append(env, "GOMAXPROCS="+tc.client)
			}
			cmd := exec.Command(bin, "run", "--share", "--name", "fixture", "--", bin, "_fixture", "mcp")
			cmd.Dir, cmd.Env = t.TempDir(), env
			cmd.Stderr = &prefixWriter{t: t, prefix: "client: "}
			client := mcp.NewClient(&mcp.Implementation{Name: "gomaxprocs", Version: "0.0.0"}, nil)
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			var br api.Process
			for _, p := range in.mustProcesses(false) {
				if p.Broker {
					br = p
				}
			}
			if br.PID == 0 {
				t.Fatal("no broker record")
			}
			gomaxprocs := func(pid int) string {
				env, err := proc.Environ(pid)
				if err != nil {
					t.Fatalf("environment of %d: %v", pid, err)
				}
				v, _ := proc.EnvValue(env, "GOMAXPROCS")
				return v
			}
			if got := gomaxprocs(br.PID); got != tc.broker {
				t.Errorf("broker's GOMAXPROCS = %q, want %q", got, tc.broker)
			}
			infos, err := proc.Scan()
			if err != nil {
				t.Fatal(err)
			}
			upstreams := 0
			for _, info := range infos {
				argv, _ := proc.Cmdline(info.PID)
				if info.PPID != br.PID || len(argv) < 2 || argv[1] != "_fixture" {
					continue
				}
				upstreams++
				if got := gomaxprocs(info.PID); got != tc.upstream {
					t.Errorf("upstream's GOMAXPROCS = %q, want %q (the client's)", got, tc.upstream)
				}
			}
			if upstreams != 1 {
				t.Errorf("%d upstreams under broker %d, want 1", upstreams, br.PID)
			}
		})
	}
}

// TestShareLogCap: a shared server's stderr (and its broker's) goes into
// a capped, rotated log written by the broker itself: a 4 MiB burst under
// a 1 MB cap leaves the live file and each backup within the cap, and the
// burst's end in the log.
func TestShareLogCap(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_LOG_MAX_MB=1")
	script := fmt.Sprintf("yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 4194304 >&2; echo burst $((40+2)) done >&2; exec %s _fixture mcp", bin)
	s := in.startShim("--share", "--name", "loud", "--", "sh", "-c", script)
	defer s.stdin.Close()
	var logPath string
	waitCond(t, func() error {
		files, _ := filepath.Glob(filepath.Join(in.state, "logs", "run", "loud@*.log"))
		if len(files) != 1 {
			return fmt.Errorf("%d live logs of loud", len(files))
		}
		logPath = files[0]
		// Not the words of the command line, which the broker logs too.
		if !bytes.Contains(keptLog(t, logPath, 3), []byte("burst 42 done")) {
			return errors.New("the burst has not ended in the log")
		}
		return nil
	})
	files, _ := filepath.Glob(logPath + "*")
	if len(files) < 2 {
		st, _ := os.Stat(logPath)
		all, _ := filepath.Glob(filepath.Join(in.state, "logs", "run", "*"))
		live, _ := os.ReadFile(logPath)
		t.Fatalf("log files %v (the live one %d bytes: %q; all: %v): want the live one and backups", files, st.Size(), live, all)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() > 1<<20+logSlack {
			t.Fatalf("%s: %v bytes, want at most the 1 MB cap", f, st.Size())
		}
	}
	// No log writer process: the broker writes the log itself.
	br := brokerOf(t, in)
	infos, err := proc.Scan()
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		env, err := proc.Environ(info.PID)
		if err != nil {
			continue
		}
		argv, _ := proc.Cmdline(info.PID)
		if v, _ := proc.EnvValue(env, spawn.EnvProcID); v == br.ID && slices.Contains(argv, "_log-writer") {
			t.Errorf("a log writer runs for the broker: pid %d %q", info.PID, argv)
		}
	}
}

// TestBrokerErrorInItsLog: a broker that cannot start its server says so
// in its own log (the file `logs NAME` shows), not on a stderr it has
// already closed.
func TestBrokerErrorInItsLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "b.log")
	cmd := exec.Command(bin, "_broker", "--socket", filepath.Join(dir, "b.sock"), "--log", logPath, "--", "/nonexistent/mcp-server")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("broker of a missing server: %v (output %q), want exit 1", err, out)
	}
	got, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(got), "/nonexistent/mcp-server") || !strings.Contains(string(got), "check the server's command") {
		t.Fatalf("the broker's log %q (%v) does not say why it failed", got, err)
	}
}
