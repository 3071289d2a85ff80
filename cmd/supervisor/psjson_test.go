//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/seed-86a41135/supervisor/api"
)

// ps --json prints the daemon's bytes, only indented: exactly what
// decoding the records and encoding them again printed before (names
// with HTML characters, which both escape alike, included).
func TestPsJSONPassesBytesThrough(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	for i := range 3 {
		s := in.startShim("--session", fmt.Sprintf("s-%d", i), "--name", fmt.Sprintf("srv<%d>&", i), "--", "sleep", "600")
		defer s.stdin.Close()
	}
	waitCond(t, func() error {
		out, _, code := in.run("ps", "--json")
		var ps []api.Process
		if code != 0 || json.Unmarshal([]byte(out), &ps) != nil || len(ps) != 3 {
			return fmt.Errorf("ps --json: exit %d, %d records", code, len(ps))
		}
		return nil
	})
	out := in.mustRun("ps", "--json", "--all")
	var procs []api.Process
	if err := json.Unmarshal([]byte(out), &procs); err != nil {
		t.Fatalf("ps --json is not a JSON array of records: %v\n%s", err, out)
	}
	var again bytes.Buffer
	if err := newJSONEncoder(&again).Encode(procs); err != nil {
		t.Fatal(err)
	}
	if again.String() != out {
		t.Fatalf("ps --json differs from its records encoded again:\n%s\n---\n%s", out, again.String())
	}
	if len(procs) != 3 {
		t.Fatalf("%d records, want 3", len(procs))
	}
}
