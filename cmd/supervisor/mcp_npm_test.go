//go:build linux

package main

// The real-world end-to-end tests: real MCP servers from npm
// (@modelcontextprotocol/server-everything and server-filesystem, pinned in
// testdata/npm) started through `supervisor run` by the official MCP client
// SDKs, Go's (mcp.CommandTransport) and TypeScript's (testdata/npm/client.mjs,
// StdioClientTransport), each server both directly (`node .../dist/index.js`)
// and through `npx`, the way host configs name them. A client that closes its
// session leaves nothing behind; a client SIGKILLed mid-session leaves
// nothing behind either, and its session is recorded as ended.
//
// They need testdata/npm/node_modules (`npm ci --prefix testdata/npm`, which
// `bash .ci/run` does) and skip without it, except under CI, where a skip
// would hide a broken setup.

import (
	"bufio"
	"context"
	"encoding/json"
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
	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// npmDeps returns the absolute testdata/npm with its node_modules installed,
// and node and npx on PATH; it skips the test otherwise.
func npmDeps(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata", "npm"))
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, exe := range []string{"node", "npx"} {
		if _, err := exec.LookPath(exe); err != nil {
			missing = append(missing, exe+" is not on PATH")
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		missing = append(missing, "testdata/npm/node_modules is not installed")
	} else {
		for _, pkg := range []string{"sdk", "server-everything", "server-filesystem"} {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "package.json")); err != nil {
				missing = append(missing, "testdata/npm/node_modules lacks @modelcontextprotocol/"+pkg)
			}
		}
	}
	if len(missing) > 0 {
		npmMissing(t, strings.Join(missing, ", ")+"; run `bash .ci/run` (installs Node and the pinned packages) or `npm ci --prefix testdata/npm`")
	}
	return dir
}

// npmMissing ends a real-world test that lacks what it needs: a skip
// outside CI, a failure in CI, where .ci/run installed it and a skip would
// hide a broken setup.
func npmMissing(t *testing.T, why string) {
	t.Helper()
	msg := "real-world MCP e2e: " + why
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// mcpCase is one real server started one way.
type mcpCase struct {
	name string // e.g. "everything/npx"
	// argv is the server command as a host config would name it, with root
	// the filesystem server's allowed directory.
	argv func(npm, root string) []string
	tool string
	args map[string]any
	// want must appear in the tool's text answer.
	want func(root string) string
	// eof says the server exits on stdin EOF once a session has run.
	// server-everything does not (its session keeps timers alive), so
	// closing it takes the clients' SIGTERM fallback.
	eof bool
}

func mcpCases() []mcpCase {
	const (
		everything = "@modelcontextprotocol/server-everything"
		filesystem = "@modelcontextprotocol/server-filesystem"
	)
	entry := func(npm, pkg string) string { return filepath.Join(npm, "node_modules", pkg, "dist", "index.js") }
	echo := map[string]any{"message": "hello through supervisor"}
	echoed := func(string) string { return "Echo: hello through supervisor" }
	listed := func(root string) string { return root }
	return []mcpCase{
		{"everything/node", func(npm, _ string) []string { return []string{"node", entry(npm, everything), "stdio"} },
			"echo", echo, echoed, false},
		// --no-install: the package must come from testdata/npm's
		// node_modules (the command's cwd); npm_config_offline (mcpEnv)
		// makes sure nothing is fetched.
		{"everything/npx", func(_, _ string) []string { return []string{"npx", "--no-install", everything, "stdio"} },
			"echo", echo, echoed, false},
		{"filesystem/node", func(npm, root string) []string { return []string{"node", entry(npm, filesystem), root} },
			"list_allowed_directories", map[string]any{}, listed, true},
		{"filesystem/npx", func(_, root string) []string { return []string{"npx", "--no-install", filesystem, root} },
			"list_allowed_directories", map[string]any{}, listed, true},
	}
}

// runArgs is the `supervisor run` command line a wrapped host config holds.
func (c mcpCase) runArgs(npm, root string) []string {
	return append([]string{"run", "--name", strings.ReplaceAll(c.name, "/", "-"), "--"}, c.argv(npm, root)...)
}

// mcpRoot is a fresh allowed directory for the filesystem server, with
// symlinks resolved as the server reports it.
func mcpRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// mcpEnv is the instance's environment with a private HOME and npm cache
// (never the real home) and npm kept offline.
func mcpEnv(t *testing.T, in *instance) []string {
	home := t.TempDir()
	return append(slices.Clone(in.env),
		"HOME="+home,
		"npm_config_cache="+filepath.Join(home, "npm-cache"),
		"npm_config_offline=true",
		"npm_config_update_notifier=false",
		"npm_config_fund=false",
		"npm_config_audit=false",
	)
}

// mcpResult is what a client learnt from its session; client.mjs prints it
// as a JSON line, and so does the Go host helper.
type mcpResult struct {
	Event  string `json:"event"` // connected, closed or error
	Server struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"server"`
	Tools   []string `json:"tools"`
	Text    string   `json:"text"`
	IsError bool     `json:"isError"`
	ShimPID int      `json:"shim_pid"`
	Error   string   `json:"error,omitempty"`
}

func (r mcpResult) check(t *testing.T, c mcpCase, root string) {
	t.Helper()
	if r.Event != "connected" {
		t.Fatalf("client: got event %q (%s), want connected", r.Event, r.Error)
	}
	if r.Server.Name == "" {
		t.Errorf("initialize: the server named no serverInfo")
	}
	if !slices.Contains(r.Tools, c.tool) {
		t.Errorf("tools/list: got %v, want %q among them", r.Tools, c.tool)
	}
	if want := c.want(root); r.IsError || !strings.Contains(r.Text, want) {
		t.Errorf("tools/call %s: got %q (isError %v), want %q in it", c.tool, r.Text, r.IsError, want)
	}
}

// goSDKSession lists the tools and calls c's tool on a connected session.
func goSDKSession(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) mcpResult {
	var r mcpResult
	if info := cs.InitializeResult().ServerInfo; info != nil {
		r.Server.Name, r.Server.Version = info.Name, info.Version
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return mcpResult{Event: "error", Error: fmt.Sprintf("tools/list: %v", err)}
	}
	for _, tl := range tools.Tools {
		r.Tools = append(r.Tools, tl.Name)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return mcpResult{Event: "error", Error: fmt.Sprintf("tools/call %s: %v", tool, err)}
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	r.Event, r.Text, r.IsError = "connected", strings.Join(text, "\n"), res.IsError
	return r
}

// mcpHostEnv, when set to a JSON mcpHostConfig, turns the test binary into a
// Go SDK MCP host (mcpHost) before TestMain builds anything: the
// helper-process re-exec, for the tests that SIGKILL the host mid-session.
const mcpHostEnv = "SUPERVISOR_TEST_MCP_HOST"

type mcpHostConfig struct {
	Command   string         `json:"command"`
	Args      []string       `json:"args"`
	Cwd       string         `json:"cwd"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
}

func init() {
	if cfg := os.Getenv(mcpHostEnv); cfg != "" {
		os.Exit(mcpHost(cfg))
	}
}

// mcpHost is client.mjs in Go: it connects to the server, prints its
// mcpResult line and stays in the session until a line or EOF on its stdin
// (a test that dies closes it, so the helper never outlives the test), then
// closes the session and prints {"event":"closed"}.
func mcpHost(config string) int {
	var cfg mcpHostConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "mcp host:", err)
		return 2
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Cwd
	cmd.Stderr = os.Stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, mcpHostEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "supervisor-e2e-go-host", Version: "0.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: wait}, nil)
	var r mcpResult
	if err != nil {
		r = mcpResult{Event: "error", Error: fmt.Sprintf("connect: %v", err)}
	} else {
		r = goSDKSession(ctx, cs, cfg.Tool, cfg.Arguments)
		r.ShimPID = cmd.Process.Pid
	}
	json.NewEncoder(os.Stdout).Encode(r)
	if r.Event != "connected" {
		return 1
	}
	bufio.NewReader(os.Stdin).ReadString('\n')
	if err := cs.Close(); err != nil {
		r = mcpResult{Event: "error", Error: fmt.Sprintf("close: %v", err)}
	} else {
		r = mcpResult{Event: "closed"}
	}
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// mcpTree is a session's process tree snapshotted mid-session: the one
// record, and every process the instance knows of or marked, by PID and
// creation token.
type mcpTree struct {
	rec api.Process
	// marker is the instance marker the daemon gave the server, read from
	// its environment while it runs.
	marker string
	procs  []tracked
}

// tracked is one process of a tree.
type tracked struct {
	what string
	pid  int
	tok  proc.Token
}

// snapshot takes the tree: the record's server and shim, and every live
// process carrying its markers (npx's sh and node children among them). It
// fails unless there is exactly one record, running.
func (in *instance) snapshot(t *testing.T) *mcpTree {
	t.Helper()
	ps := in.mustProcesses(true)
	if len(ps) != 1 || ps[0].State != api.StateRunning {
		t.Fatalf("ps --all --json: got %+v, want one running process", ps)
	}
	tr := &mcpTree{rec: ps[0]}
	env, err := proc.Environ(tr.rec.PID)
	if err != nil {
		t.Fatalf("environment of the server %d: %v", tr.rec.PID, err)
	}
	tr.marker, _ = proc.EnvValue(env, spawn.EnvInstance)
	tr.procs = append(tr.procs, tracked{"server " + tr.rec.ID, tr.rec.PID, tr.rec.Token})
	if tr.rec.ShimPID > 0 {
		tr.procs = append(tr.procs, tracked{"shim of " + tr.rec.ID, tr.rec.ShimPID, tr.rec.ShimToken})
	}
	for _, pid := range tr.marked(ps) {
		if tok, err := proc.TokenOf(pid); err == nil {
			argv, _ := proc.Cmdline(pid)
			tr.procs = append(tr.procs, tracked{fmt.Sprintf("marked %q", argv), pid, tok})
		}
	}
	return tr
}

// marked lists live processes carrying a marker: the SUPERVISOR_PROC_ID of
// one of recs, or the instance's SUPERVISOR_INSTANCE.
func (tr *mcpTree) marked(recs []api.Process) []int {
	ids := map[string]bool{}
	for _, p := range recs {
		ids[p.ID] = true
	}
	infos, _ := proc.Scan()
	var out []int
	for _, info := range infos {
		if info.State == 'Z' {
			continue
		}
		env, _ := proc.Environ(info.PID)
		if w, _ := proc.EnvValue(env, spawn.EnvLogWriter); w == "1" {
			continue // the daemon's log hub, not the server's
		}
		id, _ := proc.EnvValue(env, spawn.EnvProcID)
		inst, _ := proc.EnvValue(env, spawn.EnvInstance)
		if ids[id] || (tr.marker != "" && inst == tr.marker) {
			out = append(out, info.PID)
		}
	}
	return out
}

// assertNothingLeft waits for every process of the tree to exit, then
// checks that no live process carries a marker of the instance or of
// anything ps --all lists, and that every record is exited. What it finds
// alive is reported and killed by PID. It returns ps --all.
func (in *instance) assertNothingLeft(t *testing.T, tr *mcpTree) []api.Process {
	t.Helper()
	for _, p := range tr.procs {
		if !proc.WaitExit(p.pid, p.tok, wait) {
			t.Errorf("%s (pid %d) still alive after %v", p.what, p.pid, wait)
			killByPID(p.pid)
		}
	}
	// The records follow the kernel: a process gone a moment ago may
	// still be stopping in its record while the daemon commits its end.
	ps := in.mustProcesses(true)
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); ps = in.mustProcesses(true) {
		settled := true
		for _, p := range ps {
			settled = settled && p.State.Final()
		}
		if settled {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range tr.marked(ps) {
		argv, _ := proc.Cmdline(pid)
		t.Errorf("pid %d %q still carries the instance's markers", pid, argv)
		if tok, err := proc.TokenOf(pid); err == nil {
			if h, err := proc.OpenHandle(pid, tok); err == nil {
				h.Signal(unix.SIGKILL)
				h.Close()
			}
		}
	}
	for _, p := range ps {
		if p.State != api.StateExited {
			t.Errorf("process %s (pid %d) is %s, want exited", p.ID, p.PID, p.State)
		}
	}
	return ps
}

// ended says how a record's process ended, for the log.
func ended(p api.Process) string {
	code := "none"
	if p.ExitCode != nil {
		code = fmt.Sprint(*p.ExitCode)
	}
	return fmt.Sprintf("process %s (pid %d): %s, exit code %s, signal %q, stop %+v", p.ID, p.PID, p.State, code, p.Signal, p.Stop)
}

// TestMCPGoSDKClient: the Go SDK's client starts each real server through
// `supervisor run`, initializes, lists the tools, calls one and closes the
// session the SDK's way: stdin EOF, then SIGTERM to the command (the shim)
// if it has not exited. A server that exits on EOF gets until the test's
// deadline and must exit 0; server-everything, which stays, gets 1 s and
// is then stopped through the shim's SIGTERM. Either way nothing is left.
func TestMCPGoSDKClient(t *testing.T) {
	t.Parallel()
	npm := npmDeps(t)
	for _, c := range mcpCases() {
		t.Run(c.name, func(t *testing.T) {
			in := newInstance(t)
			root := mcpRoot(t)
			cmd := exec.Command(bin, c.runArgs(npm, root)...)
			cmd.Dir = npm
			cmd.Env = mcpEnv(t, in)
			cmd.Stderr = &prefixWriter{t: t, prefix: "server: "}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			transport := &mcp.CommandTransport{Command: cmd, TerminateDuration: wait}
			if !c.eof {
				transport.TerminateDuration = time.Second
			}
			client := mcp.NewClient(&mcp.Implementation{Name: "supervisor-e2e-go", Version: "0.0.0"}, nil)
			cs, err := client.Connect(ctx, transport, nil)
			if err != nil {
				t.Fatalf("connect through supervisor run: %v", err)
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					cs.Close()
				}
			})
			goSDKSession(ctx, cs, c.tool, c.args).check(t, c, root)
			tree := in.snapshot(t)

			closed = true
			err = cs.Close()
			code := -1 // Close gave up on the shim: no status
			if cmd.ProcessState != nil {
				code = cmd.ProcessState.ExitCode()
			}
			for _, p := range in.assertNothingLeft(t, tree) {
				t.Logf("%s; shim exit %d (%v)", ended(p), code, err)
				eof := err == nil && p.ExitCode != nil && *p.ExitCode == 0 && p.Signal == ""
				// 143: the shim exits with its server's status, 128+SIGTERM;
				// a server exec'd in its shim's place gets the SIGTERM
				// itself, and the host sees the signal (no exit code).
				term := p.Signal == "SIGTERM" && (code == 143 || p.InPlace && code == -1)
				if c.eof && !eof {
					t.Errorf("process %s did not exit 0 on stdin EOF", p.ID)
				}
				if !c.eof && !eof && !term {
					t.Errorf("process %s was neither closed by EOF nor stopped by the shim's SIGTERM", p.ID)
				}
			}
		})
	}
}

// mcpClient is a client process (the Go host helper or client.mjs) acting
// as the MCP host, with its result line.
type mcpClient struct {
	cmd    *exec.Cmd
	result mcpResult
	done   chan struct{}
	lines  *bufio.Reader
	stdin  io.WriteCloser
}

// startClient runs a client process on c's server and reads its first line.
func (in *instance) startClient(t *testing.T, lang string, c mcpCase, npm, root string) *mcpClient {
	t.Helper()
	config, err := json.Marshal(mcpHostConfig{Command: bin, Args: c.runArgs(npm, root), Cwd: npm, Tool: c.tool, Arguments: c.args})
	if err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	env := mcpEnv(t, in)
	switch lang {
	case "go":
		cmd = exec.Command(os.Args[0], "-test.run=^$")
		env = append(env, mcpHostEnv+"="+string(config))
	case "ts":
		// The config goes in the environment, not argv: a node process whose
		// argv mentions npx counts as a launcher, not as the host.
		cmd = exec.Command("node", filepath.Join(npm, "client.mjs"))
		env = append(env, "SUPERVISOR_TEST_MCP_CLIENT="+string(config))
	}
	cmd.Dir = npm
	cmd.Env = env
	return startClientProc(t, cmd, lang+" client: ")
}

// startClientProc starts a client process (client.mjs or the Go host
// helper), reads its first result line, and kills it at the test's end.
func startClientProc(t *testing.T, cmd *exec.Cmd, prefix string) *mcpClient {
	t.Helper()
	cmd.Stderr = &prefixWriter{t: t, prefix: prefix}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cl := &mcpClient{cmd: cmd, done: make(chan struct{}), lines: bufio.NewReader(stdout), stdin: stdin}
	go func() { cmd.Wait(); close(cl.done) }()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		<-cl.done
	})
	cl.result = cl.next(t)
	return cl
}

// next reads the client's next result line.
func (cl *mcpClient) next(t *testing.T) mcpResult {
	t.Helper()
	line, err := readLine(cl.lines, wait)
	if err != nil {
		t.Fatalf("client printed no result line: %v", err)
	}
	var r mcpResult
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("client printed %q: %v", line, err)
	}
	return r
}

// TestMCPTSSDKClient: the TypeScript SDK's client (client.mjs) does what
// TestMCPGoSDKClient's does. Its close gives the server 2 s after stdin EOF
// before SIGTERM, a timing this test does not assert: either way the server
// exited and nothing is left.
func TestMCPTSSDKClient(t *testing.T) {
	t.Parallel()
	npm := npmDeps(t)
	for _, c := range mcpCases() {
		t.Run(c.name, func(t *testing.T) {
			in := newInstance(t)
			root := mcpRoot(t)
			cl := in.startClient(t, "ts", c, npm, root)
			cl.result.check(t, c, root)
			tree := in.snapshot(t)
			io.WriteString(cl.stdin, "close\n")
			if r := cl.next(t); r.Event != "closed" {
				t.Fatalf("client: got %+v, want closed", r)
			}
			select {
			case <-cl.done:
			case <-time.After(wait):
				t.Fatalf("client.mjs did not exit after closing")
			}
			if code := cl.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("client.mjs exited %d", code)
			}
			for _, p := range in.assertNothingLeft(t, tree) {
				t.Logf("%s", ended(p))
			}
		})
	}
}

// TestMCPClientKilledMidSession: each client, SIGKILLed with a session open
// (initialized, a tool called), leaves nothing behind: its session ends,
// the server and everything it started are gone, and each record says how
// its process ended.
func TestMCPClientKilledMidSession(t *testing.T) {
	t.Parallel()
	npm := npmDeps(t)
	for _, lang := range []string{"go", "ts"} {
		for _, c := range mcpCases() {
			t.Run(lang+"/"+c.name, func(t *testing.T) {
				in := newInstance(t)
				root := mcpRoot(t)
				cl := in.startClient(t, lang, c, npm, root)
				cl.result.check(t, c, root)
				tree := in.snapshot(t)
				rec := tree.rec
				follow := in.startFollower("--session", rec.Session)

				cl.cmd.Process.Kill()
				<-cl.done
				ps := in.assertNothingLeft(t, tree)
				for ev := follow.next(t); ev.Kind != "session.end"; ev = follow.next(t) {
				}

				var sessions []api.SessionInfo
				out := in.mustRun("sessions", "--all", "--json")
				if err := json.Unmarshal([]byte(out), &sessions); err != nil {
					t.Fatalf("sessions --all --json: %v: %s", err, out)
				}
				found := false
				for _, s := range sessions {
					if s.ID != rec.Session {
						continue
					}
					found = true
					if s.State != api.SessionEnded || s.EndedAt == nil || s.EndReason == "" {
						t.Errorf("session %s: state %q, ended at %v, reason %q; want ended with a reason", s.ID, s.State, s.EndedAt, s.EndReason)
					}
					if s.HostPID != cl.cmd.Process.Pid {
						t.Errorf("session %s: host pid %d, want the client's %d", s.ID, s.HostPID, cl.cmd.Process.Pid)
					}
				}
				if !found {
					t.Errorf("sessions --all --json: no session %s in %s", rec.Session, out)
				}
				stopResults := []shutdown.Result{shutdown.ExitedOnEOF, shutdown.ExitedOnSIGTERM, shutdown.Killed, shutdown.AlreadyGone}
				// A server that exits on EOF as soon as its host is gone
				// (server-filesystem) is recorded with its status and needs no
				// stop; one still there when the session ends (server-everything,
				// which exits on EPIPE or not at all) goes through the cascade,
				// and its record holds the outcome, nothing left.
				for _, p := range ps {
					t.Logf("%s", ended(p))
					if p.Stop == nil {
						if p.ExitCode == nil && p.Signal == "" {
							t.Errorf("process %s: neither an exit status nor a stop outcome recorded", p.ID)
						}
						continue
					}
					// Procs may be empty: a tree that exited during the EOF grace
					// is "already gone" as a whole.
					if !slices.Contains(stopResults, shutdown.Result(p.Stop.Result)) || len(p.Stop.Left) > 0 {
						t.Errorf("process %s: stop %+v; want a stop result and none left", p.ID, p.Stop)
					}
					for _, sp := range p.Stop.Procs {
						if sp.Result == string(shutdown.Unkillable) || sp.Role == "" {
							t.Errorf("process %s: stopped %+v", p.ID, sp)
						}
					}
				}
			})
		}
	}
}
