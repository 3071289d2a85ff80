//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runExe runs the supervisor at exe (a copy of bin) to completion.
func runExe(t *testing.T, exe string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", exe, args, err)
	}
	return o.String(), e.String(), 0
}

// copyBin copies the test binary into a temp dir of its own (not on
// PATH) and returns its path.
func copyBin(t *testing.T) string {
	t.Helper()
	src, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	exe := filepath.Join(t.TempDir(), "supervisor")
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return exe
}

// installJSON mirrors `install --json` / `uninstall --json`.
type installJSON struct {
	DryRun bool `json:"dry_run"`
	Files  []struct {
		Host    string `json:"host"`
		Path    string `json:"path"`
		Project bool   `json:"project"`
		Hook    bool   `json:"hook"`
		Exists  bool   `json:"exists"`
		Changed bool   `json:"changed"`
		Command string `json:"command"`
		Servers []struct {
			Name   string `json:"name"`
			Action string `json:"action"`
		} `json:"servers"`
		Error string `json:"error"`
	} `json:"files"`
}

// TestInstallRefusesUnrunnableBareCommand: a supervisor run from a temp
// dir writes the bare name `supervisor`; when PATH does not find it, the
// hosts could not start a single server, so install refuses and writes
// nothing. --force writes with a warning, and then doctor and hosts name
// the command that does not resolve.
func TestInstallRefusesUnrunnableBareCommand(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	home, env := in.homeEnv(t)
	exe := copyBin(t)
	noPath := append(append([]string{}, env...), "PATH=/usr/bin:/bin")
	if p, err := lookPathIn("supervisor", "/usr/bin:/bin"); err == nil {
		t.Skipf("%s is on the test PATH; the missing-command case cannot be shown here", p)
	}
	withPath := append(append([]string{}, env...), "PATH="+filepath.Dir(exe)+":/usr/bin:/bin")

	cursor := filepath.Join(home, ".cursor", "mcp.json")
	writeFile(t, cursor, cursorConfig)
	project := t.TempDir()
	mcpJSON := filepath.Join(project, ".mcp.json")
	const projectConfig = `{"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}}}` + "\n"
	writeFile(t, mcpJSON, projectConfig)
	unchanged := func(when string) {
		t.Helper()
		if got := readFile(t, cursor); got != cursorConfig {
			t.Fatalf("%s: %s changed:\n%s", when, cursor, got)
		}
		if got := readFile(t, mcpJSON); got != projectConfig {
			t.Fatalf("%s: %s changed:\n%s", when, mcpJSON, got)
		}
		for _, dir := range []string{filepath.Dir(cursor), project} {
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Fatalf("%s: files beside the config in %s: %v", when, dir, entries)
			}
		}
	}

	// Refused, plain and --json and --dry-run alike: nothing written.
	for _, args := range [][]string{
		{"install", "--all", "--project", project},
		{"install", "cursor", "--json"},
		{"install", "cursor", "--dry-run"},
	} {
		out, errOut, code := runExe(t, exe, noPath, args...)
		if code == 0 || out != "" ||
			!strings.Contains(errOut, `supervisor: install would write the bare command "supervisor" into host configs, but no "supervisor" is on PATH`) ||
			!strings.Contains(errOut, "(this binary is "+exe+")") ||
			!strings.Contains(errOut, "hint: install it (`go install ./cmd/supervisor`) or put "+filepath.Dir(exe)+" first on PATH") ||
			!strings.Contains(errOut, "--force") {
			t.Errorf("%v without supervisor on PATH: exit %d, stdout %q, stderr %q; want a refusal naming the problem and the fix", args, code, out, errOut)
		}
		unchanged(strings.Join(args, " "))
	}
	// Another supervisor first on PATH is refused too: the hosts would run it.
	first, _, shadow := shadowPath(t)
	out, errOut, code := runExe(t, exe, append(append([]string{}, env...), "PATH="+shadow), "install", "cursor")
	if code == 0 || !strings.Contains(errOut, `"supervisor" on PATH is `+first+", not this binary ("+exe+")") {
		t.Errorf("install with another supervisor on PATH: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	unchanged("install with another supervisor on PATH")

	// --force writes, warns, and says in JSON what it did.
	out, errOut, code = runExe(t, exe, noPath, "install", "--all", "--project", project, "--force", "--json")
	if code != 0 || !strings.Contains(errOut, `warning: install would write the bare command "supervisor"`) || !strings.Contains(errOut, "(--force)") {
		t.Fatalf("install --force: exit %d, stderr %q; want 0 and a warning", code, errOut)
	}
	var rep installJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("install --json: %v\n%s", err, out)
	}
	changed := map[string]string{}
	for _, f := range rep.Files {
		if f.Changed {
			var wrapped []string
			for _, s := range f.Servers {
				if s.Action == "wrapped" {
					wrapped = append(wrapped, s.Name)
				}
			}
			changed[f.Path] = f.Host + " " + f.Command + " " + strings.Join(wrapped, ",")
		}
		if !f.Exists && (f.Changed || len(f.Servers) > 0) {
			t.Errorf("a missing file with changes: %+v", f)
		}
	}
	if want := map[string]string{cursor: "cursor supervisor fs", mcpJSON: "claude-code supervisor git"}; !equalMaps(changed, want) || rep.DryRun {
		t.Fatalf("install --json changed %v, want %v:\n%s", changed, want, out)
	}
	if !strings.Contains(readFile(t, cursor), `"command": "supervisor"`) {
		t.Fatalf("--force did not write the bare name:\n%s", readFile(t, cursor))
	}

	// doctor and hosts, with the same PATH, name the command the host
	// cannot start, and say how to fix it.
	fs, errOut, code := doctorJSONEnv(t, in, noPath)
	if f, ok := findingFor(fs, "unresolvable-command", func(f doctorFinding) bool { return f.Path == cursor }); code != 1 || !ok ||
		!strings.Contains(f.Evidence, `cursor runs 1 wrapped server(s) through "supervisor", which it cannot start: "supervisor" is not on PATH; affected: fs`) ||
		!strings.Contains(f.Fix, "go install ./cmd/supervisor") {
		t.Errorf("doctor: exit %d, findings %+v, stderr %s; want an unresolvable-command finding for %s", code, fs, errOut, cursor)
	}
	out, errOut, code = runExe(t, exe, noPath, "hosts")
	if code != 0 || !strings.Contains(out, "problem: cursor "+cursor+`: wrapped server(s) fs run "supervisor", which the host cannot start: "supervisor" is not on PATH`) ||
		!strings.Contains(out, "  fix: put `supervisor` on PATH") {
		t.Errorf("hosts: exit %d, stdout:\n%s\nstderr %s; want the problem and its fix", code, out, errOut)
	}
	out, _, _ = runExe(t, exe, noPath, "hosts", "--json")
	var hs []struct {
		File     string
		Problems []struct{ Command, Problem, Fix string }
	}
	if err := json.Unmarshal([]byte(out), &hs); err != nil || len(hs) != 1 || hs[0].File != cursor || len(hs[0].Problems) != 1 ||
		hs[0].Problems[0].Command != "supervisor" || hs[0].Problems[0].Fix == "" {
		t.Errorf("hosts --json: %v\n%s", err, out)
	}
	// With the binary on PATH, nothing is left to report.
	fs, errOut, _ = doctorJSONEnv(t, in, withPath)
	if f, ok := findingFor(fs, "unresolvable-command", func(doctorFinding) bool { return true }); ok {
		t.Errorf("doctor with supervisor on PATH: %+v (stderr %s)", f, errOut)
	}
	if out, _, _ := runExe(t, exe, withPath, "hosts"); strings.Contains(out, "problem:") {
		t.Errorf("hosts with supervisor on PATH:\n%s", out)
	}

	// uninstall --json puts both back, byte for byte.
	out, errOut, code = runExe(t, exe, noPath, "uninstall", "--all", "--project", project, "--json")
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("uninstall --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	unwrapped := 0
	for _, f := range rep.Files {
		for _, s := range f.Servers {
			if f.Changed && s.Action == "unwrapped" {
				unwrapped++
			}
		}
	}
	if unwrapped != 2 {
		t.Errorf("uninstall --json reports %d unwrapped servers, want 2:\n%s", unwrapped, out)
	}
	unchanged("uninstall")

	// With the binary first on PATH, install just works.
	out, errOut, code = runExe(t, exe, withPath, "install", "cursor")
	if code != 0 || !strings.Contains(out, "cursor "+cursor+": wrapped fs") || strings.Contains(errOut, "warning") {
		t.Fatalf("install with supervisor on PATH: exit %d\n%s%s", code, out, errOut)
	}
}

// doctorJSONEnv runs doctor --json under env, its process checks confined
// to this test process (no planted processes here).
func doctorJSONEnv(t *testing.T, in *instance, env []string) ([]doctorFinding, string, int) {
	t.Helper()
	c := *in
	c.env = env
	return c.doctorJSON(t, pidArgs(os.Getpid())...)
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
