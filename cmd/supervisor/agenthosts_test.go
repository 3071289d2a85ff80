//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// realHost is an agent host from npm (testdata/hosts, testdata/npm), as
// the real-host test drives it: offline, in a private HOME, through the
// command that connects to every configured server and exits.
type realHost struct {
	name      string   // as `supervisor install` takes it
	bin       string   // from the repository's root
	list      []string // connects to every server, prints them, exits
	connected string   // what list prints for a connected server
	env       []string
	// config writes the host's config with one stdio server "fx" running
	// argv with environment env, and returns its path.
	config func(t *testing.T, home string, argv []string, env map[string]string) string
	// tui drives the host's interactive UI; nil: the list command only.
	tui *tuiRecipe
}

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
}

// geminiLike is Gemini CLI's settings.json, which Qwen Code forked: folder
// trust off, or servers are not started in a folder never trusted; auth,
// when not "", the sign-in method chosen (its UI asks for one otherwise).
func geminiLike(dir, auth string) func(t *testing.T, home string, argv []string, env map[string]string) string {
	return func(t *testing.T, home string, argv []string, env map[string]string) string {
		path := filepath.Join(home, dir, "settings.json")
		security := map[string]any{"folderTrust": map[string]any{"enabled": false}}
		if auth != "" {
			security["auth"] = map[string]any{"selectedType": auth}
		}
		writeJSONFile(t, path, map[string]any{
			"security":   security,
			"mcpServers": map[string]any{"fx": map[string]any{"command": argv[0], "args": argv[1:], "env": env}},
		})
		return path
	}
}

// claudeKey is a made-up API key Claude Code's UI is told it approved.
const claudeKey = "sk-ant-api03-offline-0123456789abcdefghijklmnopqrstuvwxyz-AAAAAAAA"

var realHosts = []realHost{
	{name: "claude-code", bin: "testdata/npm/node_modules/.bin/claude", list: []string{"mcp", "list"}, connected: "Connected",
		env: []string{"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
		config: func(t *testing.T, home string, argv []string, env map[string]string) string {
			path := filepath.Join(home, ".claude.json")
			writeJSONFile(t, path, map[string]any{
				// What its UI would ask first: onboarding done, the key and
				// the folder (its working directory, home) trusted.
				"hasCompletedOnboarding": true,
				"customApiKeyResponses":  map[string]any{"approved": []string{claudeKey[len(claudeKey)-20:]}, "rejected": []string{}},
				"projects":               map[string]any{home: map[string]any{"hasTrustDialogAccepted": true}},
				"mcpServers":             map[string]any{"fx": map[string]any{"type": "stdio", "command": argv[0], "args": argv[1:], "env": env}},
			})
			return path
		},
		// A base URL that is no Anthropic host skips its wait for remote
		// managed settings (about 20 s offline).
		tui: &tuiRecipe{env: []string{"ANTHROPIC_API_KEY=" + claudeKey, "ANTHROPIC_BASE_URL=http://127.0.0.1:9"}, quit: []string{"/exit", "Enter"}}},
	{name: "gemini", bin: "testdata/hosts/node_modules/.bin/gemini", list: []string{"mcp", "list"}, connected: "Connected", config: geminiLike(".gemini", "gemini-api-key"),
		tui: &tuiRecipe{env: []string{"GEMINI_API_KEY=offline"}, quit: []string{"C-c", "C-c"}}}, // twice within 1 s
	{name: "qwen", bin: "testdata/hosts/node_modules/.bin/qwen", list: []string{"mcp", "list"}, connected: "Connected", config: geminiLike(".qwen", "openai"),
		tui: &tuiRecipe{env: []string{"OPENAI_API_KEY=offline"}, quit: []string{"C-d", "C-d"}}},
	{name: "opencode", bin: "testdata/hosts/node_modules/.bin/opencode", list: []string{"mcp", "list"}, connected: "connected",
		config: func(t *testing.T, home string, argv []string, env map[string]string) string {
			path := filepath.Join(home, ".config", "opencode", "opencode.json")
			writeJSONFile(t, path, map[string]any{
				"mcp": map[string]any{"fx": map[string]any{"type": "local", "command": argv, "environment": env}},
			})
			return path
		},
		// One key: a second one, while it exits, reaches the terminal's shell.
		tui: &tuiRecipe{env: []string{"OPENCODE_DISABLE_MODELS_FETCH=1"}, quit: []string{"C-c"}}},
	// Codex's `mcp list` starts no server: only its UI does, once its
	// model list is fetched or failed. Offline, OpenAI's took 16 s to time
	// out: a provider of its own on a port nothing serves fails at once
	// (no retries), and the UI starts its server within a second.
	{name: "codex", bin: "testdata/hosts/node_modules/.bin/codex", config: codexConfig, tui: &tuiRecipe{
		args: []string{"-c", "features.daemon_auto_start=false",
			"-c", `model_providers.offline={name="offline", base_url="http://127.0.0.1:9/v1", request_max_retries=0, stream_max_retries=0}`,
			"-c", "model_provider=offline"},
		filtersEnv: true,
		setup:      codexLogin,
		quit:       []string{"/quit", "Enter"},
	}},
}

// offline runs argv without a network where this user may (root: a
// network namespace of its own), so a host that would phone home cannot.
func offline(argv []string) []string {
	if os.Getuid() == 0 {
		if un, err := exec.LookPath("unshare"); err == nil {
			return append([]string{un, "-n", "--"}, argv...)
		}
	}
	return argv
}

// Issue 28: every real host this repository pins, installed through
// `supervisor install`, starts its server through `supervisor run`; the
// host's own exit and its SIGKILL leave nothing of the server (an escaped
// setsid grandchild included); the daemon serving another host's server
// beside it stays the same process; uninstall gives the file back byte for
// byte. In place and with SUPERVISOR_IN_PLACE=off. A host is ended:
//   - exit: its list command (`mcp list`) connects and exits on its own;
//   - quit: its interactive UI, in a real terminal (tmux), is quit the way
//     a user does it (`/quit`, Ctrl-C, Ctrl-D: the host's tui.quit);
//   - SIGKILL: while its server hangs in the handshake (list command), or
//     once its UI has started the server.
func TestRealHosts(t *testing.T) {
	// Beside the other tests, and two hosts at a time: each is a Node
	// program of a few hundred MB whose start takes seconds of CPU, and
	// four at once on 2 cores starved them past the waits (gemini's
	// `mcp list` did not start its server within 30 s in a CI run).
	// Two goroutines run the hosts one after another as subtests of their
	// own: parallel subtests waiting for a host's turn held -parallel's
	// slots from the other tests all that time. This file is the first of
	// the package's on purpose: go test tends to resume parallel tests in
	// the order they are declared (a tendency, not a promise: the paused
	// tests race for the slots), and these are its longest; declared last,
	// they began last and ran alone for the package's last minute and a
	// half.
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	type hostRun struct {
		h       realHost
		inPlace string
	}
	runs := make(chan hostRun)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range runs {
				t.Run(r.h.name+"/in-place="+r.inPlace, func(t *testing.T) { testRealHost(t, root, r.h, r.inPlace) })
			}
		}()
	}
	for _, h := range realHosts {
		for _, inPlace := range []string{"auto", "off"} {
			runs <- hostRun{h, inPlace}
		}
	}
	close(runs)
	wg.Wait()
}

// testRealHost is one host's run of TestRealHosts, with an instance, a
// home and a tag of its own.
func testRealHost(t *testing.T, root string, h realHost, inPlace string) {
	exe := filepath.Join(root, h.bin)
	if _, err := os.Stat(exe); err != nil {
		msg := fmt.Sprintf("%s is not installed (%s): .ci/run installs it with npm", h.name, h.bin)
		if os.Getenv("CI") == "true" && strings.HasPrefix(h.bin, "testdata/npm/") {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	in := newInstance(t)
	in.env = append(slices.Clone(in.env), "SUPERVISOR_IN_PLACE="+inPlace)
	home, env := in.homeEnv(t)
	env = append(env, h.env...)
	if h.tui != nil && h.tui.setup != nil {
		h.tui.setup(t, exe, home, env)
	}
	// Another host's server, beside this one all along: the
	// daemon that serves it must never change.
	beside := in.startShim("--", bin, "_fixture", "sleep")
	bpid := beside.readyPID(t)
	btok := mustToken(t, bpid)
	daemon := in.daemonPID()

	var hows []string
	if h.list != nil {
		hows = append(hows, "exit")
	}
	if h.tui != nil {
		hows = append(hows, "quit")
	}
	hows = append(hows, "SIGKILL")
	for _, how := range hows {
		began := time.Now()
		tag := fmt.Sprintf("%s-%s-%d", h.name, how, time.Now().UnixNano())
		argv := []string{bin, "_fixture", "mcp", "--escape"}
		if how == "SIGKILL" && h.list != nil {
			argv = append(argv, "--hang") // the host waits for it until killed
		}
		serverEnv := map[string]string{"E2E_TAG": tag}
		if h.tui != nil && h.tui.filtersEnv {
			// The host passes its servers only a few variables of
			// its own (HOME, PATH, ...): this instance's are named
			// in the server's entry, as a user who sets them would.
			for _, kv := range in.env {
				if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SUPERVISOR_") {
					serverEnv[k] = v
				}
			}
		}
		path := h.config(t, home, argv, serverEnv)
		orig, _ := os.ReadFile(path)
		if out, errOut, code := runEnv(t, env, "", "install", h.name); code != 0 {
			t.Fatalf("install %s: exit %d\n%s%s", h.name, code, out, errOut)
		}
		wrapped, _ := os.ReadFile(path)
		if !strings.Contains(string(wrapped), `"run"`) {
			t.Fatalf("install left %s unwrapped:\n%s", path, wrapped)
		}

		switch {
		case how == "exit":
			ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
			argvHost := offline(append([]string{exe}, h.list...))
			cmd := exec.CommandContext(ctx, argvHost[0], argvHost[1:]...)
			cmd.Env, cmd.Dir = env, home
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil || !strings.Contains(string(out), h.connected) {
				t.Fatalf("%s %v: %v; want the server %s:\n%s", h.name, h.list, err, h.connected, out)
			}
		case how == "SIGKILL" && h.list != nil: // during the handshake
			ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
			argvHost := offline(append([]string{exe}, h.list...))
			cmd := exec.CommandContext(ctx, argvHost[0], argvHost[1:]...)
			cmd.Env, cmd.Dir = env, home
			if err := cmd.Start(); err != nil {
				cancel()
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			unix.Kill(serverHost(t, in, "fx"), unix.SIGKILL)
			cmd.Process.Kill() // a launcher in front of it (node, unshare)
			<-done
			cancel()
		default: // its UI, quit or SIGKILLed
			ui := startTUI(t, in, h, exe, home, env)
			switch {
			case ui.hostPID <= 0 || !alive(ui.hostPID, ui.hostTok):
				// Seen once in CI, for Gemini CLI under heavy load:
				// what follows still holds after the host's own exit.
				t.Logf("%s exited on its own before it could be ended by %s; its screen then:\n%s", h.name, how, ui.last)
			case how == "SIGKILL":
				unix.Kill(ui.hostPID, unix.SIGKILL)
			default:
				ui.quit(t, ui.hostPID, ui.hostTok)
			}
			ui.gone(t)
		}
		waitCond(t, func() error {
			if left := taggedProcesses("E2E_TAG=" + tag); len(left) > 0 {
				return fmt.Errorf("after the host's %s, still running: %v", how, left)
			}
			return nil
		})
		started := false
		for _, p := range in.mustProcesses(true) {
			started = started || p.Name == "fx"
		}
		if !started {
			t.Errorf("%s: the server was not started through supervisor run", how)
		}
		t.Logf("%s: started, ended by %s and gone in %v", h.name, how, time.Since(began).Round(time.Millisecond))
		// Most hosts write their own file too (Claude Code a
		// userID, Qwen Code a $version, opencode a $schema): then
		// uninstall cannot give the original bytes back, only
		// the server's own command, keeping what the host added.
		hostWrote := false
		if now, _ := os.ReadFile(path); string(now) != string(wrapped) {
			hostWrote = true
		}
		if out, errOut, code := runEnv(t, env, "", "uninstall", h.name); code != 0 {
			t.Fatalf("uninstall %s: exit %d\n%s%s", h.name, code, out, errOut)
		}
		got, _ := os.ReadFile(path)
		switch {
		case !hostWrote && string(got) != string(orig):
			t.Fatalf("uninstall did not give %s back byte for byte:\n%s", path, got)
		case hostWrote && !slices.Equal(serverArgv(t, path, got, "fx"), argv):
			t.Fatalf("uninstall left fx as %q in %s, want %q:\n%s", serverArgv(t, path, got, "fx"), path, argv, got)
		}
	}
	if !alive(bpid, btok) {
		t.Error("the other host's server beside it was stopped")
	}
	if now := in.daemonPID(); now != daemon {
		t.Errorf("the daemon changed from %d to %d while the host came and went", daemon, now)
	}
	killByToken(bpid, btok)
}

// serverHost waits for the host to start server name and returns the
// session's host: the host whose servers they are, which may be a child
// of the command run (node in front of a native binary, unshare).
func serverHost(t *testing.T, in *instance, name string) int {
	t.Helper()
	// A host's own start (Node, a few hundred MB) is seconds of CPU: on a
	// busy 2-core machine it took over 30 s.
	deadline := time.Now().Add(tuiWait)
	for {
		for _, p := range in.mustProcesses(false) {
			if p.Name == name {
				if host := sessionHost(t, in, p.Session); host > 1 {
					return host
				}
			}
		}
		if time.Now().After(deadline) {
			ev, _, _ := in.run("events")
			all, _, _ := in.run("ps", "--all")
			t.Fatalf("after %v no live host has started server %s; events:\n%s\nps --all:\n%s", tuiWait, name, ev, all)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serverArgv finds the server name in a host's JSON config, wherever the
// host keeps its servers, and returns its command line: command and args,
// or opencode's command array.
func serverArgv(t *testing.T, path string, data []byte, name string) []string {
	t.Helper()
	var root any
	unmarshal := json.Unmarshal
	if strings.HasSuffix(path, ".toml") {
		unmarshal = toml.Unmarshal
	}
	if err := unmarshal(data, &root); err != nil {
		t.Fatalf("%s does not parse after uninstall: %v\n%s", path, err, data)
	}
	var find func(v any) []string
	find = func(v any) []string {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		if srv, ok := m[name].(map[string]any); ok {
			var argv []string
			switch c := srv["command"].(type) {
			case string:
				argv = append(argv, c)
			case []any:
				for _, a := range c {
					argv = append(argv, fmt.Sprint(a))
				}
			}
			if args, ok := srv["args"].([]any); ok {
				for _, a := range args {
					argv = append(argv, fmt.Sprint(a))
				}
			}
			return argv
		}
		for _, sub := range m {
			if argv := find(sub); argv != nil {
				return argv
			}
		}
		return nil
	}
	return find(root)
}

// sessionHost is the host pid of session id.
func sessionHost(t *testing.T, in *instance, id string) int {
	t.Helper()
	var sessions []api.SessionInfo
	if err := json.Unmarshal([]byte(in.mustRun("sessions", "--all", "--json")), &sessions); err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		if s.ID == id {
			if proc.Verify(s.HostPID, s.HostToken) == nil {
				return s.HostPID
			}
		}
	}
	return 0
}

// Issue 28: the SessionEnd hook `install --hooks` adds ends the session
// through the real host's own hook runner, when the host's one-shot prompt
// (`-p`) fails offline and it exits on its own: Claude Code (which labels
// its servers' sessions) and Gemini CLI (which tells its session id to
// hooks only: the hook finds the session by the host it runs under). The
// session must end by the hook's request, not by the host's death, and
// leave nothing running.
func TestRealHostSessionEndHooks(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host, bin string
		env       []string
		config    func(t *testing.T, home string, argv []string, env map[string]string) string
		args      func(config string) []string
		// apiEnv names the variable that sends the host's API calls to a
		// base URL: there, beside it, an API that refuses every key
		// (`_fixture refusing-api`), so the prompt fails at once. Offline,
		// Gemini CLI would retry for minutes; told to stop instead, it
		// runs its hooks while it exits, a race with its own death.
		apiEnv string
	}{
		{host: "claude-code", bin: "testdata/npm/node_modules/.bin/claude", config: realHosts[0].config,
			// A closed port and no retries: the prompt fails at once.
			env:  []string{"ANTHROPIC_API_KEY=sk-offline", "ANTHROPIC_BASE_URL=http://127.0.0.1:9", "CLAUDE_CODE_MAX_RETRIES=0", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1"},
			args: func(config string) []string { return []string{"-p", "hi", "--mcp-config", config} }},
		{host: "gemini", bin: "testdata/hosts/node_modules/.bin/gemini", config: geminiLike(".gemini", "gemini-api-key"),
			env: []string{"GEMINI_API_KEY=offline"}, apiEnv: "GOOGLE_GEMINI_BASE_URL",
			args: func(string) []string { return []string{"-p", "hi"} }},
	} {
		t.Run(tc.host, func(t *testing.T) {
			exe := filepath.Join(root, tc.bin)
			if _, err := os.Stat(exe); err != nil {
				t.Skipf("%s is not installed (%s): .ci/run installs it with npm", tc.host, tc.bin)
			}
			in := newInstance(t)
			home, env := in.homeEnv(t)
			env = append(env, tc.env...)
			tag := fmt.Sprintf("hook-%s-%d", tc.host, time.Now().UnixNano())
			path := tc.config(t, home, []string{bin, "_fixture", "mcp", "--escape"}, map[string]string{"E2E_TAG": tag})
			if out, errOut, code := runEnv(t, env, "", "install", tc.host, "--hooks"); code != 0 {
				t.Fatalf("install %s --hooks: exit %d\n%s%s", tc.host, code, out, errOut)
			}
			argv := append([]string{exe}, tc.args(path)...)
			if tc.apiEnv != "" {
				port := strconv.Itoa(freePort(t))
				env = append(env, tc.apiEnv+"=http://127.0.0.1:"+port)
				argv = append([]string{bin, "_fixture", "refusing-api", port, "--"}, argv...)
			}
			argv = offline(argv)
			ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
			defer cancel()
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Env, cmd.Dir = env, home
			out, _ := cmd.CombinedOutput() // the prompt fails; the session ends all the same
			if ctx.Err() != nil {
				t.Fatalf("%s -p did not exit within %v:\n%s", tc.host, 2*wait, lastLines(string(out), 10))
			}
			t.Logf("%s: %s", tc.host, lastLines(string(out), 3))
			waitCond(t, func() error {
				for _, ev := range in.eventsJSON("--lines", "0") {
					if ev.Kind == "session.end" {
						if ev.Detail != "ended by request" {
							return fmt.Errorf("the session ended %q, not by the hook's request", ev.Detail)
						}
						return nil
					}
				}
				return fmt.Errorf("no session ended (events: %s)", in.mustRun("events"))
			})
			waitCond(t, func() error {
				if left := taggedProcesses("E2E_TAG=" + tag); len(left) > 0 {
					return fmt.Errorf("still running after the session ended: %v", left)
				}
				return nil
			})
			if out, errOut, code := runEnv(t, env, "", "uninstall", tc.host, "--hooks"); code != 0 {
				t.Fatalf("uninstall %s --hooks: exit %d\n%s%s", tc.host, code, out, errOut)
			}
		})
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
