package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/seed-86a41135/supervisor/internal/sandbox/denials"
)

// TestSandboxDenialsAreEvents: where the kernel's audit is on and the
// daemon may read it (root), what Landlock denies a sandboxed server (a
// planted key, a file outside its allowlist, a connection, a setsid
// grandchild's read) is a sandbox.denied event naming the path or the
// address, counted in the metrics, for a server exec'd in its shim's place
// and one the daemon forks alike; status says so. With the audit off,
// status says why denied files are not events.
//
// The audit is the whole machine's: the test turns it on for its run and
// back as it was. It does not run in parallel, so no other test of this
// package meets the extra events.
func TestSandboxDenialsAreEvents(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the kernel's audit records are read with CAP_AUDIT_READ, and turned on with CAP_AUDIT_CONTROL")
	}
	was, err := denials.On()
	if err != nil {
		t.Skipf("the kernel's audit cannot be asked: %v", err)
	}
	probe := newInstance(t)
	sandboxOrSkip(t, probe)
	status := probe.mustRun("status")
	if !strings.Contains(status, "landlock ABI") || regexp.MustCompile(`landlock ABI [1-6]:`).MatchString(status) {
		t.Skipf("needs Landlock ABI 7 (Linux 6.15) for audit records:\n%s", status)
	}
	if !was && !strings.Contains(status, "denied files are not events (the kernel's audit is off") {
		t.Errorf("with the audit off, status does not say denied files are not events:\n%s", status)
	}
	if _, err := denials.SetOn(true); err != nil {
		t.Skipf("the kernel's audit cannot be turned on here: %v", err)
	}
	t.Cleanup(func() {
		if _, err := denials.SetOn(was); err != nil {
			t.Errorf("the kernel's audit was not set back to on=%v: %v", was, err)
		}
	})
	t.Logf("the kernel's audit turned on for this test (it was on=%v)", was)
	if status := probe.mustRun("status"); !strings.Contains(status, "denied files are events (the kernel's audit)") {
		t.Errorf("with the audit on, status does not say denied files are events:\n%s", status)
	}
	for _, inPlace := range []string{"auto", "off"} {
		t.Run("in place "+inPlace, func(t *testing.T) { testDenialEvents(t, inPlace) })
	}
	t.Run("shared", testSharedDenialEvents)
}

// testSharedDenialEvents: a shared server's upstream, confined by its
// broker, has its denials told as the broker's server.
func testSharedDenialEvents(t *testing.T) {
	in := newInstance(t)
	home, _, tmp := sandboxHome(t)
	in.env = append(in.env, "HOME="+home, "TMPDIR="+tmp)
	sandboxOrSkip(t, in)
	in.via = []string{"sh", "-c", `"$0" "$@"; exit $?`}
	h := startRawHost(t, in, "--share", "--name", "sbshared", "--sandbox", "--allow-read", filepath.Dir(bin), "--network", "none", "--", bin, "_fixture", "mcp")
	h.handshake()
	key := filepath.Join(home, ".ssh", "id_ed25519")
	if got := h.ask(2, "tools/call", fmt.Sprintf(`{"name":"read","arguments":{"text":%q}}`, key)).String(); !strings.Contains(got, "denied") {
		t.Fatalf("the shared upstream read the key: %s", got)
	}
	want := "file: " + key + ": fs.read_file denied"
	waitCond(t, func() error {
		for _, line := range strings.Split(in.mustRun("events"), "\n") {
			if strings.Contains(line, want) && strings.Contains(line, "sandbox.denied") {
				return nil
			}
		}
		return fmt.Errorf("no event %q in:\n%s", want, in.mustRun("events"))
	})
}

func testDenialEvents(t *testing.T, inPlace string) {
	in := newInstance(t)
	home, work, tmp := sandboxHome(t)
	outside := t.TempDir()
	in.env = append(in.env, "HOME="+home, "TMPDIR="+tmp, "SUPERVISOR_IN_PLACE="+inPlace)
	sandboxOrSkip(t, in)
	ln := acceptAndClose(t, "127.0.0.1:0")
	script := tryActs + `
try read-key "cat $HOME/.ssh/id_ed25519"
try write-outside "echo x > ` + outside + `/planted"
try connect "perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => q(` + ln.Addr().String() + `)) or exit 1'"
try grandchild-aws "setsid sh -c 'cat $HOME/.aws/credentials' </dev/null"
try host-environ "cat /proc/$PPID/environ"
try read-project "cat ` + work + `/README"
echo done
exec cat`
	srv := in.startShim("--session", "sbd", "--name", "denied", "--cwd", work, "--sandbox", "--allow-write", work, "--network", "none", "--", "sh", "-c", script)
	got := readActs(t, srv)
	for act, w := range map[string]string{"read-key": "denied", "write-outside": "denied", "connect": "denied", "grandchild-aws": "denied", "host-environ": "denied", "read-project": "ok"} {
		if got[act] != w {
			t.Errorf("%s: %q, want %q", act, got[act], w)
		}
	}
	want := []string{
		"file: " + filepath.Join(home, ".ssh/id_ed25519") + ": fs.read_file denied",
		"file: " + filepath.Join(home, ".aws/credentials") + ": fs.read_file denied",
		"file: " + outside + ": fs.make_reg denied",
		"network: " + ln.Addr().String() + ": net.connect_tcp denied",
	}
	var evs string
	waitCond(t, func() error {
		evs = in.mustRun("events", "--session", "sbd")
		for _, w := range want {
			if !strings.Contains(evs, w) {
				return fmt.Errorf("no event %q in:\n%s", w, evs)
			}
		}
		return nil
	})
	// Its host's environment was denied too, but by the capabilities a
	// root host holds and the server does not, before Landlock judged: the
	// kernel writes no Landlock record of it, so it is no event.
	if strings.Contains(evs, filepath.Join(work, "README")+": fs.") {
		t.Errorf("an allowed read is an event:\n%s", evs)
	}
	if out := in.mustRun("inspect", "denied"); !strings.Contains(out, want[0]) {
		t.Errorf("inspect does not show the server's denials:\n%s", out)
	}
	m := in.mustRun("metrics")
	if !regexp.MustCompile(`supervisor_sandbox_denied_total\{what="file"\} [1-9]`).MatchString(m) {
		t.Errorf("the metrics do not count the denied files:\n%s", m)
	}
	srv.stdin.Close()
	if code := srv.exitCode(t); code != 0 {
		t.Errorf("the server's shim exited %d after stdin EOF, want 0", code)
	}
}
