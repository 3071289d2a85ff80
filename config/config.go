// Package config owns the supervisor's config file: reading it, validating
// it (with file:line errors), and merging it with the environment, flags
// and built-in defaults into the effective configuration the daemon runs
// with and `supervisor config show` prints.
//
// The file is $SUPERVISOR_CONFIG, else $XDG_CONFIG_HOME/supervisor/config.toml,
// else ~/.config/supervisor/config.toml; a missing file is no error.
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
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/seed-86a41135/supervisor/cgroup"
	"github.com/seed-86a41135/supervisor/daemon"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
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
	Settings daemon.Settings
	sources  map[string]string
}

// Error is a config file problem at a line (0: the file as a whole).
type Error struct {
	File string
	Line int
	Why  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Why)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Why)
}

// Load reads the config file named by the environment (missing: defaults
// only) and then applies the environment overrides.
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

// Defaults returns the built-in configuration.
func Defaults() *Effective {
	return &Effective{Grace: shutdown.DefaultGrace, EOFGrace: shutdown.DefaultEOFGrace,
		Settings: daemon.DefaultSettings(), sources: map[string]string{}}
}

// ApplyEnv applies the environment overrides, recording their sources.
func (e *Effective) ApplyEnv(getenv func(string) string) error {
	if err := e.Settings.ApplyEnv(getenv); err != nil {
		return err
	}
	for key, name := range map[string]string{"retention": daemon.EnvRetention,
		"breaker.cooldown": daemon.EnvBreakerCooldown, "log_max_mb": daemon.EnvLogMaxMB} {
		if getenv(name) != "" {
			e.sources[key] = "env " + name
		}
	}
	// The ceiling check again, now that the environment may have moved the
	// cooldown: a cooldown above its ceiling would shrink as it doubles.
	if b := e.Settings.Breaker; b.Ceiling < b.Cooldown {
		return fmt.Errorf("%s=%v is above breaker.max_cooldown %v (%s): raise max_cooldown or lower the cooldown",
			daemon.EnvBreakerCooldown, b.Cooldown, b.Ceiling, e.Source("breaker.max_cooldown"))
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
	}
	out := make([]Entry, 0, len(kv))
	for _, x := range kv {
		out = append(out, Entry{Key: x[0], Value: x[1], Source: e.Source(x[0])})
	}
	return out
}

// limitEntries lists the limits l sets, under prefix p.
func limitEntries(p string, l registry.Limits) [][2]string {
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

// file is the config file's schema. Durations are strings ("5s").
type file struct {
	Grace          *string `toml:"grace"`
	EOFGrace       *string `toml:"eof_grace"`
	Linger         *string `toml:"linger"`
	Retention      *string `toml:"retention"`
	HealthInterval *string `toml:"health_interval"`
	ReadyTimeout   *string `toml:"ready_timeout"`
	MaxInstances   *int    `toml:"max_instances"`
	// VolatileEnv adds to broker.Volatile: environment variables left out
	// of a shared server's key (a trailing * matches a prefix).
	VolatileEnv []string `toml:"volatile_env"`
	Breaker     struct {
		Threshold   *int    `toml:"threshold"`
		Cooldown    *string `toml:"cooldown"`
		MaxCooldown *string `toml:"max_cooldown"`
		StartPeriod *string `toml:"start_period"`
	} `toml:"breaker"`
	Servers map[string]server `toml:"servers"`
	limitKeys
}

// limitKeys are memory_max, cpu_max and pids_max, at the top (every
// direct server) or under [servers.NAME]: a string ("512M") or a number.
type limitKeys struct {
	MemoryMax any `toml:"memory_max"`
	CPUMax    any `toml:"cpu_max"`
	PidsMax   any `toml:"pids_max"`
}

type server struct {
	Grace        *string `toml:"grace"`
	Health       *string `toml:"health"`
	MaxInstances *int    `toml:"max_instances"`
	Share        *bool   `toml:"share"`
	Lazy         *bool   `toml:"lazy"`
	Idle         *string `toml:"idle"`
	Flatten      *bool   `toml:"flatten"`
	limitKeys
}

// limits parses k into l, each key under prefix p ("" or "servers.NAME.").
func (e *Effective) limits(k limitKeys, p string, l *registry.Limits, fail func(key, why string) error, at func(string) string) error {
	for _, x := range []struct {
		key   string
		v     any
		parse func(string) error
	}{
		{"memory_max", k.MemoryMax, func(s string) (err error) { l.MemoryMax, err = cgroup.ParseMemoryMax(s); return }},
		{"cpu_max", k.CPUMax, func(s string) (err error) { l.CPUMax, err = cgroup.ParseCPUMax(s); return }},
		{"pids_max", k.PidsMax, func(s string) (err error) { l.PidsMax, err = cgroup.ParsePidsMax(s); return }},
	} {
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
			return fail(p+x.key, fmt.Sprintf("%v: want a string such as \"512M\" or a number", v))
		}
		if err := x.parse(s); err != nil {
			return fail(p+x.key, err.Error())
		}
		if p == "" && (l.MemoryMax == cgroup.MemoryNone || l.CPUMax == cgroup.CPUNone || l.PidsMax == cgroup.PidsNone) {
			return fail(x.key, fmt.Sprintf("%q lifts a limit for one server: it goes under [servers.NAME]; leave the key out for no limit", s))
		}
		e.sources[p+x.key] = at(p + x.key)
	}
	return nil
}

// apply decodes src strictly and merges it over e.
func (e *Effective) apply(path string, src []byte) error {
	var f file
	dec := toml.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return decodeError(path, err)
	}
	lines, err := keyLines(src)
	if err != nil {
		return decodeError(path, err)
	}
	fail := func(key, why string) error {
		return &Error{File: path, Line: lines[key], Why: key + ": " + why}
	}
	at := func(key string) string { return fmt.Sprintf("%s:%d", path, lines[key]) }
	dur := func(key string, v *string, dst *time.Duration) error {
		if v == nil {
			return nil
		}
		d, err := time.ParseDuration(*v)
		if err != nil || d <= 0 {
			return fail(key, fmt.Sprintf("%q: want a positive duration such as 5s, 30m or 168h (days are not a unit)", *v))
		}
		if graceKey(key) && d > shutdown.MaxGrace {
			return fail(key, fmt.Sprintf("%q is above the maximum grace of %v: a stop must end in bounded time", *v, shutdown.MaxGrace))
		}
		*dst = d
		e.sources[key] = at(key)
		return nil
	}
	s := &e.Settings
	if err := e.limits(f.limitKeys, "", &s.Limits, fail, at); err != nil {
		return err
	}
	for _, d := range []struct {
		key string
		v   *string
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
		if err := dur(d.key, d.v, d.dst); err != nil {
			return err
		}
	}
	if f.HealthInterval != nil && s.Interval < 10*time.Millisecond {
		return fail("health_interval", "at least 10ms (health checks are not free)")
	}
	if f.MaxInstances != nil {
		if *f.MaxInstances < 0 {
			return fail("max_instances", fmt.Sprintf("%d: want 0 (no cap) or more", *f.MaxInstances))
		}
		n := *f.MaxInstances
		s.MaxInstances = &n
		e.sources["max_instances"] = at("max_instances")
	}
	if f.VolatileEnv != nil {
		for _, v := range f.VolatileEnv {
			if v == "" || strings.ContainsAny(v, "= ") || strings.Contains(strings.TrimSuffix(v, "*"), "*") {
				return fail("volatile_env", fmt.Sprintf("%q: want a variable name, or a prefix ending in *", v))
			}
		}
		s.VolatileEnv = append([]string(nil), f.VolatileEnv...)
		e.sources["volatile_env"] = at("volatile_env")
	}
	if t := f.Breaker.Threshold; t != nil {
		if *t <= 0 {
			return fail("breaker.threshold", fmt.Sprintf("%d: want 1 or more consecutive failures", *t))
		}
		s.Breaker.Threshold = *t
		e.sources["breaker.threshold"] = at("breaker.threshold")
	}
	if s.Breaker.Ceiling < s.Breaker.Cooldown {
		key := "breaker.max_cooldown"
		if f.Breaker.MaxCooldown == nil {
			key = "breaker.cooldown"
		}
		return fail(key, fmt.Sprintf("max_cooldown %v is below cooldown %v", s.Breaker.Ceiling, s.Breaker.Cooldown))
	}
	names := make([]string, 0, len(f.Servers))
	for n := range f.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		sv := f.Servers[name]
		p := "servers." + quoteKey(name)
		if name == "" {
			return fail(p, "a server name must not be empty")
		}
		var o daemon.ServerOverride
		if err := dur(p+".grace", sv.Grace, &o.Grace); err != nil {
			return err
		}
		if sv.Health != nil {
			if _, err := spawn.ParseHealth(*sv.Health); err != nil || *sv.Health == "" {
				return fail(p+".health", fmt.Sprintf("%q: want none, tcp or an http:// URL", *sv.Health))
			}
			o.Health = *sv.Health
			e.sources[p+".health"] = at(p + ".health")
		}
		if sv.MaxInstances != nil {
			if *sv.MaxInstances < 0 {
				return fail(p+".max_instances", fmt.Sprintf("%d: want 0 (no cap) or more", *sv.MaxInstances))
			}
			n := *sv.MaxInstances
			o.MaxInstances = &n
			e.sources[p+".max_instances"] = at(p + ".max_instances")
		}
		if sv.Share != nil {
			o.Share, o.NoShare = *sv.Share, !*sv.Share
			e.sources[p+".share"] = at(p + ".share")
		}
		if sv.Lazy != nil {
			o.Lazy = *sv.Lazy
			e.sources[p+".lazy"] = at(p + ".lazy")
		}
		if err := dur(p+".idle", sv.Idle, &o.Idle); err != nil {
			return err
		}
		if sv.Flatten != nil {
			o.NoFlatten = !*sv.Flatten
			e.sources[p+".flatten"] = at(p + ".flatten")
		}
		if err := e.limits(sv.limitKeys, p+".", &o.Limits, fail, at); err != nil {
			return err
		}
		if s.Servers == nil {
			s.Servers = map[string]daemon.ServerOverride{}
		}
		s.Servers[name] = o
	}
	return nil
}

// graceKey says key is a grace, capped at shutdown.MaxGrace: grace,
// eof_grace and servers.NAME.grace.
func graceKey(key string) bool {
	return key == "grace" || key == "eof_grace" || strings.HasPrefix(key, "servers.") && strings.HasSuffix(key, ".grace")
}

// decodeError turns go-toml's errors into file:line ones.
func decodeError(path string, err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) && len(sm.Errors) > 0 {
		de := sm.Errors[0]
		row, _ := de.Position()
		why := fmt.Sprintf("unknown key %q", strings.Join(de.Key(), "."))
		for i, more := range sm.Errors[1:] {
			r, _ := more.Position()
			sep := ", "
			if i == 0 {
				sep = "; also "
			}
			why += fmt.Sprintf("%s%q (line %d)", sep, strings.Join(more.Key(), "."), r)
		}
		return &Error{File: path, Line: row, Why: why}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		why := strings.TrimPrefix(de.Error(), "toml: ")
		// "cannot decode TOML integer into struct field config.file.Grace of type string"
		if i, j := strings.Index(why, " into struct field "), strings.LastIndex(why, " of type "); i >= 0 && j > i {
			why = why[:i] + " into a " + why[j+len(" of type "):]
			if strings.HasSuffix(why, "string") {
				why += ` (durations are strings such as "5s")`
			}
		}
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
// quoteKey writes it) to the line it is written on.
func keyLines(src []byte) (map[string]int, error) {
	lines := map[string]int{}
	lineOf := func(off uint32) int { return 1 + bytes.Count(src[:off], []byte("\n")) }
	var p unstable.Parser
	p.Reset(src)
	var table []string
	var walk func(prefix []string, kv *unstable.Node)
	walk = func(prefix []string, kv *unstable.Node) {
		var line int
		if it := kv.Key(); it.Next() {
			line = lineOf(it.Node().Raw.Offset)
		}
		key := append(append([]string(nil), prefix...), parts(kv.Key())...)
		for i := range key {
			k := dotted(key[:i+1])
			if _, ok := lines[k]; !ok {
				lines[k] = line
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
				k := dotted(table)
				if _, ok := lines[k]; !ok {
					lines[k] = lineOf(it.Node().Raw.Offset)
				}
			}
		case unstable.KeyValue:
			walk(table, e)
		}
	}
	return lines, p.Error()
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
