//go:build linux

package main

import (
	"bufio"
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
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// lazyHost is testdata/npm/lazyhost.mjs: the TypeScript SDK connected to
// many servers at once, as a host starts its configured servers.
type lazyHost struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan map[string]any
	tools [][]string
}

func startLazyHost(t *testing.T, env []string, npm, dir string, servers [][]string) *lazyHost {
	t.Helper()
	type srv struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
		Cwd     string   `json:"cwd"`
	}
	var cfg struct {
		Servers []srv `json:"servers"`
	}
	for _, argv := range servers {
		cfg.Servers = append(cfg.Servers, srv{argv[0], argv[1:], dir})
	}
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command("node", filepath.Join(npm, "lazyhost.mjs"))
	cmd.Env = append(slices.Clone(env), "SUPERVISOR_TEST_MCP_HOST="+string(raw))
	cmd.Dir = dir
	cmd.Stderr = &prefixWriter{t: t, prefix: "host: "}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &lazyHost{t: t, cmd: cmd, stdin: stdin, lines: make(chan map[string]any, 16)}
	tok, _ := proc.TokenOf(cmd.Process.Pid)
	t.Cleanup(func() {
		stdin.Close()
		if !proc.WaitExit(cmd.Process.Pid, tok, 10*time.Second) {
			killByToken(cmd.Process.Pid, tok)
		}
		cmd.Wait()
	})
	go func() {
		defer close(h.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				h.lines <- m
			}
		}
	}()
	m := h.next("listed")
	for _, ts := range m["tools"].([]any) {
		var names []string
		for _, n := range ts.([]any) {
			names = append(names, n.(string))
		}
		h.tools = append(h.tools, names)
	}
	return h
}

func (h *lazyHost) next(event string) map[string]any {
	h.t.Helper()
	select {
	case m, ok := <-h.lines:
		if !ok {
			h.t.Fatalf("the host exited before %q", event)
		}
		if m["event"] != event {
			h.t.Fatalf("the host said %v, want %q", m, event)
		}
		return m
	case <-time.After(2 * wait):
		h.t.Fatalf("the host said nothing for %v, want %q", 2*wait, event)
	}
	return nil
}

func (h *lazyHost) call(server int, tool string, args map[string]any) string {
	h.t.Helper()
	raw, _ := json.Marshal(map[string]any{"server": server, "tool": tool, "arguments": args})
	if _, err := fmt.Fprintf(h.stdin, "%s\n", raw); err != nil {
		h.t.Fatal(err)
	}
	m := h.next("called")
	if m["error"] != nil || m["isError"] == true {
		h.t.Fatalf("call %s on server %d: %v", tool, server, m)
	}
	return m["text"].(string)
}

func (h *lazyHost) close() {
	h.t.Helper()
	h.stdin.Close()
	h.next("closed")
}

// upstreams lists the server processes (not the brokers) under the
// instance's brokers.
func upstreams(t *testing.T, in *instance) []tracked {
	t.Helper()
	ids := map[string]bool{}
	for _, p := range in.mustProcesses(false) {
		if p.Broker {
			ids[p.ID] = true
		}
	}
	// Not the broker itself: the supervisor binary.
	return markedProcs(t, ids, func(argv []string) bool { return len(argv) > 0 && argv[0] != bin })
}

func waitNoRecords(t *testing.T, in *instance) {
	t.Helper()
	waitCond(t, func() error {
		if ps := in.mustProcesses(false); len(ps) > 0 {
			return fmt.Errorf("%d live records", len(ps))
		}
		return nil
	})
}

func eventKind(kind string) func([]api.Event) bool {
	return func(evs []api.Event) bool { return hasEvent(evs, kind, "") }
}

// TestLazyTenServers: a host (the TypeScript SDK) connects to 10 lazy
// servers (the real server-everything and nine server-filesystem roots)
// and lists their tools. Cold, they start and fill the cache; warm, the
// same host-like session gets the same tools with no server and no
// broker (what Claude Code does at start: initialize, tools/list, nothing
// more), and its first tools/call starts exactly one server and succeeds.
func TestLazyTenServers(t *testing.T) {
	t.Parallel()
	npm := npmDeps(t)
	in := newInstance(t)
	if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte("linger = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := mcpRoot(t)
	entry := func(pkg string) string {
		return filepath.Join(npm, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	}
	var servers [][]string
	for i := range 10 {
		argv := []string{"node", entry("server-everything"), "stdio"}
		if i > 0 {
			root := filepath.Join(dir, fmt.Sprintf("root-%d", i))
			os.Mkdir(root, 0o700)
			argv = []string{"node", entry("server-filesystem"), root}
		}
		servers = append(servers, append([]string{bin, "run", "--lazy", "--name", fmt.Sprintf("s%d", i), "--"}, argv...))
	}

	// One environment for both hosts: it is in the server key.
	env := mcpEnv(t, in)
	cold := startLazyHost(t, env, npm, dir, servers)
	if n := len(upstreams(t, in)); n != 10 {
		t.Fatalf("cold cache: %d server processes, want 10 (started at once to fill it)", n)
	}
	cold.close()
	waitNoRecords(t, in)

	warm := startLazyHost(t, env, npm, dir, servers)
	for i := range servers {
		if !slices.Equal(warm.tools[i], cold.tools[i]) || len(warm.tools[i]) == 0 {
			t.Errorf("server %d: tools from the cache %v, from the server %v", i, warm.tools[i], cold.tools[i])
		}
	}
	if ups := upstreams(t, in); len(ups) != 0 {
		t.Fatalf("warm cache: %d server processes after initialize and tools/list, want 0: %v", len(ups), ups)
	}
	// Each run answers its host from the cache itself until a real
	// request: not even a broker runs.
	if ps := in.mustProcesses(false); len(ps) != 0 {
		t.Fatalf("warm cache: %d processes after initialize and tools/list, want none: %+v", len(ps), ps)
	}
	if got := warm.call(0, "echo", map[string]any{"message": "lazy"}); got != "Echo: lazy" {
		t.Fatalf("first call: %q", got)
	}
	if ups := upstreams(t, in); len(ups) != 1 || !strings.Contains(ups[0].what, "server-everything") {
		t.Fatalf("after the first call: server processes %v, want the one server-everything", ups)
	}
	in.waitEvents(eventKind("lazy.start"))
	warm.close()
	waitNoRecords(t, in)
}

// gomcpBuild builds fixture/gomcp into path, with an extra tool if named.
func gomcpBuild(t *testing.T, path, extra string) {
	t.Helper()
	args := []string{"build", "-o", path}
	if extra != "" {
		args = append(args, "-ldflags", "-X main.extraTool="+extra)
	}
	if out, err := exec.Command("go", append(args, "../../internal/fixture/gomcp")...).CombinedOutput(); err != nil {
		t.Fatalf("build fixture/gomcp: %v\n%s", err, out)
	}
}

func gomcpProcs(t *testing.T, in *instance) []tracked {
	t.Helper()
	var out []tracked
	for _, u := range upstreams(t, in) {
		if strings.Contains(u.what, "gomcp") {
			out = append(out, u)
		}
	}
	return out
}

// TestLazyIdleAndUpgrade: a lazy, idle-stopped server of the Go SDK (its
// client speaks the stateless revision: server/discover is what is
// cached): no process until a call; after --idle with nothing in flight
// it is gone, and the next call starts it again and succeeds; a call
// longer than --idle is never cut. An upgraded binary (another
// fingerprint) is started at once and its new tool list served.
func TestLazyIdleAndUpgrade(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte("linger = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := filepath.Join(t.TempDir(), "gomcp")
	gomcpBuild(t, server, "")
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	args := []string{"run", "--lazy", "--idle", "700ms", "--name", "gomcp", "--", server}
	tools := func(cs *mcp.ClientSession) []string {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		return names
	}

	cold := goClient(ctx, t, in, "cold", nil, args...)
	coldTools := tools(cold)
	cold.Close()
	waitNoRecords(t, in)

	c := goClient(ctx, t, in, "warm", nil, args...)
	if got := tools(c); !slices.Equal(got, coldTools) {
		t.Fatalf("tools from the cache %v, from the server %v", got, coldTools)
	}
	if ps := gomcpProcs(t, in); len(ps) != 0 {
		t.Fatalf("warm cache: server processes %v before any call, want none", ps)
	}
	pid := callText(ctx, t, c, "pid", nil)
	// The call started it: the one that answered is the upstream the
	// broker started lazily. It may already be idle-stopped by the time
	// the processes are listed (700 ms on a loaded machine, seen in CI),
	// but never another one runs.
	if ps := gomcpProcs(t, in); len(ps) > 1 || len(ps) == 1 && fmt.Sprint(ps[0].pid) != pid {
		t.Fatalf("after the first call: server processes %v, want pid %s or none (idle-stopped)", ps, pid)
	}
	in.waitEvents(func(evs []api.Event) bool {
		for _, e := range evs {
			if e.Kind == "lazy.start" && strings.Contains(e.Detail, "(pid "+pid+")") {
				return true
			}
		}
		return false
	})
	// Idle: gone after 700ms with nothing in flight, the broker says idle.
	waitCond(t, func() error {
		if ps := gomcpProcs(t, in); len(ps) > 0 {
			return fmt.Errorf("server %v still runs", ps)
		}
		return nil
	})
	in.waitEvents(eventKind("idle.stop"))
	waitCond(t, func() error {
		if p := brokerOf(t, in); p.Health != "idle" {
			return fmt.Errorf("broker health %q, want idle", p.Health)
		}
		return nil
	})
	// A new daemon (the old one SIGKILLed) takes the broker over and
	// goes on reporting its idle stops.
	in.waitNewDaemon(t, in.killDaemon(t))
	in.mustRun("ps") // the new daemon has re-adopted the broker
	if got := callText(ctx, t, c, "echo", map[string]any{"text": "back"}); got != "back" {
		t.Fatalf("the call after the idle stop: %q", got)
	}
	in.waitEvents(func(evs []api.Event) bool {
		n := 0
		for _, e := range evs {
			if e.Kind == "idle.stop" {
				n++
			}
		}
		return n >= 2
	})
	// Three idle periods long: never interrupted.
	if got := callText(ctx, t, c, "slow", map[string]any{"ms": 2100}); got != "slept 2100 ms" {
		t.Fatalf("slow call: %q", got)
	}
	c.Close()
	waitNoRecords(t, in)

	// The upgrade: same path, new file, one tool more.
	gomcpBuild(t, server, "newtool")
	// Started at once, on the handshake the cache (not its) could not
	// answer: its process runs, or, with --idle 700ms on a loaded machine,
	// has already been idle-stopped (nothing else of gomcp runs now: the
	// records are gone).
	upstreamRan := func(evs []api.Event) int {
		n := 0
		for _, e := range evs {
			if e.Kind == "lazy.start" || e.Kind == "idle.stop" {
				n++
			}
		}
		return n
	}
	before := upstreamRan(in.eventsJSON())
	up := goClient(ctx, t, in, "upgraded", nil, args...)
	waitCond(t, func() error {
		if ps := gomcpProcs(t, in); len(ps) == 1 || upstreamRan(in.eventsJSON()) > before {
			return nil
		}
		return errors.New("upgraded binary: no server process, and none idle-stopped: want it started at once (the cache is not its)")
	})
	if got := tools(up); !slices.Contains(got, "newtool") {
		t.Fatalf("upgraded server's tools %v lack newtool", got)
	}
}

// TestLazyClaudeCode: the real Claude Code CLI. `claude mcp list` connects
// to every configured server as a session start does (a server/discover
// probe, initialize, tools/list) and calls nothing. With three lazy
// servers wrapped by supervisor, the first listing starts them (the cache
// is cold) and fills the cache; the second is answered from the cache by
// the runs themselves: every server shows connected, and no server and no
// broker starts.
func TestLazyClaudeCode(t *testing.T) {
	t.Parallel()
	npm := npmDeps(t)
	claude := filepath.Join(npm, "node_modules", ".bin", "claude")
	if _, err := os.Stat(claude); err != nil {
		msg := "testdata/npm/node_modules lacks @anthropic-ai/claude-code; run `npm ci --prefix testdata/npm`"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	in := newInstance(t)
	// The brokers outlive the listing long enough to be looked at.
	if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte("linger = \"20s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(mcpEnv(t, in), "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	dir := mcpRoot(t)
	claudeRun := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
		defer cancel()
		cmd := exec.CommandContext(ctx, claude, args...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("claude %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	const n = 3
	for i := range n {
		root := filepath.Join(dir, fmt.Sprintf("root-%d", i))
		os.Mkdir(root, 0o700)
		name := fmt.Sprintf("fs%d", i)
		claudeRun("mcp", "add", "--scope", "user", name, "--", bin, "run", "--lazy", "--name", name, "--",
			"node", filepath.Join(npm, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js"), root)
	}
	connected := func(out string) {
		t.Helper()
		if got := strings.Count(out, "Connected"); got != n {
			t.Fatalf("claude mcp list shows %d of %d servers connected:\n%s", got, n, out)
		}
	}

	connected(claudeRun("mcp", "list")) // cold: the servers start, the cache fills
	// Once every client has detached, the cache is kept; then the daemon
	// stops the lingering brokers and their servers.
	in.waitEvents(func(evs []api.Event) bool {
		k := 0
		for _, e := range evs {
			if e.Kind == "client.detach" {
				k++
			}
		}
		return k >= n
	})
	in.mustRun("daemon", "stop")

	connected(claudeRun("mcp", "list"))
	if ups := upstreams(t, in); len(ups) != 0 {
		t.Fatalf("warm cache: %d server processes after claude mcp list, want 0: %v", len(ups), ups)
	}
	// Each run answered its host from the cache itself: no broker either.
	if ps := in.mustProcesses(false); len(ps) != 0 {
		t.Fatalf("warm cache: %d processes run for the listing, want none: %+v", len(ps), ps)
	}
	if evs := in.eventsJSON(); hasEvent(evs, "lazy.start", "") {
		t.Fatal("a lazy.start event: a server was started for the warm listing")
	}
}
