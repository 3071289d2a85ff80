package broker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Volatile are the environment variables left out of a server key: they
// differ between sessions of the same host (its session id, its terminal
// window, its IPC handles, supervisor's own markers) and do not change what
// a server does. A trailing * matches a prefix. The config adds more
// (design §11: "a documented list, extensible in the config").
var Volatile = []string{
	"SUPERVISOR_*",
	"CLAUDE_CODE_SESSION_ID", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT",
	// Claude Code 2.1 sets these per session in every server's environment.
	"CLAUDE_CODE_LAUNCHED_BY_SESSION_IDS", "CLAUDE_CODE_CHILD_NOTES_DIR",
	"CODEX_SESSION_ID", "CODEX_THREAD_ID", "GEMINI_CLI_SESSION_ID", "CURSOR_TRACE_ID", "CURSOR_SESSION_ID",
	"VSCODE_PID", "VSCODE_IPC_HOOK*", "VSCODE_GIT_IPC_HANDLE", "VSCODE_GIT_ASKPASS_*", "VSCODE_NONCE",
	"TERM_SESSION_ID", "ITERM_SESSION_ID", "WINDOWID", "KITTY_WINDOW_ID", "TMUX_PANE", "WEZTERM_PANE",
	"SHLVL", "_", "OLDPWD", "PWD", "INVOCATION_ID", "JOURNAL_STREAM", "GPG_TTY", "SSH_TTY",
}

// Key is the server key of design §11: the resolved command (path plus
// arguments), its working directory and its environment minus the volatile
// variables (Volatile and extra), hashed. Clients with equal keys share one
// upstream; any difference gets its own. resolved is argv[0] as it will be
// executed (an absolute path).
func Key(resolved string, argv []string, dir string, env []string, extra []string) string {
	h := sha256.New()
	write := func(tag string, s string) {
		// Length-prefixed fields: no two different inputs hash alike.
		h.Write([]byte(tag))
		var n [8]byte
		for i, l := 0, uint64(len(s)); i < 8; i++ {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write([]byte(s))
	}
	write("exe", resolved)
	for _, a := range argv[min(1, len(argv)):] {
		write("arg", a)
	}
	write("dir", dir)
	// Of a variable set twice the last one counts, as execve's consumers
	// read it.
	last := map[string]string{}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !volatile(name, extra) {
			last[name] = kv
		}
	}
	kept := make([]string, 0, len(last))
	for _, kv := range last {
		kept = append(kept, kv)
	}
	sort.Strings(kept)
	for _, kv := range kept {
		write("env", kv)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func volatile(name string, extra []string) bool {
	for _, list := range [][]string{Volatile, extra} {
		for _, p := range list {
			if prefix, ok := strings.CutSuffix(p, "*"); ok {
				if strings.HasPrefix(name, prefix) {
					return true
				}
			} else if name == p {
				return true
			}
		}
	}
	return false
}

// Fingerprint identifies what a server key runs (design §11): the
// resolved executable and every argument naming an existing regular file
// (a script: node's index.js, python's server.py), each by path, size and
// modification time. An upgrade changes it, so what was learned about the
// old files (the stateless revision, the lazy-start cache) is not trusted
// for the new ones. Relative arguments are taken from dir.
func Fingerprint(resolved string, argv []string, dir string) string {
	h := sha256.New()
	add := func(path string) {
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() {
			return
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", path, fi.Size(), fi.ModTime().UnixNano())
	}
	add(resolved)
	for _, a := range argv[min(1, len(argv)):] {
		if a != "" && !strings.HasPrefix(a, "-") {
			add(a)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
