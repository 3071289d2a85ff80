package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/registry"
)

// TestWireMatchesRecords: each record the daemon answers with converts to
// a wire value whose JSON is the record's own, so the protocol and the
// `ps --json`, `events --json`, `sessions --json` and `breaker list
// --json` output stay what they were when the records were sent as they
// are. The records are filled by reflection, every field non-zero, so a
// field added to a record later fails here until it is added to the wire
// type and its conversion, or excluded below on purpose.
//
// A deliberate difference between a record and the wire is an entry of
// the case's offWire (nil today): the record's JSON path, and why it is
// not sent, e.g. map[string]string{"stdio": "the cascade's business"}.
func TestWireMatchesRecords(t *testing.T) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T)
	}{
		{"Process", sameOnWire(wireProcess, nil)},
		{"Session", sameOnWire(wireSession, nil)},
		{"Event", sameOnWire(func(e registry.Event) api.Event { return wireEvents([]registry.Event{e})[0] }, nil)},
		{"BreakerState", sameOnWire(func(b registry.BreakerState) api.BreakerState {
			return wireBreakers([]registry.BreakerState{b})[0]
		}, nil)},
		{"Usage", sameOnWire(func(u registry.Usage) api.Usage { return *wireUsage(&u) }, nil)},
		{"Limits", sameOnWire(func(l registry.Limits) api.Limits { return *wireLimits(&l) }, nil)},
		// A run's limits come the other way, into the record.
		{"Limits stored", sameOnWire(func(l api.Limits) registry.Limits { return *storedLimits(&l) }, nil)},
	} {
		t.Run(tc.name, tc.test)
	}
}

// sameOnWire checks conv on a zero From and on one with every field set:
// To's JSON must be From's, but for the paths in offWire. The zero value
// catches a nil that became an empty list or the reverse (null and []
// differ on the wire).
func sameOnWire[From, To any](conv func(From) To, offWire map[string]string) func(t *testing.T) {
	return func(t *testing.T) {
		var from From
		typ := reflect.TypeOf(from)
		for _, filled := range []bool{false, true} {
			if filled {
				n := 0
				fillAll(t, reflect.ValueOf(&from).Elem(), typ.Name(), &n)
			}
			want := mustJSON(t, from)
			got := mustJSON(t, conv(from))
			for _, d := range diffJSON("", decodeJSON(t, want), decodeJSON(t, got), offWire) {
				t.Errorf("%s (filled %v): %s", typ, filled, d)
			}
			// The CLI decodes the daemon's bytes into the wire type and
			// encodes them again (inspect --json, events --json): nothing
			// may be lost or renamed on the way.
			var back To
			if err := json.Unmarshal(want, &back); err != nil {
				t.Fatalf("decode %s's JSON into %T: %v", typ, back, err)
			}
			for _, d := range diffJSON("", decodeJSON(t, want), decodeJSON(t, mustJSON(t, back)), offWire) {
				t.Errorf("%s's JSON decoded into %T and encoded again (filled %v): %s", typ, back, filled, d)
			}
		}
	}
}

// TestWireKeepsNil: a nil list stays null and an empty one [] (ps and
// events answer [] for none, and their clients print what they got).
func TestWireKeepsNil(t *testing.T) {
	if got := wireProcesses(nil); got != nil {
		t.Errorf("wireProcesses(nil) = %#v, want nil", got)
	}
	if got := wireProcesses([]registry.Process{}); got == nil || len(got) != 0 {
		t.Errorf("wireProcesses([]) = %#v, want an empty list", got)
	}
	if got := wireEvents([]registry.Event{}); got == nil || len(got) != 0 {
		t.Errorf("wireEvents([]) = %#v, want an empty list", got)
	}
	if wireUsage(nil) != nil || wireLimits(nil) != nil || storedLimits(nil) != nil || wireStop(nil) != nil {
		t.Error("a nil pointer converted to a value")
	}
}

// fillAll sets every field of v, recursively, to a value that is not its
// zero and not another field's (*n counts them). A kind it does not know
// fails the test, naming the field: teach it, so the field is checked.
func fillAll(t *testing.T, v reflect.Value, path string, n *int) {
	t.Helper()
	*n++
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, *n, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("%s-%d", path, *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(t, v.Elem(), path, n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillAll(t, v.Index(0), path+"[0]", n)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				t.Errorf("%s.%s: unexported, fillAll cannot set it", path, f.Name)
				continue
			}
			fillAll(t, v.Field(i), path+"."+f.Name, n)
		}
	default:
		t.Errorf("%s: fillAll cannot set a %s; teach it, or the field goes unchecked", path, v.Kind())
	}
	if v.IsZero() {
		t.Errorf("%s: still zero after fillAll", path)
	}
}

// diffJSON lists where got differs from want, by JSON path, skipping the
// paths in off.
func diffJSON(path string, want, got any, off map[string]string) []string {
	if _, ok := off[path]; ok && path != "" {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: the record has an object, the wire %v", orTop(path), got)}
		}
		var out []string
		for _, k := range slices.Sorted(maps.Keys(w)) {
			p := strings.TrimPrefix(path+"."+k, ".")
			if _, ok := off[p]; ok {
				continue
			}
			gv, ok := g[k]
			if !ok {
				out = append(out, fmt.Sprintf("field %q is missing on the wire type: add it there and to its conversion in wire.go, or exclude it in this test saying why", p))
				continue
			}
			out = append(out, diffJSON(p, w[k], gv, off)...)
		}
		for _, k := range slices.Sorted(maps.Keys(g)) {
			if _, ok := w[k]; !ok {
				out = append(out, fmt.Sprintf("field %q is on the wire but not in the record", strings.TrimPrefix(path+"."+k, ".")))
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: the record has %v, the wire %v", orTop(path), want, got)}
		}
		var out []string
		for i := range w {
			out = append(out, diffJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], off)...)
		}
		return out
	}
	if !reflect.DeepEqual(want, got) {
		return []string{fmt.Sprintf("%s: the record has %v, the wire %v", orTop(path), want, got)}
	}
	return nil
}

func orTop(path string) string {
	if path == "" {
		return "(top)"
	}
	return path
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return b
}

// decodeJSON decodes with exact numbers: a large uint64 must not round.
func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}
