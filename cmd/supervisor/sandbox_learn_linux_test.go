package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxLearn: `sandbox learn` runs a server unconfined, with its
// host's stdio, and writes the policy it needed beyond every sandboxed
// server's: the files it read (three of a directory become the
// directory), the directories it wrote in, the address it reached, and
// the secret it asked for listed but not allowed; it exits with the
// server's status. Under that policy, the same server then runs
// sandboxed and does its work.
func TestSandboxLearn(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	home, work, tmp := sandboxHome(t)
	// GIVEN_VAR is its host's for this server alone (this test process
	// has none), as a host config's env block gives one.
	in.env = append(in.env, "HOME="+home, "TMPDIR="+tmp, "GIVEN_VAR=mine")
	for _, f := range []string{"notes/a.txt", "notes/b.txt", "notes/c.txt", "other/file", "out/.keep"} {
		p := filepath.Join(home, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln := acceptAndClose(t, "127.0.0.1:0")
	work1 := `cat ~/notes/a.txt ~/notes/b.txt ~/notes/c.txt ~/other/file && echo made > ~/out/new && ` +
		`perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => q(` + ln.Addr().String() + `)) or exit 1' && read line && echo "got $line"`
	out := filepath.Join(t.TempDir(), "learned.toml")
	cmd := in.command("sandbox", "learn", "--name", "learner", "--out", out, "--cwd", work, "--",
		"sh", "-c", work1+`; echo "given=[$GIVEN_VAR]"; cat ~/.ssh/id_ed25519 >/dev/null; exit 3`)
	cmd.Stdin = strings.NewReader("hello\n")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("sandbox learn: exit %d (%v), want the server's 3; stderr:\n%s", code, err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "got hello") {
		t.Errorf("the server did not have its host's stdio: %q", stdout.String())
	}
	if !strings.Contains(stdout.String(), "given=[mine]") {
		t.Errorf("the server did not see what its host gave it by name, as a sandboxed run would: %q", stdout.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	learned := string(b)
	for _, want := range []string{
		`[servers.learner]`,
		`allow_read = ["~/notes", "~/other/file"]`,
		`allow_write = ["~/out"]`,
		`# It connected to: ` + ln.Addr().String() + `.`,
		`network = "all"`,
		`#   ~/.ssh/id_ed25519`,
	} {
		if !strings.Contains(learned, want) {
			t.Errorf("the learnt policy lacks %q:\n%s", want, learned)
		}
	}
	if strings.Contains(learned, "allow_read = [\"~\"") || strings.Contains(learned, `"~/.ssh`) {
		t.Errorf("the learnt policy opens the home or a secret:\n%s", learned)
	}
	// What it learnt is what it needs: under it, the work is done.
	if err := os.WriteFile(filepath.Join(in.state, "config.toml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	sandboxOrSkip(t, in)
	run := in.command("run", "--session", "learnt", "--name", "learner", "--cwd", work, "--", "sh", "-c", work1)
	run.Stdin = strings.NewReader("again\n")
	got, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "got again") {
		t.Errorf("under the learnt policy: %v\n%s", err, got)
	}
	// And without it, the same work is denied: the policy was needed.
	deny := in.command("run", "--session", "learnt", "--name", "other", "--sandbox", "--cwd", work, "--", "sh", "-c", work1)
	deny.Stdin = strings.NewReader("again\n")
	if got, err := deny.CombinedOutput(); err == nil {
		t.Errorf("without the learnt policy the work was done too, so it shows nothing:\n%s", got)
	}
}
