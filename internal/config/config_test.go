package config

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/settings"
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
			env:       map[string]string{settings.EnvRetention: "24h", settings.EnvBreakerCooldown: "1s"},
			retention: 24 * time.Hour, source: "env " + settings.EnvRetention,
			cooldown: time.Second, cdSource: "env " + settings.EnvBreakerCooldown, grace: 7 * time.Second, gSource: "FILE:1"},
		{name: "flag beats env and file", file: file, env: map[string]string{settings.EnvRetention: "24h"},
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
	all := api.Limits{MemoryMax: 1 << 30, CPUMax: 2, PidsMax: 100}
	lifted := s.Servers["lifted"].Limits
	if got := settings.EffectiveLimits(&lifted, all); got != nil {
		t.Errorf("lifted's effective limits %+v, want none", got)
	}
	capped := s.Servers["capped"].Limits
	if got := settings.EffectiveLimits(&capped, all); got == nil || *got != capped {
		t.Errorf("capped's effective limits %+v, want its own %+v", got, capped)
	}
	if got := settings.EffectiveLimits(nil, all); got == nil || *got != all {
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
		{"bad network", "sandbox = true\nnetwork = \"some\"\n", 2, `network: network "some": want none, all, or a list of host:port`},
		{"network list without a port", "[servers.a]\nnetwork = \"api.github.com:443,example.com\"\n", 2, `servers.a.network: network "api.github.com:443,example.com": "example.com" has no port`},
		{"sandbox off with a rule", "[servers.a]\nsandbox = false\nnetwork = \"none\"\n", 2, `servers.a.sandbox: false with allow_read`},
		{"bad open_files", "[servers.a]\nopen_files = 3\n", 2, `servers.a.open_files: open_files 3: want 16 to`},
		{"empty network", "network = \"\"\n", 1, `network: "": want none, all`},
		{"bad allow_env", "[servers.a]\nallow_env = [\"A=B\"]\n", 2, `servers.a.allow_env: allow_env "A=B": want a variable name`},
		{"empty allow_read", "allow_read = [\"\"]\n", 1, `allow_read: an empty path`},
		{"sandbox not a bool", "sandbox = \"yes\"\n", 1, `sandbox`},
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
	path, err := filepath.Abs("../../configs/config.toml")
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

// TestConfigAllErrorsInFileOrder: a file is refused with every problem at
// once, in file order, each at its line; an unknown key names the key it
// most likely meant.
func TestConfigAllErrorsInFileOrder(t *testing.T) {
	const topHint = "is a top-level key: move it above the first [table] header"
	for _, tc := range []struct {
		name string
		text string
		want []string // LINE: why, in order
	}{
		{
			name: "unknown keys in every table",
			text: `retension = "1h"
Grace = "5s"
threshold = 3
colour = "red"

[breaker]
cooldwn = "1s"
grace = "2s"

[servers.web]
helth = "tcp"
linger = "1s"
LAZY = true

[servers]
x = { shar = true, flaten = false }

[server.a]
grace = "1s"
`,
			want: []string{
				`1: unknown key "retension"; did you mean retention?`,
				`2: unknown key "Grace"; did you mean grace?`,
				`3: unknown key "threshold"; threshold belongs under [breaker]`,
				`4: unknown key "colour"`,
				`7: unknown key "breaker.cooldwn"; did you mean cooldown?`,
				`8: unknown key "breaker.grace"; grace ` + topHint,
				`11: unknown key "servers.web.helth"; did you mean health?`,
				`12: unknown key "servers.web.linger"; linger ` + topHint,
				`13: unknown key "servers.web.LAZY"; did you mean lazy?`,
				`16: unknown key "servers.x.shar"; did you mean share?`,
				`16: unknown key "servers.x.flaten"; did you mean flatten?`,
				`18: unknown key "server"; did you mean servers?`,
			},
		},
		{
			name: "wrong types and bad values among unknown keys",
			text: `linger = 5
retention = "7d"
max_instances = -1
volatile_env = ["A=B", "C D"]
memory_max = "none"
health = "tcp"

[breaker]
threshold = 0
cooldown = "1h"
max_cooldown = "1m"

[servers.a]
grace = "6m"
health = "https://x"
memory_max = "lots"
lazy = "yes"
share = true

[servers]
grace = "1s"
`,
			want: []string{
				`1: linger: cannot decode TOML integer into a string (durations are strings such as "5s")`,
				`2: retention: "7d": want a positive duration such as 5s, 30m or 168h (days are not a unit)`,
				`3: max_instances: -1: want 0 (no cap) or more`,
				`4: volatile_env: "A=B": want a variable name, or a prefix ending in *`,
				`4: volatile_env: "C D": want a variable name, or a prefix ending in *`,
				`5: memory_max: "none" lifts a limit for one server: it goes under [servers.NAME]; leave the key out for no limit`,
				`6: unknown key "health"; health belongs under [servers.NAME]`,
				`9: breaker.threshold: 0: want 1 or more consecutive failures`,
				`11: breaker.max_cooldown: max_cooldown 1m0s is below cooldown 1h0m0s`,
				`14: servers.a.grace: "6m" is above the maximum grace of 5m0s: a stop must end in bounded time`,
				`15: servers.a.health: "https://x": want none, tcp or an http:// URL`,
				`16: servers.a.memory_max: memory_max "lots": want bytes, a size such as 512M or 2G, or none`,
				`17: servers.a.lazy: cannot decode TOML string into a boolean (true or false)`,
				`21: servers.grace: cannot decode TOML string into a table (a server's keys go under [servers.NAME]; "grace" is read as a server name)`,
			},
		},
		{
			// A bad cooldown is not held against the ceiling as well: its
			// default would blame a line that is fine.
			name: "one problem, one error",
			text: "[breaker]\ncooldown = \"soon\"\nmax_cooldown = \"30s\"\n",
			want: []string{`2: breaker.cooldown: "soon": want a positive duration such as 5s, 30m or 168h (days are not a unit)`},
		},
		{
			name: "a table where a value goes",
			text: "grace = \"1s\"\n\n[breaker.x]\ny = 1\n\n[retention]\n",
			want: []string{
				`3: unknown key "breaker.x"`,
				`6: retention: cannot decode TOML table into a string (durations are strings such as "5s")`,
			},
		},
		{
			name: "a syntax error ends the parse",
			text: "grase = 1\n[breaker\n",
			want: []string{`2: expected ']' to close table name`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := write(t, tc.text)
			_, err := Load(env(map[string]string{EnvConfig: path}))
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("err = %v, want a config.Errors", err)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce != es[0] {
				t.Errorf("errors.As finds %v, want the first problem %v", ce, es[0])
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%s", len(got), len(tc.want), err)
			}
			for i := range min(len(got), len(tc.want)) {
				if want := path + ":" + tc.want[i]; got[i] != want {
					t.Errorf("problem %d:\n got %s\nwant %s", i+1, got[i], want)
				}
			}
		})
	}
}

func TestConfigClosestKey(t *testing.T) {
	keys := []string{"grace", "eof_grace", "linger", "retention", "max_instances"}
	for _, tc := range []struct{ in, want string }{
		{"grace", "grace"},
		{"GRACE", "grace"},
		{"grase", "grace"},
		{"grac", "grace"},
		{"eofgrace", "eof_grace"},
		{"retentoin", "retention"}, // a transposition is two edits
		{"Max_Instance", "max_instances"},
		{"gr", ""},     // three edits from grace
		{"colour", ""}, // nothing near
	} {
		if got := closest(tc.in, keys); got != tc.want {
			t.Errorf("closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestConfigMissingNamedFileWarns: a $SUPERVISOR_CONFIG naming no file is
// the defaults, with a warning for the user; the default location missing
// is no news.
func TestConfigMissingNamedFileWarns(t *testing.T) {
	home := t.TempDir()
	missing := filepath.Join(home, "nope.toml")
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"named and missing", map[string]string{EnvConfig: missing, "HOME": home},
			[]string{"SUPERVISOR_CONFIG names " + missing + ", which does not exist: using the defaults"}},
		{"named and there", map[string]string{EnvConfig: write(t, "grace = \"2s\"\n"), "HOME": home}, nil},
		{"default location missing", map[string]string{"HOME": home}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Load(env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(e.Warnings, tc.want) {
				t.Errorf("warnings %q, want %q", e.Warnings, tc.want)
			}
			var b strings.Builder
			e.WriteWarnings(&b)
			want := ""
			for _, w := range tc.want {
				want += "supervisor: warning: " + w + "\n"
			}
			if b.String() != want {
				t.Errorf("WriteWarnings wrote %q, want %q", b.String(), want)
			}
		})
	}
}

// TestStarterNamesEveryKey: the starter documents exactly the keys the
// file takes (a new key in the schema must be added to keyDocs), and the
// ones configs/config.toml, the example, documents.
func TestStarterNamesEveryKey(t *testing.T) {
	var schema []string
	for _, k := range topKeys {
		switch k {
		case "breaker":
			for _, b := range breakerKeys {
				schema = append(schema, "breaker."+b)
			}
		case "servers":
			for _, s := range serverKeys {
				schema = append(schema, "servers.NAME."+s)
			}
		default:
			schema = append(schema, k)
		}
	}
	var documented []string
	for _, k := range keyDocs {
		documented = append(documented, k.key)
		if k.doc == "" {
			t.Errorf("keyDocs: %s says nothing on what it does", k.key)
		}
	}
	if a, b := slices.Sorted(slices.Values(schema)), slices.Sorted(slices.Values(documented)); !slices.Equal(a, b) {
		t.Errorf("keyDocs names %v,\nthe schema has %v", b, a)
	}

	example, err := os.ReadFile("../../configs/config.toml")
	if err != nil {
		t.Fatal(err)
	}
	// Every key the example sets is one the starter names...
	lines, _, err := keyLines(example)
	if err != nil {
		t.Fatal(err)
	}
	for k := range lines {
		parts := strings.Split(k, ".")
		if len(parts) == 3 && parts[0] == "servers" {
			k = "servers.NAME." + parts[2]
		}
		if len(parts) > 1 && !slices.Contains(documented, k) && k != "servers."+parts[1] {
			t.Errorf("configs/config.toml sets %s, which the starter does not name", k)
		}
	}
	// ...and every key the starter names, the example mentions (some
	// only in a comment, as the starter does).
	for _, k := range keyDocs {
		leaf := k.key[strings.LastIndexByte(k.key, '.')+1:]
		if !strings.Contains(string(example), "\n"+leaf+" = ") && !strings.Contains(string(example), "# "+leaf+" = ") {
			t.Errorf("configs/config.toml does not document %s", k.key)
		}
	}
}

// TestStarterChangesNothing: as written, the starter is a valid file
// that leaves every value at its default; with every setting
// uncommented, the values it shows are the defaults indeed (those of the
// keys with a default), and every example is valid.
func TestStarterChangesNothing(t *testing.T) {
	defaults := Defaults().Entries()
	t.Run("as written", func(t *testing.T) {
		path := write(t, Starter())
		e, err := Load(env(map[string]string{EnvConfig: path}))
		if err != nil {
			t.Fatal(err)
		}
		if !e.Loaded {
			t.Error("the starter was not read")
		}
		if got := e.Entries(); !slices.Equal(got, defaults) {
			t.Errorf("the starter changes the configuration:\n got %v\nwant %v", got, defaults)
		}
	})
	t.Run("uncommented", func(t *testing.T) {
		var b strings.Builder
		settings := 0
		for _, line := range strings.SplitAfter(Starter(), "\n") {
			// "#key = value" and "#[table]" are settings; "# text" is prose.
			if len(line) > 1 && line[0] == '#' && line[1] != ' ' && line[1] != '\n' {
				line = line[1:]
				settings++
			}
			b.WriteString(line)
		}
		if settings != len(keyDocs)+len(tableIntros) {
			t.Errorf("%d settings, want one per key and table (%d)", settings, len(keyDocs)+len(tableIntros))
		}
		path := write(t, b.String())
		e, err := Load(env(map[string]string{EnvConfig: path}))
		if err != nil {
			t.Fatalf("the starter uncommented: %v\n%s", err, b.String())
		}
		got := map[string]Entry{}
		for _, x := range e.Entries() {
			got[x.Key] = x
		}
		for _, k := range keyDocs {
			x, ok := got[k.key]
			if !ok || !strings.HasPrefix(x.Source, path+":") {
				t.Errorf("uncommented, %s is not set from the file: %+v", k.key, x)
			}
		}
		for _, d := range defaults {
			if x := got[d.Key]; x.Value != d.Value && !hasExample(d.Key) {
				t.Errorf("the starter shows %s = %s, the default is %s", d.Key, x.Value, d.Value)
			}
		}
	})
}

func hasExample(key string) bool {
	i := slices.IndexFunc(keyDocs, func(k keyDoc) bool { return k.key == key })
	return i >= 0 && keyDocs[i].example != ""
}

func TestWriteStarter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string) // what is there before
		force bool
		// want: the error (fs.ErrExist), else the file written (relative
		// to the directory) and the old content kept as a backup, if any.
		wantErr    error
		wantFile   string
		wantBackup string
		newDir     bool // the directory is created (0700; one there is left alone)
		keepsLink  bool // path stays a symlink
	}{
		{name: "new, with its directory", wantFile: "sub/config.toml", newDir: true},
		{name: "existing", setup: writeOld, wantErr: fs.ErrExist},
		{name: "existing, forced", setup: writeOld, force: true, wantFile: "sub/config.toml", wantBackup: "old = 1\n"},
		{name: "a link, forced: written through", force: true, wantFile: "dotfiles/config.toml", wantBackup: "old = 1\n", keepsLink: true,
			setup: func(t *testing.T, path string) {
				target := filepath.Join(filepath.Dir(filepath.Dir(path)), "dotfiles", "config.toml")
				writeOld(t, target)
				os.MkdirAll(filepath.Dir(path), 0o700)
				if err := os.Symlink(target, path); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a dangling link, forced", force: true, wantFile: "sub/config.toml",
			setup: func(t *testing.T, path string) {
				os.MkdirAll(filepath.Dir(path), 0o700)
				if err := os.Symlink("/nonexistent/config.toml", path); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "sub", "config.toml")
			if tc.setup != nil {
				tc.setup(t, path)
			}
			before, _ := os.ReadFile(path)
			written, backup, err := WriteStarter(path, tc.force)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want %v naming %s", err, tc.wantErr, path)
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
					t.Errorf("the refused file changed: %q, was %q", after, before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(dir, tc.wantFile)
			if written != want {
				t.Errorf("wrote %s, want %s", written, want)
			}
			if got, _ := os.ReadFile(path); string(got) != Starter() {
				t.Errorf("%s is not the starter: %q", path, got)
			}
			modes := map[string]os.FileMode{want: 0o600}
			if tc.newDir {
				modes[filepath.Dir(want)] = 0o700 | os.ModeDir
			}
			for p, mode := range modes {
				if st, err := os.Stat(p); err != nil {
					t.Error(err)
				} else if st.Mode() != mode {
					t.Errorf("%s: mode %v, want %v", p, st.Mode(), mode)
				}
			}
			if st, err := os.Lstat(path); err != nil || (st.Mode()&os.ModeSymlink != 0) != tc.keepsLink {
				t.Errorf("%s: %v %v, want a symlink: %v", path, st, err, tc.keepsLink)
			}
			if tc.wantBackup == "" {
				if backup != "" {
					t.Errorf("backup %s, want none", backup)
				}
				return
			}
			if backup != want+".bak" {
				t.Errorf("backup %s, want %s", backup, want+".bak")
			}
			if got, _ := os.ReadFile(backup); string(got) != tc.wantBackup {
				t.Errorf("backup holds %q, want %q", got, tc.wantBackup)
			}
			// The old file's mode, not the new one's: it is the user's.
			if st, err := os.Stat(backup); err != nil {
				t.Error(err)
			} else if st.Mode() != 0o644 {
				t.Errorf("backup mode %v, want the old file's 0644", st.Mode())
			}
		})
	}
}

// writeOld writes a user's file at path, 0644 in a 0755 directory.
func writeOld(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("old = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
