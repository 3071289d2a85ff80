//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestDemo runs `supervisor demo` as a newcomer would.
func TestDemo(t *testing.T) {
	t.Parallel()
	in := newInstance(t) // the demo makes its own private instance; this one stays unused
	out, errOut, code := in.run("demo")
	if code != 0 {
		t.Fatalf("demo exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, want := range []string{"gone", "killed", "re-adopt", "Nothing is left running"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
