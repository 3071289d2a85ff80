//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Issue 29: `npx -y <package> install HOST` runs the binary from npx's
// cache, which npm cleans when it likes: install copies it to the user's
// data directory and pins that copy, never the cache (--dry-run copies
// nothing and says what it would do).
func TestInstallFromNpxCachePinsAStableCopy(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the stable directory asserted here is Linux's")
	}
	in := newInstance(t)
	home, env := in.homeEnv(t)
	cached := filepath.Join(home, ".npm", "_npx", "3f2a1b", "node_modules", "@seed-86a41135", "supervisor-linux-x64", "bin", "supervisor")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cached, string(data))
	if err := os.Chmod(cached, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(home, ".claude.json")
	writeFile(t, cfg, `{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server-fs"]}}}`+"\n")
	stable := filepath.Join(home, ".local", "share", "supervisor", "bin", "supervisor")

	run := func(args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(cached, args...)
		cmd.Env = env
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("supervisor %v (from npx's cache): %v\n%s%s", args, err, o.String(), e.String())
		}
		return o.String(), e.String()
	}

	out, errOut := run("install", "claude-code", "--dry-run")
	if !strings.Contains(out+errOut, "would copy it to "+stable) || !strings.Contains(out, stable) {
		t.Errorf("install --dry-run from npx's cache: want it to say it would copy to %s and pin that:\n%s%s", stable, out, errOut)
	}
	if _, err := os.Stat(stable); err == nil {
		t.Fatalf("install --dry-run copied the binary to %s", stable)
	}

	out, errOut = run("install", "claude-code")
	if !strings.Contains(out+errOut, "npx's cache") || !strings.Contains(out+errOut, "copied it to "+stable) {
		t.Errorf("install from npx's cache did not say it copied the binary:\n%s%s", out, errOut)
	}
	copied, err := os.ReadFile(stable)
	if err != nil || !bytes.Equal(copied, data) {
		t.Fatalf("no identical copy at %s: %v", stable, err)
	}
	if st, _ := os.Stat(stable); st.Mode().Perm()&0o111 == 0 {
		t.Fatalf("the copy at %s is not executable: %v", stable, st.Mode())
	}
	written, _ := os.ReadFile(cfg)
	if !strings.Contains(string(written), `"command": "`+stable+`"`) || strings.Contains(string(written), "_npx") {
		t.Fatalf("the config does not pin the stable copy %s:\n%s", stable, written)
	}
	// The copy works where the cache is gone.
	os.RemoveAll(filepath.Join(home, ".npm"))
	cmd := exec.Command(stable, "version")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "supervisor ") {
		t.Fatalf("the pinned copy does not run once npx's cache is gone: %v %s", err, out)
	}
	// Uninstall from the copy gives the file back.
	if out, errOut, code := runEnv(t, env, "", "uninstall", "claude-code"); code != 0 {
		t.Fatalf("uninstall: exit %d\n%s%s", code, out, errOut)
	}
}
