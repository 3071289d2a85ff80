//go:build linux

package main

import (
	"strings"
	"testing"
)

// Issue 29: a command line the CLI cannot take exits 2 with what was
// wrong and a suggestion, never the parent's help and 0: a misspelled hook
// line (`supervisor session ned`) must fail where a script can see it.
// run keeps 125, its status for any supervisor error.
func TestMistypedCommandsExit2(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	for _, tc := range []struct {
		args []string
		code int
		want []string // in stderr
	}{
		{[]string{"session", "ned", "foo"}, 2, []string{`unknown command "ned" for "supervisor session"`, "did you mean end?", "supervisor session --help"}},
		{[]string{"breaker", "rest"}, 2, []string{`unknown command "rest"`, "reset"}},
		{[]string{"config", "shwo"}, 2, []string{`unknown command "shwo"`, "did you mean show?"}},
		{[]string{"sessoin"}, 2, []string{`unknown command "sessoin" for "supervisor"`, "session"}},
		{[]string{"ps", "--bogus"}, 2, []string{"unknown flag: --bogus", "supervisor ps --help"}},
		{[]string{"ps", "extra"}, 2, []string{`unknown command "extra" for "supervisor ps"`}},
		{[]string{"run", "--bogus", "--", "true"}, 125, []string{"unknown flag: --bogus"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := in.run(tc.args...)
			if code != tc.code || out != "" {
				t.Fatalf("exit %d, stdout %q; want exit %d and nothing on stdout\nstderr: %s", code, out, tc.code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q does not say %q", errOut, w)
				}
			}
		})
	}
	// A group alone still shows its help, as before.
	if out, _, code := in.run("session"); code != 0 || !strings.Contains(out, "Available Commands") {
		t.Errorf("supervisor session: exit %d, %q; want its help and 0", code, out)
	}
}
