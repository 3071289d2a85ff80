//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/api"
)

// homeEnv is in's environment with HOME and the XDG directories in a temp
// dir: host tests never touch the real home. The test binary's directory
// comes first on PATH: it lives in a temp dir, so install writes the bare
// name, and refuses unless PATH finds this very binary under it.
func (in *instance) homeEnv(t *testing.T) (string, []string) {
	t.Helper()
	home := t.TempDir()
	env := append(append([]string{}, in.env...), "HOME="+home, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_DATA_HOME="+filepath.Join(home, ".local/share"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local/state"),
		"CLAUDE_CONFIG_DIR=", "CODEX_HOME=", "OPENCODE_CONFIG=", "CLINE_DIR=", "CLINE_DATA_DIR=", "CLINE_MCP_SETTINGS_PATH=")
	return home, env
}

func runEnv(t *testing.T, env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("supervisor %v: %v", args, err)
	}
	return o.String(), e.String(), 0
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const cursorConfig = `{
  // my servers
  "mcpServers": {
    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
    "docs": {"url": "https://docs.example.com/mcp"},
  },
}
`

func TestInstallDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	home, env := in.homeEnv(t)
	path := filepath.Join(home, ".cursor", "mcp.json")
	writeFile(t, path, cursorConfig)
	out, errOut, code := runEnv(t, env, "", "install", "cursor", "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"--- " + path + "\n+++ " + path + "\n@@ -1,7 +1,7 @@\n",
		`-    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},`,
		`+    "fs": {"command": "supervisor", "args": ["run", "--name", "fs", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},`,
		"would be wrapped fs; left alone (remote) docs"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if got := readFile(t, path); got != cursorConfig {
		t.Fatalf("--dry-run changed the file:\n%s", got)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("--dry-run left files beside the config: %v", entries)
	}

	// The real thing, then uninstall: byte for byte.
	out, errOut, code = runEnv(t, env, "", "install", "cursor")
	if code != 0 || !strings.Contains(out, "cursor "+path+": wrapped fs") {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ = runEnv(t, env, "", "hosts", "--json")
	var hs []struct {
		Host            string
		File            string
		Wrapped, Remote int
		Unwrapped       int
	}
	if err := json.Unmarshal([]byte(out), &hs); err != nil || len(hs) != 1 || hs[0].Host != "cursor" || hs[0].Wrapped != 1 || hs[0].Remote != 1 || hs[0].Unwrapped != 0 {
		t.Fatalf("hosts --json: %v\n%s", err, out)
	}
	if _, errOut, code = runEnv(t, env, "", "uninstall", "cursor"); code != 0 {
		t.Fatalf("uninstall: exit %d: %s", code, errOut)
	}
	if got := readFile(t, path); got != cursorConfig {
		t.Fatalf("uninstall did not restore the file:\n%s", got)
	}
}

func TestInstallErrors(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	home, env := in.homeEnv(t)
	malformed := "{\n  \"mcpServers\": {\n    \"fs\": {\"command\": \"npx\",, }\n  }\n}\n"
	path := filepath.Join(home, ".cursor", "mcp.json")
	writeFile(t, path, malformed)
	for _, tc := range []struct {
		args       []string
		wantStderr string
	}{
		{[]string{"install"}, "supervisor: no host given\nhint: name one or more of claude-code, claude-desktop, cursor,"},
		{[]string{"install", "claude"}, `supervisor: unknown host "claude" (valid: claude-code, claude-desktop, cursor, vscode, windsurf, codex, gemini, qwen, zed, cline, roo-code, kilo, amp, lmstudio, continue, goose, opencode)`},
		{[]string{"uninstall", "--all", "cursor"}, "supervisor: name hosts or give --all, not both"},
		{[]string{"install", "cursor"}, "supervisor: " + path + ":3:29: invalid character ','"},
		{[]string{"install", "--all", "--project", filepath.Join(home, "nope")}, "supervisor: --project " + filepath.Join(home, "nope") + ": "},
	} {
		_, errOut, code := runEnv(t, env, "", tc.args...)
		if code != 1 || !strings.HasPrefix(errOut, tc.wantStderr) {
			t.Errorf("supervisor %v: exit %d, stderr %q; want 1 and %q...", tc.args, code, errOut, tc.wantStderr)
		}
	}
	if got := readFile(t, path); got != malformed {
		t.Fatalf("a malformed file was changed")
	}
}

// TestWrappedMCPJSONRuns takes the command line install wrote into a
// project's .mcp.json and runs it the way Claude Code does: the server
// answers MCP through the supervisor, and ps shows it by its name.
func TestWrappedMCPJSONRuns(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	_, env := in.homeEnv(t)
	project := t.TempDir()
	// The server is the fixture under a name of its own.
	server := filepath.Join(t.TempDir(), "mcp-fixture")
	if err := os.Symlink(bin, server); err != nil {
		t.Fatal(err)
	}
	mcpJSON := filepath.Join(project, ".mcp.json")
	writeFile(t, mcpJSON, `{
  "mcpServers": {
    "fixture": {
      "type": "stdio",
      "command": "`+server+`",
      "args": ["_fixture", "mcp"],
      "env": {}
    }
  }
}
`)
	if out, errOut, code := runEnv(t, env, "", "install", "claude-code", "--project", project); code != 0 {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(readFile(t, mcpJSON)), &cfg); err != nil {
		t.Fatal(err)
	}
	entry := cfg.MCPServers["fixture"]
	want := []string{"run", "--name", "fixture", "--", server, "_fixture", "mcp"}
	if entry.Command != "supervisor" || strings.Join(entry.Args, " ") != strings.Join(want, " ") {
		t.Fatalf("wrapped entry %+v, want supervisor %v", entry, want)
	}

	// As a host: the bare name is looked up on the PATH the host has.
	hostEnv := append(append([]string{}, env...), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "CLAUDE_CODE_SESSION_ID=e2e")
	exe, err := lookPathIn(entry.Command, filepath.Dir(bin)+":"+os.Getenv("PATH"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, entry.Args...)
	cmd.Args[0] = entry.Command
	cmd.Env = hostEnv
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("server stderr:\n%s", readFile(t, errFile.Name()))
		}
	}()
	cmd.Stderr = errFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-done:
		case <-time.After(wait):
			cmd.Process.Kill()
			<-done
		}
	})
	r := bufio.NewReader(stdout)
	rpc := func(id int, method string) map[string]any {
		t.Helper()
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": map[string]any{}})
		if _, err := stdin.Write(append(req, '\n')); err != nil {
			t.Fatalf("send %s: %v", method, err)
		}
		line, err := readLine(r, wait)
		if err != nil {
			t.Fatalf("answer to %s: %v", method, err)
		}
		var resp struct {
			ID     int            `json:"id"`
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &resp); err != nil || resp.ID != id || resp.Result == nil {
			t.Fatalf("answer to %s: %q (%v)", method, line, err)
		}
		return resp.Result
	}
	init := rpc(1, "initialize")
	if info, _ := init["serverInfo"].(map[string]any); info["name"] != "fixture" {
		t.Fatalf("initialize answered %v", init)
	}
	if tools, ok := rpc(2, "tools/list")["tools"].([]any); !ok || tools == nil {
		t.Fatalf("tools/list did not answer a tool list")
	}
	var found bool
	for _, p := range in.mustProcesses(false) {
		if p.Name == "fixture" && p.PID > 0 && strings.HasSuffix(strings.Join(p.Argv, " "), "_fixture mcp") {
			found = true
		}
	}
	if !found {
		t.Fatalf("ps does not show the server by its name: %+v", in.mustProcesses(false))
	}
	stdin.Close()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("the wrapped server did not exit on stdin EOF")
	}
}

func lookPathIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// Claude Code's SessionEnd hook input ends the session labelled with its
// session_id, and only that one.
func TestSessionEndHook(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	labelled := func(label string) *instance {
		c := *in
		c.env = append(append([]string{}, in.env...), "CLAUDE_CODE_SESSION_ID="+label)
		return &c
	}
	a := labelled("abc").startHost(t, 1, "--", bin, "_fixture", "sleep")
	b := labelled("xyz").startHost(t, 1, "--", bin, "_fixture", "sleep")
	hook := `{"session_id":"abc","transcript_path":"/tmp/t.jsonl","cwd":"/tmp","hook_event_name":"SessionEnd","reason":"other"}`
	out, errOut, code := runEnv(t, in.env, hook, "session", "end", "--hook")
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("session end --hook: exit %d, stdout %q, stderr %q; want 0 and silence", code, out, errOut)
	}
	waitGonePID(t, a.servers[0], a.tokens[0])
	if !alive(b.servers[0], b.tokens[0]) {
		t.Fatal("the other session's server was stopped")
	}
	var sessions []api.SessionInfo
	if err := json.Unmarshal([]byte(in.mustRun("sessions", "--all", "--json")), &sessions); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, s := range sessions {
		seen[s.Label] = string(s.State)
	}
	if seen["abc"] != "ended" || seen["xyz"] != "active" {
		t.Errorf("sessions by label %v, want abc ended and xyz active", seen)
	}

	// No such session: silent, exit 0.
	if out, errOut, code := runEnv(t, in.env, `{"session_id":"nope"}`, "session", "end", "--hook"); code != 0 || out+errOut != "" {
		t.Fatalf("unknown session: exit %d, %q %q", code, out, errOut)
	}
	// Malformed input: a clear error, exit 1.
	for _, stdin := range []string{"not json", `{"reason":"other"}`} {
		_, errOut, code := runEnv(t, in.env, stdin, "session", "end", "--hook")
		if code != 1 || !strings.HasPrefix(errOut, "supervisor: session end --hook: ") {
			t.Fatalf("stdin %q: exit %d, stderr %q", stdin, code, errOut)
		}
	}
}

// With no daemon the hook exits 0 at once, silently, and starts none.
func TestSessionEndHookNoDaemon(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	out, errOut, code := runEnv(t, in.env, `{"session_id":"abc"}`, "session", "end", "--hook")
	if code != 0 || out+errOut != "" {
		t.Fatalf("exit %d, %q %q", code, out, errOut)
	}
	if pid := in.daemonPID(); pid != 0 {
		t.Fatalf("the hook started a daemon (pid %d)", pid)
	}
}

// Gemini CLI and Qwen Code tell their session id to hooks only: a
// SessionEnd hook whose session_id labels no session ends the unlabelled
// session of the host it runs under (here this test process), and not
// another host's. (A labelled session is matched by its label only: see
// hookSessions' unit test.)
func TestSessionEndHookByHost(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	mine := in.startShim("--", bin, "_fixture", "sleep") // its host: this process
	mpid := mine.readyPID(t)
	mtok := mustToken(t, mpid)
	other := in.startHost(t, 1, "--", bin, "_fixture", "sleep")
	hook := `{"session_id":"3f0c-gemini","hook_event_name":"SessionEnd","reason":"exit"}`
	if out, errOut, code := runEnv(t, in.env, hook, "session", "end", "--hook"); code != 0 || out+errOut != "" {
		t.Fatalf("session end --hook: exit %d, %q %q; want 0 and silence", code, out, errOut)
	}
	waitGonePID(t, mpid, mtok)
	if !alive(other.servers[0], other.tokens[0]) {
		t.Error("another host's session was stopped")
	}
}
