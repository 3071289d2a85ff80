//go:build linux

package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Issue 29: ensure says whether it started the server or joined the one
// running; install says the host must be restarted to take the change
// (and --dry-run, which changes nothing, does not).
func TestEnsureAndInstallSayWhatHappened(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	port := strconv.Itoa(freePort(t))
	argv := []string{"ensure", "--name", "web", "--session", "s1", "--port", port, "--", bin, "_fixture", "listen", port}
	first := in.mustRun(argv...)
	second := in.mustRun(argv...)
	if f := strings.Fields(first); len(f) < 3 || f[2] != "started:" || !strings.Contains(first, "web on port "+port) {
		t.Errorf("first ensure said %q; want ID PID started: web on port %s", first, port)
	}
	if f := strings.Fields(second); len(f) < 3 || f[2] != "joined:" || f[0] != strings.Fields(first)[0] {
		t.Errorf("second ensure said %q; want the same id, joined", second)
	}

	home, env := in.homeEnv(t)
	writeFile(t, filepath.Join(home, ".claude.json"), `{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server-fs"]}}}`+"\n")
	out, errOut, code := runEnv(t, env, "", "install", "claude-code", "--dry-run")
	if code != 0 || strings.Contains(out, "restart ") {
		t.Errorf("install --dry-run: exit %d, %q %q; want no restart advice for a change not made", code, out, errOut)
	}
	out, errOut, code = runEnv(t, env, "", "install", "claude-code")
	if code != 0 || !strings.Contains(out, "restart claude-code so they start their servers through supervisor") {
		t.Errorf("install: exit %d, %q %q; want it to say to restart the host", code, out, errOut)
	}
	out, _, _ = runEnv(t, env, "", "uninstall", "claude-code")
	if !strings.Contains(out, "restart claude-code so they start their servers directly again") {
		t.Errorf("uninstall: %q; want it to say to restart the host", out)
	}
}
