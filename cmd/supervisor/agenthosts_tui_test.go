//go:build linux

package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// tuiRecipe is how a real host's interactive UI is driven in a terminal:
// started with no dialog to answer (config and environment chosen for
// that), left to start its servers, and quit the way a user quits it.
type tuiRecipe struct {
	args []string // after the host's binary
	env  []string // besides the host's own (realHost.env)
	// filtersEnv: the host passes its servers only a few variables of its
	// own, so this instance's SUPERVISOR_* go into the server's entry.
	filtersEnv bool
	// setup runs once per private HOME before the UI first starts.
	setup func(t *testing.T, exe, home string, env []string)
	// quit is what a user types to quit, one tmux send-keys argument at a
	// time ("/quit", then "Enter"), with a pause between for the UI.
	quit []string
}

// tuiWait is how long a UI may take to start its servers: Codex, offline,
// starts them only after its model list times out (about 20 s).
const tuiWait = 3 * wait

// tui is one host UI running in its own tmux server.
type tui struct {
	tm     func(args ...string) (string, error)
	recipe *tuiRecipe
	host   string
	last   string // the screen when last captured
	// hostPID and hostTok are the session's host once it started fx (0
	// if it was gone already): the process the UI runs in.
	hostPID int
	hostTok proc.Token
	// panePID and paneTok are the process the terminal runs (the host's
	// launcher).
	panePID int
	paneTok proc.Token
}

// startTUI starts h's UI in a real terminal, offline, with exactly env
// (nothing of the test's own environment), in home, and waits until it
// has started server fx through `supervisor run`.
func startTUI(t *testing.T, in *instance, h realHost, exe, home string, env []string) *tui {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		npmMissing(t, "tmux is not installed (.ci/run installs it as root)")
	}
	sock := filepath.Join(in.state, "tmux-"+h.name+".sock")
	ui := &tui{recipe: h.tui, host: h.name, tm: func(args ...string) (string, error) {
		out, err := exec.Command(tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		return string(out), err
	}}
	t.Cleanup(func() {
		// The UI's processes go by pid, not only with their terminal: a
		// Gemini CLI whose quit had failed outlived its tmux server.
		ui.tm("kill-server")
		ui.killTree(ui.panePID, ui.paneTok)
		ui.killTree(ui.hostPID, ui.hostTok)
	})
	words := []string{"env", "-i"}
	// A person's terminal, not a CI job's: Gemini CLI runs headless where
	// CI=true (its isHeadlessMode), and then exits for want of a prompt
	// ("No input provided via stdin"), which CI saw. The last value of a
	// name wins; an empty one is one the host must not see.
	vars := append(append(slices.Clone(env), h.tui.env...), "TERM=xterm-256color", "CI=", "GITHUB_ACTIONS=")
	last := map[string]string{}
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	for _, kv := range vars {
		k, _, _ := strings.Cut(kv, "=")
		v, ok := last[k]
		if k == "" || !ok || v == "" {
			continue
		}
		words = append(words, shellQuote(k+"="+v))
		delete(last, k) // once
	}
	for _, a := range offline(append([]string{exe}, h.tui.args...)) {
		words = append(words, shellQuote(a))
	}
	command := "cd " + shellQuote(home) + " && exec " + strings.Join(words, " ")
	start := func() {
		if out, err := ui.tm("new-session", "-d", "-s", "host", "-x", "160", "-y", "45", command); err != nil {
			t.Fatalf("tmux new-session: %v: %s", err, out)
		}
		if out, err := ui.tm("display-message", "-p", "-t", "host", "#{pane_pid}"); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(out)); err == nil {
				ui.panePID = pid
				ui.paneTok, _ = proc.TokenOf(pid)
			}
		}
	}
	start()
	deadline := time.Now().Add(tuiWait)
	restarted := false
	for i := 0; ; i++ {
		for _, p := range in.mustProcesses(false) {
			if p.Name == "fx" {
				ui.screen()
				if ui.hostPID = sessionHost(t, in, p.Session); ui.hostPID > 0 {
					ui.hostTok, _ = proc.TokenOf(ui.hostPID)
				}
				return ui
			}
		}
		if i%5 == 0 {
			ui.screen() // kept: the last one is the witness if the UI ends
		}
		if _, err := ui.tm("has-session", "-t", "host"); err != nil {
			// The host ended on its own before it started its server:
			// its last screen says why. A busy CI run saw Gemini CLI do
			// so (the host's doing, not the supervisor's: no run had come
			// yet); it is started again once, saying so.
			if restarted {
				t.Fatalf("%s's UI ended twice before it started server fx; its last screen:\n%s", h.name, ui.last)
			}
			t.Logf("%s's UI ended before it started server fx; starting it again; its last screen:\n%s", h.name, ui.last)
			restarted = true
			start()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's UI started no server fx within %v; its screen:\n%s", h.name, tuiWait, ui.screen())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// killTree SIGKILLs pid, if it is still the process of tok, and every
// live descendant of it, each checked against its own token.
func (ui *tui) killTree(pid int, tok proc.Token) {
	if pid <= 0 || proc.Verify(pid, tok) != nil {
		return
	}
	kids := descendants(pid) // seen now: the tree a moment before the kill
	unix.Kill(pid, unix.SIGKILL)
	for _, p := range kids {
		unix.Kill(p, unix.SIGKILL)
	}
}

func (ui *tui) screen() string {
	out, err := ui.tm("capture-pane", "-p", "-t", "host")
	if err == nil {
		ui.last = out
	}
	return out
}

// quit types the recipe's quit keys and waits until the host process
// (pid, tok) has exited. A host still up 10 s after them is typed them
// again, as a person would: under load a UI can take keys before its
// input handler is set up, and drop them (Gemini CLI did so in a busy run).
func (ui *tui) quit(t *testing.T, pid int, tok proc.Token) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		for _, k := range ui.recipe.quit {
			if out, err := ui.tm("send-keys", "-t", "host", k); err != nil {
				if !alive(pid, tok) {
					t.Logf("%s exited on its own before %q; its last screen:\n%s", ui.host, k, ui.last)
					return
				}
				t.Fatalf("tmux send-keys %q: %v: %s (the host alive: %v; its terminal's last screen:\n%s)", k, err, out, alive(pid, tok), ui.last)
			}
			time.Sleep(500 * time.Millisecond) // a slash command's menu opens before Enter picks it
		}
		again := time.Now().Add(10 * time.Second)
		for alive(pid, tok) && time.Now().Before(again) {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not exit on %q within %v; its screen:\n%s", ui.host, ui.recipe.quit, wait, ui.screen())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !alive(pid, tok) {
			return
		}
		t.Logf("%s still runs 10 s after %q; typing them again; its screen:\n%s", ui.host, ui.recipe.quit, ui.screen())
	}
}

// gone waits until the UI's terminal has closed: everything the host ran
// in it (a node launcher in front of a native binary) has exited.
func (ui *tui) gone(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if _, err := ui.tm("has-session", "-t", "host"); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's terminal is still open %v after the host ended:\n%s", ui.host, wait, ui.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// codexConfig writes Codex's config.toml with server fx.
func codexConfig(t *testing.T, home string, argv []string, env map[string]string) string {
	t.Helper()
	quoted := func(ss []string) string {
		q := make([]string, len(ss))
		for i, s := range ss {
			q[i] = strconv.Quote(s)
		}
		return strings.Join(q, ", ")
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		kv = append(kv, k+" = "+strconv.Quote(env[k]))
	}
	path := filepath.Join(home, ".codex", "config.toml")
	text := fmt.Sprintf("[mcp_servers.fx]\ncommand = %s\nargs = [%s]\nenv = { %s }\n", strconv.Quote(argv[0]), quoted(argv[1:]), strings.Join(kv, ", "))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// codexLogin saves an API key, offline, so the UI skips its sign-in
// screen; the key is checked only when a prompt is sent, never here.
func codexLogin(t *testing.T, exe, home string, env []string) {
	t.Helper()
	argv := offline([]string{exe, "login", "--with-api-key"})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, home
	cmd.Stdin = strings.NewReader("sk-offline-test\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("codex login --with-api-key: %v\n%s", err, out)
	}
}
