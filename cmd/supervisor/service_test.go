//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// serviceEnv points HOME and XDG_CONFIG_HOME at a temporary directory and
// puts a fake systemctl first on PATH, so that these tests never write to
// the real home nor enable a real service. The fake appends its arguments
// to a file and exits with status (printing a bus error when non-zero).
func serviceEnv(t *testing.T, status int) (in *instance, unit, calls string) {
	t.Helper()
	in = newInstance(t)
	dir := t.TempDir()
	fake := filepath.Join(dir, "bin")
	calls = filepath.Join(dir, "calls")
	if err := os.Mkdir(fake, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"$*\" >> '" + calls + "'\n"
	if status != 0 {
		script += "echo 'Failed to connect to bus: No medium found' >&2\nexit 1\n"
	}
	for _, name := range []string{"systemctl", "launchctl"} {
		if err := os.WriteFile(filepath.Join(fake, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	in.env = append(in.env,
		"HOME="+filepath.Join(dir, "home"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "xdg"),
		"PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"))
	return in, filepath.Join(dir, "xdg", "systemd", "user", "supervisor.service"), calls
}

func readCalls(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestServiceInstallUninstallSystemd(t *testing.T) {
	t.Parallel()
	in, unit, calls := serviceEnv(t, 0)
	out := in.mustRun("daemon", "install-service")
	if !strings.Contains(out, "wrote "+unit) || !strings.Contains(out, "enabled and started") {
		t.Errorf("install-service said:\n%s", out)
	}
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatalf("unit not written where XDG_CONFIG_HOME says: %v", err)
	}
	for _, want := range []string{"\nExecStart=" + bin + " daemon --foreground\n", "\nKillMode=process\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("unit lacks %q:\n%s", want, b)
		}
	}
	if got, want := readCalls(t, calls), "--user daemon-reload\n--user enable --now supervisor.service"; got != want {
		t.Errorf("systemctl calls:\n%s\nwant:\n%s", got, want)
	}
	verifyUnit(t, unit)

	// Idempotent.
	if out := in.mustRun("daemon", "install-service"); !strings.Contains(out, "up to date") {
		t.Errorf("second install-service said:\n%s", out)
	}

	os.Remove(calls)
	if out := in.mustRun("daemon", "uninstall-service"); !strings.Contains(out, "removed "+unit) {
		t.Errorf("uninstall-service said:\n%s", out)
	}
	if _, err := os.Stat(unit); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unit still there after uninstall-service: %v", err)
	}
	if got, want := readCalls(t, calls), "--user disable --now supervisor.service\n--user daemon-reload"; got != want {
		t.Errorf("systemctl calls:\n%s\nwant:\n%s", got, want)
	}
	if out := in.mustRun("daemon", "uninstall-service"); !strings.Contains(out, "not installed") {
		t.Errorf("second uninstall-service said:\n%s", out)
	}
}

// Without a user bus (containers, CI) the unit is written, the warning
// says what to run, and the exit status is 0.
func TestServiceInstallWithoutUserBus(t *testing.T) {
	t.Parallel()
	in, unit, _ := serviceEnv(t, 1)
	out, errOut, code := in.run("daemon", "install-service")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(unit); err != nil {
		t.Errorf("unit not written: %v", err)
	}
	for _, want := range []string{"warning: the systemd user unit is written but not enabled", "Failed to connect to bus", "systemctl --user enable --now supervisor.service"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	out, errOut, code = in.run("daemon", "uninstall-service")
	if code != 0 || !strings.Contains(out, "removed") || !strings.Contains(errOut, "warning: could not disable") {
		t.Errorf("uninstall-service: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(unit); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unit still there: %v", err)
	}
}

func TestServiceInstallDryRun(t *testing.T) {
	t.Parallel()
	in, unit, calls := serviceEnv(t, 0)
	out, errOut, code := in.run("daemon", "install-service", "--dry-run")
	if code != 0 {
		t.Fatalf("install-service --dry-run: exit %d: %s", code, errOut)
	}
	// The test binary lives under /tmp: a unit pointing there is warned of.
	if !strings.Contains(errOut, "temporary location") {
		t.Errorf("no warning about a binary in a temporary location:\n%s", errOut)
	}
	for _, want := range []string{"# would write " + unit, "\nExecStart=" + bin + " daemon --foreground\n", "# then run: systemctl --user enable --now supervisor.service"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(unit); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--dry-run wrote the unit: %v", err)
	}
	if got := readCalls(t, calls); got != "" {
		t.Errorf("--dry-run ran systemctl: %s", got)
	}
}

// verifyUnit runs systemd-analyze verify on the unit where the tool
// exists: as a user unit if a user manager can be set up, else in system
// mode (the same syntax check). Lines about the unit on its stderr are
// unit errors; a manager that cannot start is an environment problem.
func verifyUnit(t *testing.T, unit string) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("SKIP systemd-analyze verify: systemd-analyze not on PATH")
		return
	}
	for _, mode := range [][]string{{"--user", "verify"}, {"verify"}} {
		var stderr bytes.Buffer
		cmd := exec.Command("systemd-analyze", append(mode, unit)...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		var unitErrs []string
		for _, line := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(line, filepath.Base(unit)) {
				unitErrs = append(unitErrs, line)
			}
		}
		if len(unitErrs) > 0 {
			t.Errorf("systemd-analyze %s rejects the unit:\n%s", strings.Join(mode, " "), strings.Join(unitErrs, "\n"))
			return
		}
		if err == nil {
			t.Logf("systemd-analyze %s accepts the unit", strings.Join(mode, " "))
			return
		}
		t.Logf("systemd-analyze %s cannot run here (%v): %s", strings.Join(mode, " "), err, strings.TrimSpace(stderr.String()))
	}
	t.Log("SKIP systemd-analyze verify: no manager could be initialized here")
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	out := in.mustRun("completion", "bash")
	if !strings.Contains(out, "__start_supervisor") {
		t.Errorf("completion bash is not a bash completion script:\n%.300s", out)
	}
	for shell, want := range map[string]string{"zsh": "#compdef supervisor", "fish": "complete -c supervisor", "powershell": "Register-ArgumentCompleter"} {
		if out := in.mustRun("completion", shell); !strings.Contains(out, want) {
			t.Errorf("completion %s lacks %q", shell, want)
		}
	}
	out, errOut, code := in.run("completion", "nosuchshell")
	if code == 0 || !strings.Contains(errOut, `completion "nosuchshell": unknown shell; want bash, zsh, fish or powershell`) {
		t.Errorf("completion nosuchshell: exit %d\n%s%s", code, out, errOut)
	}
}
