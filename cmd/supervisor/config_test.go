//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-86a41135/supervisor/internal/config"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/shutdown"
)

// writeConfig writes the instance's config file (newInstance points
// SUPERVISOR_CONFIG at it).
func (in *instance) writeConfig(text string) string {
	in.t.Helper()
	p := filepath.Join(in.state, "config.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		in.t.Fatal(err)
	}
	return p
}

func TestConfigShow(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	out := in.mustRun("config", "show")
	if !strings.Contains(out, "(not found: built-in defaults)") || !strings.Contains(out, "grace") {
		t.Errorf("config show without a file:\n%s", out)
	}

	path := in.writeConfig("grace = \"2s\"\nretention = \"48h\"\n\n[servers.slow]\ngrace = \"300ms\"\n")
	in.env = append(in.env, settings.EnvRetention+"=24h")
	out = in.mustRun("config", "show")
	for _, want := range []string{path + "\n", "2s", path + ":1", "24h0m0s", "env " + settings.EnvRetention,
		"servers.slow.grace", "300ms", path + ":5", "linger"} {
		if !strings.Contains(out, want) {
			t.Errorf("config show lacks %q:\n%s", want, out)
		}
	}
	var got struct {
		File   string         `json:"file"`
		Loaded bool           `json:"loaded"`
		Values []config.Entry `json:"values"`
	}
	js := in.mustRun("config", "show", "--json")
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatalf("config show --json: %v: %s", err, js)
	}
	want := map[string]config.Entry{
		"grace":              {Value: "2s", Source: path + ":1"},
		"retention":          {Value: "24h0m0s", Source: "env " + settings.EnvRetention},
		"linger":             {Value: "30s", Source: "default"},
		"servers.slow.grace": {Value: "300ms", Source: path + ":5"},
	}
	if got.File != path || !got.Loaded {
		t.Errorf("file %q loaded %v, want %q", got.File, got.Loaded, path)
	}
	for _, e := range got.Values {
		if w, ok := want[e.Key]; ok {
			if e.Value != w.Value || e.Source != w.Source {
				t.Errorf("%s = %s from %s, want %s from %s", e.Key, e.Value, e.Source, w.Value, w.Source)
			}
			delete(want, e.Key)
		}
	}
	for k := range want {
		t.Errorf("config show --json lacks %s", k)
	}

	in.writeConfig("[breaker]\nthreshold = 2\ncooldwn = \"1s\"\n")
	_, stderr, code := in.run("config", "show")
	if code == 0 || !strings.Contains(stderr, "supervisor: "+path+`:3: unknown key "breaker.cooldwn"`) {
		t.Errorf("bad file: exit %d, stderr %q", code, stderr)
	}
}

func TestConfigDaemonRefusesBadFile(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	for _, tc := range []struct{ text, want string }{
		{"grace = \"5s\"\ngrase = \"2s\"\n", `:2: unknown key "grase"`},
		{"\nretention = \"7d\"\n", `:2: retention: "7d": want a positive duration`},
		{"[servers.web]\nhealth = \"https://x\"\n", `:2: servers.web.health: "https://x": want none, tcp or an http:// URL`},
	} {
		path := in.writeConfig(tc.text)
		want := "supervisor: " + path + tc.want
		_, stderr, code := in.run("daemon", "--foreground")
		if code == 0 || !strings.Contains(stderr, want) {
			t.Errorf("daemon --foreground with %q: exit %d, stderr %q; want non-zero and %q", tc.text, code, stderr, want)
		}
		if pid := in.daemonPID(); pid != 0 {
			t.Fatalf("a daemon (pid %d) started with a bad config file", pid)
		}
		log, _ := os.ReadFile(filepath.Join(in.state, "supervisor.log"))
		if !strings.Contains(string(log), want) {
			t.Errorf("daemon log lacks %q:\n%s", want, log)
		}
		// The detached start says the same, without launching anything.
		_, stderr, code = in.run("daemon")
		if code == 0 || !strings.Contains(stderr, want) {
			t.Errorf("daemon with %q: exit %d, stderr %q", tc.text, code, stderr)
		}
	}
}

// A [servers.NAME] grace reaches the run of that name (its record keeps
// it), a --grace flag beats it, and a stop ends the SIGTERM-ignorer with
// SIGKILL after it.
func TestConfigServerGraceOverride(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.writeConfig("[servers.slow]\ngrace = \"300ms\"\n")
	s := in.startShim("--session", "cfg", "--name", "slow", "--", bin, "_fixture", "ignore-term")
	pid := s.readyPID(t)
	f := in.startShim("--session", "cfg", "--name", "flagged", "--grace", "200ms", "--", bin, "_fixture", "ignore-term")
	fpid := f.readyPID(t)
	o := in.startShim("--session", "cfg", "--name", "other", "--", bin, "_fixture", "ignore-term")
	opid := o.readyPID(t)

	graces := map[int]int64{}
	for _, p := range in.mustProcesses(false) {
		graces[p.PID] = p.GraceMS
	}
	if graces[pid] != 300 || graces[fpid] != 200 || graces[opid] != 0 {
		t.Errorf("grace_ms: slow %d (want 300 from the file), flagged %d (want 200 from --grace), other %d (want 0: the daemon's)",
			graces[pid], graces[fpid], graces[opid])
	}

	out := in.mustRun("stop", "slow", "--json")
	var outs []shutdown.Outcome
	if err := json.Unmarshal([]byte(out), &outs); err != nil {
		t.Fatalf("stop --json: %v: %s", err, out)
	}
	if len(outs) != 1 || outs[0].PID != pid || outs[0].Result != shutdown.Killed {
		t.Errorf("stop slow: %s; want pid %d %s", out, pid, shutdown.Killed)
	}
	in.mustRun("stop", "flagged", "--grace", "100ms")
	in.mustRun("stop", "other", "--grace", "100ms")
}
