//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestUserStringsArePrintedEscaped: user-controlled strings are printed
// escaped on tables (issue 13, 8c and 11), and a missing argument gets a
// friendly error.
func TestUserStringsArePrintedEscaped(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	const evil = "evil\x1b[31m\nname"
	s := in.startShim("--name", evil, "--", bin, "_fixture", "sleep")
	s.readyPID(t)

	for _, tc := range []struct{ args []string }{
		{[]string{"ps"}},
		{[]string{"events", "--lines", "100"}},
	} {
		out := in.mustRun(tc.args...)
		if strings.Contains(out, "\x1b") || strings.Contains(out, "evil\n") {
			t.Errorf("%v printed the raw name:\n%q", tc.args, out)
		}
		if !strings.Contains(out, `evil\x1b[31m\nname`) && tc.args[0] == "ps" {
			t.Errorf("%v does not show the escaped name:\n%s", tc.args, out)
		}
	}

	if st := in.mustRun("status", "--json"); !strings.Contains(st, `"process_handles"`) || strings.Contains(st, `"process handles"`) {
		t.Errorf("status --json feature keys must have no space:\n%s", st)
	}

	_, stderr, code := in.run("stop")
	if code == 0 || !strings.Contains(stderr, "stop needs a process id or name: see `supervisor ps`") {
		t.Errorf("stop with no argument: code %d, stderr %q", code, stderr)
	}
}
