// Package config owns the supervisor's config file: reading it, validating
// it (with file:line errors), and merging it with the environment, flags
// and built-in defaults into the effective configuration the daemon runs
// with and `supervisor config show` prints.
//
// The file is $SUPERVISOR_CONFIG, else $XDG_CONFIG_HOME/supervisor/config.toml,
// else ~/.config/supervisor/config.toml; a missing file is no error, but
// a missing $SUPERVISOR_CONFIG draws a warning (Effective.Warnings).
// `supervisor config init` writes a starter (Starter, WriteStarter).
//
// A bad file is refused with every problem at once, in file order, each
// as FILE:LINE: why (Errors); an unknown key names the key it most likely
// meant.
//
// Precedence, lowest first: built-in defaults, the file, the environment
// overrides (SUPERVISOR_RETENTION, SUPERVISOR_BREAKER_COOLDOWN,
// SUPERVISOR_LOG_MAX_MB), then the daemon's flags. The environment ranks
// with the flags because it is how `supervisor daemon --retention` reaches
// an auto-started daemon.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn/health"
)

// EnvConfig names the config file instead of the default location.
const EnvConfig = "SUPERVISOR_CONFIG"

// Path returns the config file to read.
func Path(getenv func(string) string) (string, error) {
	if p := getenv(EnvConfig); p != "" {
		// An auto-started daemon runs in /, so a relative path would name
		// another file there than here.
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("%s=%q: want an absolute path", EnvConfig, p)
		}
		return p, nil
	}
	if x := getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "supervisor", "config.toml"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("find the config file: %w (set %s)", err, EnvConfig)
		}
	}
	return filepath.Join(home, ".config", "supervisor", "config.toml"), nil
}

// Entry is one effective value and where it came from: "default",
// "FILE:LINE", "env NAME" or "flag --NAME".
type Entry struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// Effective is the merged configuration.
type Effective struct {
	File     string // the config file consulted
	Loaded   bool   // it exists and was read
	Grace    time.Duration
	EOFGrace time.Duration
	Settings settings.Daemon
	// Warnings are things the user should hear about although the
	// configuration is usable, each a sentence; WriteWarnings prints them.
	Warnings []string
	sources  map[string]string
}

// Error is a config file problem at a line (0: the file as a whole).
type Error struct {
	File string
	Line int
	Why  string
	off  int // the key's byte offset: orders the problems of one line
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Why)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Why)
}

// Load reads the config file named by the environment (missing: defaults
// only) and then applies the environment overrides. A file it refuses
// for what it says is an Errors: every problem, in file order.
func Load(getenv func(string) string) (*Effective, error) {
	path, err := Path(getenv)
	if err != nil {
		return nil, err
	}
	e := Defaults()
	e.File = path
	src, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// The default location may well not exist; a file named on
		// purpose should, and a typo in it would otherwise silently run
		// everything on the defaults.
		if getenv(EnvConfig) != "" {
			e.Warnings = append(e.Warnings, missingWarning(path))
		}
	case err != nil:
		return nil, &Error{File: path, Why: err.Error()}
	default:
		e.Loaded = true
		if err := e.apply(path, src); err != nil {
			return nil, err
		}
	}
	if err := e.ApplyEnv(getenv); err != nil {
		return nil, err
	}
	return e, nil
}

// WriteWarnings writes e's warnings to w, one line each, as
// "supervisor: warning: ...". A command that loads the config calls it
// once, right after Load (a daemon not on every reload).
func (e *Effective) WriteWarnings(w io.Writer) {
	for _, x := range e.Warnings {
		fmt.Fprintf(w, "supervisor: warning: %s\n", x)
	}
}

// missingWarning is the warning for a $SUPERVISOR_CONFIG naming path,
// which does not exist.
func missingWarning(path string) string {
	return fmt.Sprintf("%s names %s, which does not exist: using the defaults", EnvConfig, path)
}

// Defaults returns the built-in configuration.
func Defaults() *Effective {
	return &Effective{Grace: shutdown.DefaultGrace, EOFGrace: shutdown.DefaultEOFGrace,
		Settings: settings.Defaults(), sources: map[string]string{}}
}

// ApplyEnv applies the environment overrides, recording their sources.
func (e *Effective) ApplyEnv(getenv func(string) string) error {
	if err := e.Settings.ApplyEnv(getenv); err != nil {
		return err
	}
	for key, name := range map[string]string{"retention": settings.EnvRetention,
		"breaker.cooldown": settings.EnvBreakerCooldown, "log_max_mb": settings.EnvLogMaxMB} {
		if getenv(name) != "" {
			e.sources[key] = "env " + name
		}
	}
	// The ceiling check again, now that the environment may have moved the
	// cooldown: a cooldown above its ceiling would shrink as it doubles.
	if b := e.Settings.Breaker; b.Ceiling < b.Cooldown {
		return fmt.Errorf("%s=%v is above breaker.max_cooldown %v (%s): raise max_cooldown or lower the cooldown",
			settings.EnvBreakerCooldown, b.Cooldown, b.Ceiling, e.Source("breaker.max_cooldown"))
	}
	return nil
}

// Set overrides one value from a flag: set changes it, key names it and
// flag is the flag's name without dashes.
func (e *Effective) Set(key, flag string, set func(*Effective)) {
	set(e)
	e.sources[key] = "flag --" + flag
}

// Source says where key's value came from.
func (e *Effective) Source(key string) string {
	if s, ok := e.sources[key]; ok {
		return s
	}
	return "default"
}

// Entries lists every effective value with its source, in file order.
func (e *Effective) Entries() []Entry {
	s := e.Settings
	maxInst := 1
	if s.MaxInstances != nil {
		maxInst = *s.MaxInstances
	}
	kv := [][2]string{
		{"grace", e.Grace.String()},
		{"eof_grace", e.EOFGrace.String()},
		{"linger", s.Linger.String()},
		{"retention", s.Retention.String()},
		{"health_interval", s.Interval.String()},
		{"ready_timeout", s.ReadyTimeout.String()},
		{"max_instances", strconv.Itoa(maxInst)},
		{"volatile_env", strings.Join(s.VolatileEnv, ",")},
		{"log_max_mb", strconv.Itoa(s.LogMaxMB)},
		{"breaker.threshold", strconv.Itoa(s.Breaker.Threshold)},
		{"breaker.cooldown", s.Breaker.Cooldown.String()},
		{"breaker.max_cooldown", s.Breaker.Ceiling.String()},
		{"breaker.start_period", s.Breaker.StartPeriod.String()},
	}
	kv = append(kv, limitEntries("", s.Limits)...)
	kv = append(kv, sandboxEntries("", s.Sandbox, false)...)
	names := make([]string, 0, len(s.Servers))
	for n := range s.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o := s.Servers[n]
		p := "servers." + quoteKey(n) + "."
		if o.Grace > 0 {
			kv = append(kv, [2]string{p + "grace", o.Grace.String()})
		}
		if o.Health != "" {
			kv = append(kv, [2]string{p + "health", o.Health})
		}
		if o.MaxInstances != nil {
			kv = append(kv, [2]string{p + "max_instances", strconv.Itoa(*o.MaxInstances)})
		}
		if o.Share {
			kv = append(kv, [2]string{p + "share", "true"})
		}
		if o.Lazy {
			kv = append(kv, [2]string{p + "lazy", "true"})
		}
		if o.Idle > 0 {
			kv = append(kv, [2]string{p + "idle", o.Idle.String()})
		}
		if o.NoShare {
			kv = append(kv, [2]string{p + "share", "false"})
		}
		if o.NoFlatten {
			kv = append(kv, [2]string{p + "flatten", "false"})
		}
		kv = append(kv, limitEntries(p, o.Limits)...)
		kv = append(kv, sandboxEntries(p, o.Sandbox, o.NoSandbox)...)
	}
	out := make([]Entry, 0, len(kv))
	for _, x := range kv {
		out = append(out, Entry{Key: x[0], Value: x[1], Source: e.Source(x[0])})
	}
	return out
}

// limitEntries lists the limits l sets, under prefix p.
func limitEntries(p string, l api.Limits) [][2]string {
	var kv [][2]string
	if l.MemoryMax > 0 {
		kv = append(kv, [2]string{p + "memory_max", cgroup.FormatMemory(l.MemoryMax)})
	}
	switch {
	case l.CPUMax == cgroup.CPUNone:
		kv = append(kv, [2]string{p + "cpu_max", "none"})
	case l.CPUMax > 0:
		kv = append(kv, [2]string{p + "cpu_max", strconv.FormatFloat(l.CPUMax, 'g', -1, 64)})
	}
	switch {
	case l.PidsMax == cgroup.PidsNone:
		kv = append(kv, [2]string{p + "pids_max", "none"})
	case l.PidsMax > 0:
		kv = append(kv, [2]string{p + "pids_max", strconv.FormatInt(l.PidsMax, 10)})
	}
	return kv
}

// sandboxEntries lists the sandbox settings sp sets, under prefix p.
func sandboxEntries(p string, sp sandbox.Spec, off bool) [][2]string {
	var kv [][2]string
	switch {
	case off:
		kv = append(kv, [2]string{p + "sandbox", "false"})
	case sp.Enabled:
		kv = append(kv, [2]string{p + "sandbox", "true"})
	}
	for _, x := range []struct {
		key string
		v   []string
	}{{"allow_read", sp.Read}, {"allow_write", sp.Write}, {"allow_env", sp.Env}} {
		if len(x.v) > 0 {
			kv = append(kv, [2]string{p + x.key, strings.Join(x.v, ",")})
		}
	}
	if sp.Network != "" {
		kv = append(kv, [2]string{p + "network", sp.Network})
	}
	if sp.OpenFiles != 0 {
		kv = append(kv, [2]string{p + "open_files", strconv.Itoa(sp.OpenFiles)})
	}
	return kv
}

func quoteKey(k string) string {
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return strconv.Quote(k)
		}
	}
	if k == "" {
		return `""`
	}
	return k
}

// file is the config file's schema: decode reads it by its toml tags,
// and the starter (Starter) must name every key of it. Durations are
// strings ("5s").
type file struct {
	Grace          *duration `toml:"grace"`
	EOFGrace       *duration `toml:"eof_grace"`
	Linger         *duration `toml:"linger"`
	Retention      *duration `toml:"retention"`
	HealthInterval *duration `toml:"health_interval"`
	ReadyTimeout   *duration `toml:"ready_timeout"`
	MaxInstances   *int      `toml:"max_instances"`
	// VolatileEnv adds to broker.Volatile: environment variables left out
	// of a shared server's key (a trailing * matches a prefix).
	VolatileEnv []string          `toml:"volatile_env"`
	Breaker     breaker           `toml:"breaker"`
	Servers     map[string]server `toml:"servers"`
	limitKeys
	sandboxKeys
}

type breaker struct {
	Threshold   *int      `toml:"threshold"`
	Cooldown    *duration `toml:"cooldown"`
	MaxCooldown *duration `toml:"max_cooldown"`
	StartPeriod *duration `toml:"start_period"`
}

// limitKeys are memory_max, cpu_max and pids_max, at the top (every
// direct server) or under [servers.NAME]: a string ("512M") or a number.
type limitKeys struct {
	MemoryMax any `toml:"memory_max"`
	CPUMax    any `toml:"cpu_max"`
	PidsMax   any `toml:"pids_max"`
}

type server struct {
	Grace        *duration `toml:"grace"`
	Health       *string   `toml:"health"`
	MaxInstances *int      `toml:"max_instances"`
	Share        *bool     `toml:"share"`
	Lazy         *bool     `toml:"lazy"`
	Idle         *duration `toml:"idle"`
	Flatten      *bool     `toml:"flatten"`
	limitKeys
	sandboxKeys
}

// sandboxKeys are sandbox, allow_read, allow_write, allow_env and network,
// at the top (every server) or under [servers.NAME].
type sandboxKeys struct {
	Sandbox    *bool    `toml:"sandbox"`
	AllowRead  []string `toml:"allow_read"`
	AllowWrite []string `toml:"allow_write"`
	AllowEnv   []string `toml:"allow_env"`
	Network    *string  `toml:"network"`
	OpenFiles  *int     `toml:"open_files"`
}

// sandbox parses k into sp (and off, for a server's sandbox = false), each
// key under prefix pre ("" or "servers.NAME."), reporting every bad one.
func (e *Effective) sandbox(k sandboxKeys, pre string, sp *sandbox.Spec, off *bool, p *problems) {
	if k.Sandbox != nil {
		sp.Enabled = *k.Sandbox
		if off != nil {
			*off = !*k.Sandbox
		}
		e.sources[pre+"sandbox"] = p.at(pre + "sandbox")
	}
	for _, x := range []struct {
		key  string
		v    []string
		dst  *[]string
		spec func([]string) sandbox.Spec
	}{
		{"allow_read", k.AllowRead, &sp.Read, func(v []string) sandbox.Spec { return sandbox.Spec{Read: v} }},
		{"allow_write", k.AllowWrite, &sp.Write, func(v []string) sandbox.Spec { return sandbox.Spec{Write: v} }},
		{"allow_env", k.AllowEnv, &sp.Env, func(v []string) sandbox.Spec { return sandbox.Spec{Env: v} }},
	} {
		if x.v == nil {
			continue
		}
		if err := x.spec(x.v).Validate(); err != nil {
			p.add(pre+x.key, err.Error())
			continue
		}
		*x.dst = append([]string(nil), x.v...)
		e.sources[pre+x.key] = p.at(pre + x.key)
	}
	// A server's own rule asks for its sandbox, as its flags do (--network
	// implies --sandbox): a rule that confined nothing would be a silent
	// fallback. At the top, the rules are every sandboxed server's.
	rules := k.AllowRead != nil || k.AllowWrite != nil || k.AllowEnv != nil || k.Network != nil || k.OpenFiles != nil
	if off != nil && rules {
		switch {
		case k.Sandbox == nil:
			sp.Enabled = true
		case !*k.Sandbox:
			p.add(pre+"sandbox", "false with allow_read, allow_write, allow_env, network or open_files in the same section: drop one or the other")
		}
	}
	if k.OpenFiles != nil {
		if err := (sandbox.Spec{OpenFiles: *k.OpenFiles}).Validate(); err != nil {
			p.add(pre+"open_files", err.Error())
		} else {
			sp.OpenFiles = *k.OpenFiles
			e.sources[pre+"open_files"] = p.at(pre + "open_files")
		}
	}
	if k.Network != nil {
		if err := (sandbox.Spec{Network: *k.Network}).Validate(); err != nil {
			p.add(pre+"network", err.Error())
		} else if *k.Network == "" {
			p.add(pre+"network", `"": want none, all, or a list of host:port`)
		} else {
			sp.Network = *k.Network
			e.sources[pre+"network"] = p.at(pre + "network")
		}
	}
}

// limits parses k into l, each key under prefix pre ("" or
// "servers.NAME."), reporting every bad one.
func (e *Effective) limits(k limitKeys, pre string, l *api.Limits, p *problems) {
	for _, x := range []struct {
		key string
		v   any
		// parse sets the limit from s; none says s lifted it.
		parse func(s string) (set func(), none bool, err error)
	}{
		{"memory_max", k.MemoryMax, func(s string) (func(), bool, error) {
			v, err := cgroup.ParseMemoryMax(s)
			return func() { l.MemoryMax = v }, v == cgroup.MemoryNone, err
		}},
		{"cpu_max", k.CPUMax, func(s string) (func(), bool, error) {
			v, err := cgroup.ParseCPUMax(s)
			return func() { l.CPUMax = v }, v == cgroup.CPUNone, err
		}},
		{"pids_max", k.PidsMax, func(s string) (func(), bool, error) {
			v, err := cgroup.ParsePidsMax(s)
			return func() { l.PidsMax = v }, v == cgroup.PidsNone, err
		}},
	} {
		key := pre + x.key
		var s string
		switch v := x.v.(type) {
		case nil:
			continue
		case string:
			s = v
		case int64:
			s = strconv.FormatInt(v, 10)
		case float64:
			s = strconv.FormatFloat(v, 'g', -1, 64)
		default:
			p.add(key, fmt.Sprintf("%v: want a string such as \"512M\" or a number", v))
			continue
		}
		set, none, err := x.parse(s)
		switch {
		case err != nil:
			p.add(key, err.Error())
		case pre == "" && none:
			p.add(key, fmt.Sprintf("%q lifts a limit for one server: it goes under [servers.NAME]; leave the key out for no limit", s))
		default:
			set()
			e.sources[key] = p.at(key)
		}
	}
}

// apply decodes src and merges it over e. It reports every problem of
// the file at once, in file order (Errors): a user fixing a file one
// error per daemon start would need as many starts as mistakes.
func (e *Effective) apply(path string, src []byte) error {
	var raw map[string]any
	if err := toml.Unmarshal(src, &raw); err != nil {
		// A syntax error ends the parse: there is no more to report.
		return Errors{decodeError(path, err)}
	}
	lines, offs, err := keyLines(src)
	if err != nil {
		return Errors{decodeError(path, err)}
	}
	p := &problems{path: path, lines: lines, offs: offs}
	var f file
	p.decode(reflect.ValueOf(&f).Elem(), raw, nil)

	// dur sets dst from v and says whether v was good (or absent).
	dur := func(key string, v *duration, dst *time.Duration) bool {
		if v == nil {
			return true
		}
		d, err := time.ParseDuration(string(*v))
		if err != nil || d <= 0 {
			p.add(key, fmt.Sprintf("%q: want a positive duration such as 5s, 30m or 168h (days are not a unit)", *v))
			return false
		}
		if graceKey(key) && d > shutdown.MaxGrace {
			p.add(key, fmt.Sprintf("%q is above the maximum grace of %v: a stop must end in bounded time", *v, shutdown.MaxGrace))
			return false
		}
		*dst = d
		e.sources[key] = p.at(key)
		return true
	}
	s := &e.Settings
	e.limits(f.limitKeys, "", &s.Limits, p)
	e.sandbox(f.sandboxKeys, "", &s.Sandbox, nil, p)
	breakerOK := true
	for _, d := range []struct {
		key string
		v   *duration
		dst *time.Duration
	}{
		{"grace", f.Grace, &e.Grace},
		{"eof_grace", f.EOFGrace, &e.EOFGrace},
		{"linger", f.Linger, &s.Linger},
		{"retention", f.Retention, &s.Retention},
		{"health_interval", f.HealthInterval, &s.Interval},
		{"ready_timeout", f.ReadyTimeout, &s.ReadyTimeout},
		{"breaker.cooldown", f.Breaker.Cooldown, &s.Breaker.Cooldown},
		{"breaker.max_cooldown", f.Breaker.MaxCooldown, &s.Breaker.Ceiling},
		{"breaker.start_period", f.Breaker.StartPeriod, &s.Breaker.StartPeriod},
	} {
		if !dur(d.key, d.v, d.dst) && strings.HasPrefix(d.key, "breaker.") {
			breakerOK = false
		}
	}
	if f.HealthInterval != nil && s.Interval < 10*time.Millisecond {
		p.add("health_interval", "at least 10ms (health checks are not free)")
	}
	if f.MaxInstances != nil {
		if n := *f.MaxInstances; n < 0 {
			p.add("max_instances", fmt.Sprintf("%d: want 0 (no cap) or more", n))
		} else {
			s.MaxInstances = &n
			e.sources["max_instances"] = p.at("max_instances")
		}
	}
	if f.VolatileEnv != nil {
		good := true
		for _, v := range f.VolatileEnv {
			if v == "" || strings.ContainsAny(v, "= ") || strings.Contains(strings.TrimSuffix(v, "*"), "*") {
				p.add("volatile_env", fmt.Sprintf("%q: want a variable name, or a prefix ending in *", v))
				good = false
			}
		}
		if good {
			s.VolatileEnv = append([]string(nil), f.VolatileEnv...)
			e.sources["volatile_env"] = p.at("volatile_env")
		}
	}
	if t := f.Breaker.Threshold; t != nil {
		if *t <= 0 {
			p.add("breaker.threshold", fmt.Sprintf("%d: want 1 or more consecutive failures", *t))
		} else {
			s.Breaker.Threshold = *t
			e.sources["breaker.threshold"] = p.at("breaker.threshold")
		}
	}
	// Only between two good values: against a bad one's default it would
	// blame a line that is fine.
	if breakerOK && s.Breaker.Ceiling < s.Breaker.Cooldown {
		key := "breaker.max_cooldown"
		if f.Breaker.MaxCooldown == nil {
			key = "breaker.cooldown"
		}
		p.add(key, fmt.Sprintf("max_cooldown %v is below cooldown %v", s.Breaker.Ceiling, s.Breaker.Cooldown))
	}
	names := make([]string, 0, len(f.Servers))
	for n := range f.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		sv := f.Servers[name]
		pre := "servers." + quoteKey(name)
		if name == "" {
			p.add(pre, "a server name must not be empty")
			continue
		}
		var o settings.Server
		dur(pre+".grace", sv.Grace, &o.Grace)
		if sv.Health != nil {
			if _, err := health.Parse(*sv.Health); err != nil || *sv.Health == "" {
				p.add(pre+".health", fmt.Sprintf("%q: want none, tcp or an http:// URL", *sv.Health))
			} else {
				o.Health = *sv.Health
				e.sources[pre+".health"] = p.at(pre + ".health")
			}
		}
		if sv.MaxInstances != nil {
			if n := *sv.MaxInstances; n < 0 {
				p.add(pre+".max_instances", fmt.Sprintf("%d: want 0 (no cap) or more", n))
			} else {
				o.MaxInstances = &n
				e.sources[pre+".max_instances"] = p.at(pre + ".max_instances")
			}
		}
		if sv.Share != nil {
			o.Share, o.NoShare = *sv.Share, !*sv.Share
			e.sources[pre+".share"] = p.at(pre + ".share")
		}
		if sv.Lazy != nil {
			o.Lazy = *sv.Lazy
			e.sources[pre+".lazy"] = p.at(pre + ".lazy")
		}
		dur(pre+".idle", sv.Idle, &o.Idle)
		if sv.Flatten != nil {
			o.NoFlatten = !*sv.Flatten
			e.sources[pre+".flatten"] = p.at(pre + ".flatten")
		}
		e.limits(sv.limitKeys, pre+".", &o.Limits, p)
		e.sandbox(sv.sandboxKeys, pre+".", &o.Sandbox, &o.NoSandbox, p)
		if s.Servers == nil {
			s.Servers = map[string]settings.Server{}
		}
		s.Servers[name] = o
	}
	return p.err()
}

// graceKey says key is a grace, capped at shutdown.MaxGrace: grace,
// eof_grace and servers.NAME.grace.
func graceKey(key string) bool {
	return key == "grace" || key == "eof_grace" || strings.HasPrefix(key, "servers.") && strings.HasSuffix(key, ".grace")
}

// decodeError turns go-toml's syntax errors into file:line ones.
func decodeError(path string, err error) *Error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		why := strings.TrimPrefix(de.Error(), "toml: ")
		if k := de.Key(); len(k) > 0 {
			why = strings.Join(k, ".") + ": " + why
		}
		return &Error{File: path, Line: row, Why: why}
	}
	var pe *unstable.ParserError
	if errors.As(err, &pe) {
		return &Error{File: path, Why: pe.Message}
	}
	return &Error{File: path, Why: err.Error()}
}

// keyLines maps every dotted key path (servers.NAME.grace, with NAME as
// quoteKey writes it) to the line it is written on, and to its byte
// offset (which orders the keys of one line).
func keyLines(src []byte) (lines, offs map[string]int, err error) {
	lines, offs = map[string]int{}, map[string]int{}
	lineOf := func(off uint32) int { return 1 + bytes.Count(src[:off], []byte("\n")) }
	var p unstable.Parser
	p.Reset(src)
	var table []string
	var walk func(prefix []string, kv *unstable.Node)
	walk = func(prefix []string, kv *unstable.Node) {
		var line, off int
		if it := kv.Key(); it.Next() {
			line, off = lineOf(it.Node().Raw.Offset), int(it.Node().Raw.Offset)
		}
		key := append(append([]string(nil), prefix...), parts(kv.Key())...)
		for i := range key {
			k := dotted(key[:i+1])
			if _, ok := lines[k]; !ok {
				lines[k], offs[k] = line, off
			}
		}
		if v := kv.Value(); v.Kind == unstable.InlineTable {
			c := v.Children()
			for c.Next() {
				if n := c.Node(); n.Kind == unstable.KeyValue {
					walk(key, n)
				}
			}
		}
	}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = parts(e.Key())
			it := e.Key()
			if it.Next() {
				// Every prefix: [server.a] is where an unknown "server" is.
				for i := range table {
					k := dotted(table[:i+1])
					if _, ok := lines[k]; !ok {
						lines[k], offs[k] = lineOf(it.Node().Raw.Offset), int(it.Node().Raw.Offset)
					}
				}
			}
		case unstable.KeyValue:
			walk(table, e)
		}
	}
	return lines, offs, p.Error()
}

func parts(it unstable.Iterator) []string {
	var out []string
	for it.Next() {
		out = append(out, string(it.Node().Data))
	}
	return out
}

func dotted(key []string) string {
	q := make([]string, len(key))
	for i, k := range key {
		q[i] = k
		if i > 0 || k != "servers" {
			q[i] = quoteKey(k)
		}
	}
	return strings.Join(q, ".")
}
