//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/config"
	"github.com/seed-86a41135/supervisor/internal/settings"
)

// graceOfNewRun starts `run --name slow` in a session of its own and
// returns the grace_ms its record got.
func (in *instance) graceOfNewRun(t *testing.T, session string) int64 {
	t.Helper()
	s := in.startShim("--session", session, "--name", "slow", "--", bin, "_fixture", "sleep")
	pid := s.readyPID(t)
	for _, p := range in.mustProcesses(false) {
		if p.PID == pid {
			return p.GraceMS
		}
	}
	t.Fatalf("no process record for pid %d", pid)
	return 0
}

// daemonLogCount counts the lines of the daemon's log containing s.
func (in *instance) daemonLogCount(s string) int {
	log, _ := os.ReadFile(filepath.Join(in.state, "supervisor.log"))
	return strings.Count(string(log), s)
}

// A reload (`daemon reload`, or SIGHUP) re-reads the config file: new runs
// get its values; a bad file is reported as file:line and changes nothing.
func TestConfigReload(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.writeConfig("[servers.slow]\ngrace = \"300ms\"\n")
	if g := in.graceOfNewRun(t, "rl1"); g != 300 {
		t.Fatalf("grace_ms %d at start, want 300 from the file", g)
	}
	pid := in.daemonPID()
	if pid == 0 {
		t.Fatal("no daemon")
	}

	path := in.writeConfig("[servers.slow]\ngrace = \"400ms\"\n")
	out := in.mustRun("daemon", "reload")
	if !strings.Contains(out, "config reloaded from "+path) {
		t.Errorf("daemon reload said %q", out)
	}
	if g := in.graceOfNewRun(t, "rl2"); g != 400 {
		t.Errorf("grace_ms %d after daemon reload, want 400", g)
	}

	in.writeConfig("[servers.slow]\ngrace = \"500ms\"\ngrase = \"1s\"\n")
	want := path + `:3: unknown key "servers.slow.grase"`
	_, stderr, code := in.run("daemon", "reload")
	if code != 1 || !strings.Contains(stderr, "supervisor: "+want) {
		t.Errorf("daemon reload of a bad file: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	if p := in.daemonPID(); p != pid {
		t.Fatalf("daemon pid %d after a failed reload, want %d still running", p, pid)
	}
	if n := in.daemonLogCount("config reload failed: " + want + "; did you mean grace?; keeping the old config"); n != 1 {
		t.Errorf("daemon log has the reload failure %d times, want 1", n)
	}
	if g := in.graceOfNewRun(t, "rl3"); g != 400 {
		t.Errorf("grace_ms %d after a failed reload, want the old 400", g)
	}

	// SIGHUP reloads the same way and does not stop the daemon.
	in.writeConfig("[servers.slow]\ngrace = \"600ms\"\n")
	reloaded := in.daemonLogCount("config reloaded")
	if err := unix.Kill(pid, unix.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitCond(t, func() error {
		if n := in.daemonLogCount("config reloaded"); n <= reloaded {
			return fmt.Errorf("no reload logged after SIGHUP")
		}
		return nil
	})
	if p := in.daemonPID(); p != pid {
		t.Fatalf("daemon pid %d after SIGHUP, want %d still running", p, pid)
	}
	if g := in.graceOfNewRun(t, "rl4"); g != 600 {
		t.Errorf("grace_ms %d after SIGHUP, want 600", g)
	}

	// A bad file on SIGHUP: logged, and the old config stays.
	in.writeConfig("[servers.slow]\ngrace = 700\n")
	failed := in.daemonLogCount("config reload failed: " + path + ":2: ")
	if err := unix.Kill(pid, unix.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitCond(t, func() error {
		if n := in.daemonLogCount("config reload failed: " + path + ":2: "); n <= failed {
			return fmt.Errorf("no reload failure logged after SIGHUP with a bad file")
		}
		return nil
	})
	if p := in.daemonPID(); p != pid {
		t.Fatalf("daemon pid %d after SIGHUP with a bad file, want %d still running", p, pid)
	}
	if g := in.graceOfNewRun(t, "rl5"); g != 600 {
		t.Errorf("grace_ms %d after a failed SIGHUP reload, want the old 600", g)
	}
}

// A reload re-reads the file only: the environment is the daemon's at start
// and its flags are applied again over the new file.
func TestConfigReloadKeepsStartEnvAndFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	write := func(text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("retention = \"48h\"\nlinger = \"1s\"\n")
	t.Setenv(config.EnvConfig, path)
	t.Setenv(settings.EnvBreakerCooldown, "7s")
	load := configLoader(func(e *config.Effective) {
		e.Set("retention", "retention", func(e *config.Effective) { e.Settings.Retention = time.Hour })
	})
	t.Setenv(config.EnvConfig, filepath.Join(t.TempDir(), "other.toml")) // later changes are not seen
	t.Setenv(settings.EnvBreakerCooldown, "9s")
	write("retention = \"72h\"\nlinger = \"2s\"\n[breaker]\ncooldown = \"3s\"\n")
	eff, err := load()
	if err != nil {
		t.Fatal(err)
	}
	s := eff.Settings
	if eff.File != path || s.Linger != 2*time.Second || s.Retention != time.Hour || s.Breaker.Cooldown != 7*time.Second {
		t.Errorf("reloaded %s: linger %v (want 2s from the file), retention %v (want 1h from the flag), cooldown %v (want 7s from the start-time env)",
			eff.File, s.Linger, s.Retention, s.Breaker.Cooldown)
	}
	write("linger = 2\n")
	if _, err := load(); err == nil || !strings.HasPrefix(err.Error(), path+":1: ") {
		t.Errorf("a bad file on reload: %v, want %s:1: ...", err, path)
	}
}
