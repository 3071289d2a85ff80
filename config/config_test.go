package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/daemon"
	"github.com/seed-86a41135/supervisor/registry"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigPrecedence(t *testing.T) {
	file := "grace = \"7s\"\nretention = \"48h\"\n\n[breaker]\ncooldown = \"2m\"\n"
	for _, tc := range []struct {
		name      string
		file      string
		env       map[string]string
		flag      time.Duration // --retention, 0: not given
		retention time.Duration
		source    string
		cooldown  time.Duration
		cdSource  string
		grace     time.Duration
		gSource   string
	}{
		{name: "defaults", retention: 7 * 24 * time.Hour, source: "default",
			cooldown: 60 * time.Second, cdSource: "default", grace: 5 * time.Second, gSource: "default"},
		{name: "file", file: file, retention: 48 * time.Hour, source: "FILE:2",
			cooldown: 2 * time.Minute, cdSource: "FILE:5", grace: 7 * time.Second, gSource: "FILE:1"},
		{name: "env beats file", file: file,
			env:       map[string]string{daemon.EnvRetention: "24h", daemon.EnvBreakerCooldown: "1s"},
			retention: 24 * time.Hour, source: "env " + daemon.EnvRetention,
			cooldown: time.Second, cdSource: "env " + daemon.EnvBreakerCooldown, grace: 7 * time.Second, gSource: "FILE:1"},
		{name: "flag beats env and file", file: file, env: map[string]string{daemon.EnvRetention: "24h"},
			flag: time.Hour, retention: time.Hour, source: "flag --retention",
			cooldown: 2 * time.Minute, cdSource: "FILE:5", grace: 7 * time.Second, gSource: "FILE:1"},
		{name: "flag beats default", flag: 3 * time.Hour, retention: 3 * time.Hour, source: "flag --retention",
			cooldown: 60 * time.Second, cdSource: "default", grace: 5 * time.Second, gSource: "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{EnvConfig: filepath.Join(t.TempDir(), "missing.toml")}
			path := m[EnvConfig]
			if tc.file != "" {
				path = write(t, tc.file)
				m[EnvConfig] = path
			}
			for k, v := range tc.env {
				m[k] = v
			}
			e, err := Load(env(m))
			if err != nil {
				t.Fatal(err)
			}
			if e.Loaded != (tc.file != "") {
				t.Errorf("Loaded = %v", e.Loaded)
			}
			if tc.flag > 0 {
				e.Set("retention", "retention", func(e *Effective) { e.Settings.Retention = tc.flag })
			}
			fix := func(s string) string { return strings.Replace(s, "FILE", path, 1) }
			if e.Settings.Retention != tc.retention || e.Source("retention") != fix(tc.source) {
				t.Errorf("retention = %v from %q, want %v from %q", e.Settings.Retention, e.Source("retention"), tc.retention, fix(tc.source))
			}
			if e.Settings.Breaker.Cooldown != tc.cooldown || e.Source("breaker.cooldown") != fix(tc.cdSource) {
				t.Errorf("cooldown = %v from %q, want %v from %q", e.Settings.Breaker.Cooldown, e.Source("breaker.cooldown"), tc.cooldown, fix(tc.cdSource))
			}
			if e.Grace != tc.grace || e.Source("grace") != fix(tc.gSource) {
				t.Errorf("grace = %v from %q, want %v from %q", e.Grace, e.Source("grace"), tc.grace, fix(tc.gSource))
			}
		})
	}
}

func TestConfigPathLocations(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvConfig: "/x/c.toml", "XDG_CONFIG_HOME": "/xdg", "HOME": "/h"}, "/x/c.toml"},
		{map[string]string{"XDG_CONFIG_HOME": "/xdg", "HOME": "/h"}, "/xdg/supervisor/config.toml"},
		{map[string]string{"XDG_CONFIG_HOME": "relative", "HOME": "/h"}, "/h/.config/supervisor/config.toml"},
		{map[string]string{"HOME": "/h"}, "/h/.config/supervisor/config.toml"},
	} {
		if got, err := Path(env(tc.env)); err != nil || got != tc.want {
			t.Errorf("Path(%v) = %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}
	// A relative SUPERVISOR_CONFIG would name another file for the daemon,
	// which runs in /.
	if _, err := Path(env(map[string]string{EnvConfig: "c.toml", "HOME": "/h"})); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("relative %s: err %v, want one asking for an absolute path", EnvConfig, err)
	}
}

func TestConfigServerOverrides(t *testing.T) {
	path := write(t, `max_instances = 3

[servers.slow]
grace = "20s"
max_instances = 0

[servers."my server"]
health = "http://127.0.0.1:9/ok"

[servers]
inline = { health = "tcp", grace = "1s" }
shared = { share = true }
direct = { share = false }
kept = { flatten = false }
flat = { flatten = true }
capped = { memory_max = "512M", cpu_max = 1.5, pids_max = 64 }
lifted = { memory_max = "none", cpu_max = "none", pids_max = "max" }
`)
	e, err := Load(env(map[string]string{EnvConfig: path}))
	if err != nil {
		t.Fatal(err)
	}
	s := e.Settings
	slow := s.Servers["slow"]
	if slow.Grace != 20*time.Second || slow.MaxInstances == nil || *slow.MaxInstances != 0 || slow.Health != "" {
		t.Errorf("slow = %+v", slow)
	}
	if got := s.Servers["my server"].Health; got != "http://127.0.0.1:9/ok" {
		t.Errorf("my server health = %q", got)
	}
	if in := s.Servers["inline"]; in.Health != "tcp" || in.Grace != time.Second {
		t.Errorf("inline = %+v", in)
	}
	// share = false is kept apart from unset: it opts out of automatic
	// sharing (a server speaking the stateless revision).
	if sh, d, sl := s.Servers["shared"], s.Servers["direct"], s.Servers["slow"]; !sh.Share || sh.NoShare || d.Share || !d.NoShare || sl.Share || sl.NoShare {
		t.Errorf("share: shared %+v, direct %+v, unset %+v", sh, d, sl)
	}
	if l := s.Servers["capped"].Limits; l.MemoryMax != 512<<20 || l.CPUMax != 1.5 || l.PidsMax != 64 {
		t.Errorf("capped's limits = %+v, want 512M, 1.5 CPUs and 64 processes", l)
	}
	// none lifts a limit the config sets for all servers.
	all := registry.Limits{MemoryMax: 1 << 30, CPUMax: 2, PidsMax: 100}
	lifted := s.Servers["lifted"].Limits
	if got := daemon.EffectiveLimits(&lifted, all); got != nil {
		t.Errorf("lifted's effective limits %+v, want none", got)
	}
	capped := s.Servers["capped"].Limits
	if got := daemon.EffectiveLimits(&capped, all); got == nil || *got != capped {
		t.Errorf("capped's effective limits %+v, want its own %+v", got, capped)
	}
	if got := daemon.EffectiveLimits(nil, all); got == nil || *got != all {
		t.Errorf("an unnamed server's effective limits %+v, want those for all %+v", got, all)
	}
	if !s.Servers["kept"].NoFlatten || s.Servers["flat"].NoFlatten || s.Servers["slow"].NoFlatten {
		t.Errorf("flatten: kept %+v, flat %+v, unset %+v", s.Servers["kept"], s.Servers["flat"], s.Servers["slow"])
	}
	for key, line := range map[string]int{"servers.slow.grace": 4, "servers.slow.max_instances": 5, "servers.kept.flatten": 14,
		`servers."my server".health`: 8, "servers.inline.health": 11, "servers.inline.grace": 11, "max_instances": 1} {
		if got, want := e.Source(key), path+":"+itoa(line); got != want {
			t.Errorf("source of %s = %q, want %q", key, got, want)
		}
	}

	// What the daemon does with them: the request's own values win.
	var req = runReq("slow")
	s.ApplyRun("slow", &req)
	if req.GraceMS != 20000 || req.MaxInstances == nil || *req.MaxInstances != 0 {
		t.Errorf("run slow: grace %d ms, max %v", req.GraceMS, req.MaxInstances)
	}
	req = runReq("other")
	req.GraceMS = 1500
	s.ApplyRun("other", &req)
	if req.GraceMS != 1500 || req.MaxInstances == nil || *req.MaxInstances != 3 {
		t.Errorf("run other: grace %d ms, max %v", req.GraceMS, req.MaxInstances)
	}
	ens := ensureReq("my server", "")
	s.ApplyEnsure("my server", &ens)
	if ens.Health != "http://127.0.0.1:9/ok" {
		t.Errorf("ensure health = %q", ens.Health)
	}
	ens = ensureReq("my server", "none")
	s.ApplyEnsure("my server", &ens)
	if ens.Health != "none" {
		t.Errorf("ensure --health none became %q", ens.Health)
	}
	ens = ensureReq("plain", "")
	s.ApplyEnsure("plain", &ens)
	if ens.Health != "tcp" {
		t.Errorf("ensure default health = %q, want tcp", ens.Health)
	}
}

func TestConfigBadFile(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		why        string
	}{
		{"unknown key", "grace = \"1s\"\ngrase = \"2s\"\n", 2, `unknown key "grase"`},
		{"unknown nested key", "[breaker]\nthreshold = 2\ncooldwn = \"1s\"\n", 3, `unknown key "breaker.cooldwn"`},
		{"unknown server key", "[servers.x]\ngrace = \"1s\"\nhelth = \"tcp\"\n", 3, `unknown key "servers.x.helth"`},
		{"bad duration", "linger = \"30s\"\nretention = \"7d\"\n", 2, `retention: "7d": want a positive duration`},
		{"negative duration", "\n\neof_grace = \"-1s\"\n", 3, `eof_grace: "-1s"`},
		{"bad health", "[servers.web]\n\nhealth = \"https://x\"\n", 3, `servers.web.health: "https://x": want none, tcp or an http:// URL`},
		{"bad threshold", "[breaker]\nthreshold = 0\n", 2, "breaker.threshold: 0"},
		{"negative cap", "[servers.a]\nmax_instances = -1\n", 2, "servers.a.max_instances: -1"},
		{"wrong type", "grace = 5\n", 1, "grace"},
		{"bad server grace", "[servers.a]\ngrace = \"soon\"\n", 2, `servers.a.grace: "soon"`},
		{"ceiling below cooldown", "[breaker]\ncooldown = \"1h\"\nmax_cooldown = \"1m\"\n", 3, "max_cooldown 1m0s is below cooldown 1h0m0s"},
		{"syntax", "grace = \"1s\"\n[breaker\n", 2, ""},
		{"grace above the cap", "grace = \"1000000h\"\n", 1, `grace: "1000000h" is above the maximum grace of 5m0s`},
		{"eof grace above the cap", "\neof_grace = \"301s\"\n", 2, `eof_grace: "301s" is above the maximum grace of 5m0s`},
		{"server grace above the cap", "[servers.a]\ngrace = \"6m\"\n", 2, `servers.a.grace: "6m" is above the maximum grace`},
		{"bad memory_max", "memory_max = \"lots\"\n", 1, `memory_max: memory_max "lots": want bytes, a size such as 512M`},
		{"tiny memory_max", "[servers.a]\nmemory_max = 1000\n", 2, `servers.a.memory_max: memory_max "1000" is below 1M`},
		{"zero cpu_max", "\ncpu_max = 0\n", 2, `cpu_max: cpu_max "0" is below 0.01 CPU`},
		{"fractional pids_max", "[servers.a]\npids_max = 1.5\n", 2, `servers.a.pids_max: pids_max "1.5": want a whole number`},
		{"wrong limit type", "pids_max = true\n", 1, `pids_max: true: want a string`},
		{"none for all", "\nmemory_max = \"none\"\n", 2, `memory_max: "none" lifts a limit for one server: it goes under [servers.NAME]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := write(t, tc.text)
			_, err := Load(env(map[string]string{EnvConfig: path}))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *config.Error", err)
			}
			prefix := path + ":" + itoa(tc.line) + ": "
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("err = %q, want %q...%q", err, prefix, tc.why)
			}
		})
	}
}

func TestConfigExampleLoads(t *testing.T) {
	path, err := filepath.Abs("../configs/config.toml")
	if err != nil {
		t.Fatal(err)
	}
	e, err := Load(env(map[string]string{EnvConfig: path}))
	if err != nil {
		t.Fatal(err)
	}
	// The example documents the defaults: apart from its sources, it
	// changes nothing but the per-server overrides.
	d := Defaults()
	want, got := d.Entries(), e.Entries()
	n := 0
	for _, g := range got {
		if strings.HasPrefix(g.Key, "servers.") {
			continue
		}
		if n >= len(want) || want[n].Key != g.Key || want[n].Value != g.Value {
			t.Errorf("example %s = %s, default %+v", g.Key, g.Value, want[min(n, len(want)-1)])
		}
		if g.Key != "log_max_mb" && !strings.HasPrefix(g.Source, path+":") {
			t.Errorf("example does not set %s (source %s)", g.Key, g.Source)
		}
		n++
	}
	if len(e.Settings.Servers) == 0 {
		t.Error("example has no per-server overrides")
	}
}

// TestConfigEnvCooldownAboveCeiling: a cooldown from the environment is
// held against the ceiling too.
func TestConfigEnvCooldownAboveCeiling(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(file, []byte("[breaker]\nmax_cooldown = \"10m\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(env(map[string]string{EnvConfig: file, "HOME": dir, "SUPERVISOR_BREAKER_COOLDOWN": "1h"}))
	if err == nil || !strings.Contains(err.Error(), "max_cooldown") {
		t.Errorf("err %v, want the ceiling named", err)
	}
}
