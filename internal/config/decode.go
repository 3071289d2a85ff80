package config

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// Errors is every problem of one config file, in file order. Load returns
// it for a file it refuses; errors.As finds its first *Error too.
type Errors []*Error

// Error puts each problem on a line of its own, FILE:LINE: why, as
// compilers do, so that all of them can be fixed in one edit.
func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap lets errors.As and errors.Is look at each problem.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// duration is a duration key's type in the schema: a string such as "5s"
// that must parse. Its own type tells a wrong-type error to say so.
type duration string

// problems collects a file's errors, so that one read reports them all
// instead of the first.
type problems struct {
	path  string
	lines map[string]int // dotted key → line (keyLines)
	offs  map[string]int // dotted key → byte offset
	errs  Errors
}

// add reports why key is wrong, at key's line.
func (p *problems) add(key, why string) {
	p.errs = append(p.errs, &Error{File: p.path, Line: p.lines[key], Why: key + ": " + why, off: p.offs[key]})
}

// at is key's source: FILE:LINE.
func (p *problems) at(key string) string { return fmt.Sprintf("%s:%d", p.path, p.lines[key]) }

// err returns the problems in file order, nil when there are none.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	// By line, then by column within a line (an inline table); stable, so
	// that two problems of one key keep the order they were found in.
	sort.SliceStable(p.errs, func(i, j int) bool {
		a, b := p.errs[i], p.errs[j]
		return a.Line < b.Line || a.Line == b.Line && a.off < b.off
	})
	return p.errs
}

// decode fills v, a struct of the schema, from the TOML table m found at
// key. It never stops at a problem: every unknown key and every value of
// the wrong type is reported, the rest is decoded. (go-toml's strict
// decoder stops at the first wrong type, and lists unknown keys only when
// there is none.)
func (p *problems) decode(v reflect.Value, m map[string]any, key []string) {
	fields := schemaFields(v.Type())
	for _, name := range sortedKeys(m) {
		k := append(key[:len(key):len(key)], name)
		idx, ok := fields[name]
		if !ok {
			p.unknown(k)
			continue
		}
		p.set(v.FieldByIndex(idx), m[name], k)
	}
}

// set stores val, found at key k, in the schema field f.
func (p *problems) set(f reflect.Value, val any, k []string) {
	key := dotted(k)
	switch f.Kind() {
	case reflect.Interface: // the limits take a string or a number: they check it
		f.Set(reflect.ValueOf(val))
	case reflect.Pointer:
		x := reflect.New(f.Type().Elem())
		if p.scalar(x.Elem(), val, key) {
			f.Set(x)
		}
	case reflect.Slice: // []string
		arr, ok := val.([]any)
		if !ok {
			p.wrongType(key, val, "an array of strings", "")
			return
		}
		out := make([]string, 0, len(arr))
		for _, x := range arr {
			s, ok := x.(string)
			if !ok {
				p.wrongType(key, x, "a string", " (each element of the array)")
				return
			}
			out = append(out, s)
		}
		f.Set(reflect.ValueOf(out))
	case reflect.Struct:
		t, ok := val.(map[string]any)
		if !ok {
			p.wrongType(key, val, "a table", fmt.Sprintf(" ([%s] holds its keys)", key))
			return
		}
		p.decode(f, t, k)
	case reflect.Map: // servers: a table of tables, by server name
		t, ok := val.(map[string]any)
		if !ok {
			p.wrongType(key, val, "a table", " ([servers.NAME] tables hold each server's keys)")
			return
		}
		out := reflect.MakeMapWithSize(f.Type(), len(t))
		for _, name := range sortedKeys(t) {
			kk := append(k[:len(k):len(k)], name)
			st, ok := t[name].(map[string]any)
			if !ok {
				// [servers] then grace = "5s": a key meant for a server,
				// written where server names go.
				p.wrongType(dotted(kk), t[name], "a table",
					fmt.Sprintf(" (a server's keys go under [servers.NAME]; %q is read as a server name)", name))
				continue
			}
			sv := reflect.New(f.Type().Elem()).Elem()
			p.decode(sv, st, kk)
			out.SetMapIndex(reflect.ValueOf(name), sv)
		}
		f.Set(out)
	default:
		panic(fmt.Sprintf("config: schema field %s of kind %s", key, f.Kind()))
	}
}

// scalar stores val in x, a string, duration, int or bool, and says
// whether it could.
func (p *problems) scalar(x reflect.Value, val any, key string) bool {
	switch x.Kind() {
	case reflect.String:
		s, ok := val.(string)
		if !ok {
			hint := ""
			if x.Type() == reflect.TypeFor[duration]() {
				hint = ` (durations are strings such as "5s")`
			}
			p.wrongType(key, val, "a string", hint)
			return false
		}
		x.SetString(s)
	case reflect.Int:
		n, ok := val.(int64)
		if !ok {
			p.wrongType(key, val, "an integer", "")
			return false
		}
		x.SetInt(n)
	case reflect.Bool:
		b, ok := val.(bool)
		if !ok {
			p.wrongType(key, val, "a boolean (true or false)", "")
			return false
		}
		x.SetBool(b)
	default:
		panic(fmt.Sprintf("config: schema field %s of kind %s", key, x.Kind()))
	}
	return true
}

func (p *problems) wrongType(key string, val any, want, hint string) {
	p.add(key, fmt.Sprintf("cannot decode TOML %s into %s%s", tomlType(val), want, hint))
}

// unknown reports a key the schema lacks, with the key it most likely
// meant.
func (p *problems) unknown(k []string) {
	key := dotted(k)
	why := fmt.Sprintf("unknown key %q", key)
	if s := suggest(k); s != "" {
		why += "; " + s
	}
	p.errs = append(p.errs, &Error{File: p.path, Line: p.lines[key], Why: why, off: p.offs[key]})
}

// Where keys live: at the top, in [breaker], in [servers.NAME].
var (
	topKeys     = schemaKeys(reflect.TypeFor[file]())
	breakerKeys = schemaKeys(reflect.TypeFor[breaker]())
	serverKeys  = schemaKeys(reflect.TypeFor[server]())
)

// suggest names the key that k, unknown, most likely meant: a key of the
// same table but for case; else the same key in another table (the
// classic TOML slip: a top-level key written after a [table] header
// belongs to that table); else a key of the same table within two edits.
func suggest(k []string) string {
	leaf := k[len(k)-1]
	var here []string
	var where string // the table k is in
	switch {
	case len(k) == 1:
		here, where = topKeys, "top"
	case len(k) == 2 && k[0] == "breaker":
		here, where = breakerKeys, "breaker"
	case len(k) == 3 && k[0] == "servers":
		here, where = serverKeys, "servers"
	default:
		return ""
	}
	same := func(c string) bool { return strings.EqualFold(c, leaf) }
	if i := slices.IndexFunc(here, same); i >= 0 {
		return fmt.Sprintf("did you mean %s?", here[i])
	}
	for _, elsewhere := range []struct {
		table string
		keys  []string
		hint  string
	}{
		{"top", topKeys, "%s is a top-level key: move it above the first [table] header"},
		{"breaker", breakerKeys, "%s belongs under [breaker]"},
		{"servers", serverKeys, "%s belongs under [servers.NAME]"},
	} {
		if elsewhere.table == where {
			continue
		}
		if i := slices.IndexFunc(elsewhere.keys, same); i >= 0 {
			return fmt.Sprintf(elsewhere.hint, elsewhere.keys[i])
		}
	}
	if best := closest(leaf, here); best != "" {
		return fmt.Sprintf("did you mean %s?", best)
	}
	return ""
}

// closest returns the candidate nearest to s within a Levenshtein
// distance of 2, case aside (the first of a tie); "" when none is that
// near.
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := EditDistance(strings.ToLower(s), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance between a and b, in bytes (keys are
// ASCII).
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// schemaFields maps each TOML key of struct type t (embedded structs'
// keys included) to its field.
func schemaFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for _, f := range reflect.VisibleFields(t) {
		if tag := f.Tag.Get("toml"); tag != "" && !f.Anonymous {
			out[tag] = f.Index
		}
	}
	return out
}

// schemaKeys lists the TOML keys of struct type t, in field order.
func schemaKeys(t reflect.Type) []string {
	var out []string
	for _, f := range reflect.VisibleFields(t) {
		if tag := f.Tag.Get("toml"); tag != "" && !f.Anonymous {
			out = append(out, tag)
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// tomlType names the TOML type of a value go-toml decoded into an any.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "table"
	case time.Time, toml.LocalDateTime, toml.LocalDate, toml.LocalTime:
		return "datetime"
	}
	return fmt.Sprintf("%T", v)
}
