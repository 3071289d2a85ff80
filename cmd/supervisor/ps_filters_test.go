//go:build linux

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/seed-86a41135/supervisor/api"
)

// Issue 29: ps filters (--filter KEY=VALUE), prints ids alone (-q) or
// through a template (--format), and keeps shared servers' HEALTH and
// PORT columns out of a table of stdio servers only.
func TestPsFiltersQuietFormat(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	a := in.startShim("--session", "sa", "--name", "alpha", "--", bin, "_fixture", "sleep")
	a.readyPID(t)
	b := in.startShim("--session", "sb", "--name", "beta", "--", bin, "_fixture", "sleep")
	b.readyPID(t)
	ids := map[string]string{}
	for _, p := range in.mustProcesses(false) {
		ids[p.Name] = p.ID
	}
	if out := in.mustRun("ps"); strings.Contains(out, "HEALTH") || strings.Contains(out, "PORT") || !strings.Contains(out, "alpha") {
		t.Errorf("ps of stdio servers:\n%s\nwant no HEALTH or PORT column", out)
	}
	for _, tc := range []struct {
		args []string
		want string // the output, exactly
	}{
		{[]string{"-q"}, ids["alpha"] + "\n" + ids["beta"] + "\n"},
		{[]string{"-q", "--filter", "name=beta"}, ids["beta"] + "\n"},
		{[]string{"-q", "--filter", "session=sa,name=alpha"}, ids["alpha"] + "\n"},
		{[]string{"-q", "--filter", "session=sa,name=beta"}, ""},
		{[]string{"-q", "--filter", "name=alpha", "--filter", "name=beta"}, ids["alpha"] + "\n" + ids["beta"] + "\n"},
		{[]string{"-q", "--filter", "state=exited"}, ""},
		{[]string{"--format", "{{.Name}} {{.Session}}", "--filter", "id=" + ids["beta"]}, "beta sb\n"},
	} {
		out, errOut, code := in.run(append([]string{"ps"}, tc.args...)...)
		if code != 0 || out != tc.want {
			t.Errorf("ps %v: exit %d, %q %q; want %q", tc.args, code, out, errOut, tc.want)
		}
	}
	var procs []api.Process
	if err := json.Unmarshal([]byte(in.mustRun("ps", "--format", "json", "--filter", "name=alpha")), &procs); err != nil {
		t.Fatal(err)
	}
	if len(procs) != 1 || procs[0].Name != "alpha" {
		t.Errorf("ps --format json --filter name=alpha: %+v", procs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--filter", "nmae=alpha"}, `unknown key "nmae"; did you mean name?`},
		{[]string{"--filter", "state=sleeping"}, "no such state"},
		{[]string{"--filter", "name"}, "want KEY=VALUE"},
		{[]string{"--format", "{{.Nope"}, "--format"},
	} {
		if _, errOut, code := in.run(append([]string{"ps"}, tc.args...)...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("ps %v: exit %d, %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// On a terminal ps fits its width: columns go, least useful first, and the
// command is cut.
func TestPsTableFitsTheTerminal(t *testing.T) {
	t.Parallel()
	procs := []api.Process{{ID: "p-0123456789", Session: "host-1234-5678", Name: "filesystem", PID: 4242, State: api.StateRunning,
		Argv: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/someone/projects/a/very/long/path"}}}
	for _, width := range []int{60, 80, 120} {
		var b strings.Builder
		if err := writePsTable(&b, procs, false, width); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if cellWidth(l) > width {
				t.Errorf("width %d: line %q is %d wide", width, l, cellWidth(l))
			}
		}
		if !strings.Contains(b.String(), "p-0123456789") || !strings.Contains(b.String(), "filesystem") {
			t.Errorf("width %d:\n%s\nwant the id and name kept", width, b.String())
		}
	}
}
