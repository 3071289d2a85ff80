//go:build linux

package spawn

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// TestStartConfinesOnlyTheChild starts servers in a sandbox that closes a
// secret: each is denied it, and the daemon's own threads are not (the
// thread that forked a confined child is never used again).
func TestStartConfinesOnlyTheChild(t *testing.T) {
	if c := sandbox.Support(); !c.Filesystem {
		t.Skipf("no Landlock here: %s", c.Why)
	}
	home := t.TempDir()
	secret := filepath.Join(home, ".ssh", "id_ed25519")
	writeFile(t, secret, 0o600)
	rules, err := sandbox.Plan(sandbox.Spec{Enabled: true, Read: []string{"~"}},
		sandbox.Context{Home: home, Cwd: home, Argv: []string{"/bin/sh"}})
	if err != nil {
		t.Fatal(err)
	}
	var coreBefore unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &coreBefore); err != nil {
		t.Fatal(err)
	}
	r := newReaper(t)
	// Each start also tries its parent's (this process's) environment:
	// a start confined on the main thread would put this process in the
	// server's sandbox, and let it (forkIn).
	for i := 0; i < 16; i++ {
		files, gate, _ := stdio(t)
		_, exit := start(t, r, Request{
			Argv: []string{"/bin/sh", "-c", "read x; cat /proc/$PPID/environ >/dev/null && exit 8; cat " + secret + " && exit 0; exit 9"},
			Env:  []string{"PATH=/usr/bin:/bin"}, Dir: home, Stdio: files, SessionID: "s", ProcID: "p",
			Sandbox: &rules,
		})
		gate.Close()
		if st := waitStatus(t, exit); st.Code != 9 {
			t.Fatalf("start %d: the sandboxed server read its parent's environment (8) or the secret (0), or failed otherwise: %+v", i, st)
		}
	}
	// No core dumps for a sandboxed server, and none taken from the
	// daemon's side.
	files, gate, out := stdio(t)
	_, exit := start(t, r, Request{
		Argv: []string{"/bin/sh", "-c", "read x; ulimit -c"},
		Env:  []string{"PATH=/usr/bin:/bin"}, Dir: home, Stdio: files, SessionID: "s", ProcID: "p", Sandbox: &rules,
	})
	gate.Close()
	waitStatus(t, exit)
	if b, _ := io.ReadAll(out); strings.TrimSpace(string(b)) != "0" {
		t.Errorf("a sandboxed server's core limit is %q, want 0", b)
	}
	var own unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &own); err != nil || own.Max == 0 && own.Cur == 0 && coreBefore.Max != 0 {
		t.Errorf("the daemon's own core limit changed: %+v (before %+v, %v)", own, coreBefore, err)
	}
	// Every thread of this process still reads it: none was left confined.
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := os.ReadFile(secret); err != nil {
				t.Errorf("the daemon's side lost access after confined starts: %v", err)
			}
		}()
	}
	wg.Wait()
	// The same server unconfined reads it: the denial was the sandbox's.
	files, gate, _ = stdio(t)
	_, exit = start(t, r, Request{
		Argv: []string{"/bin/sh", "-c", "read x; cat " + secret + " >/dev/null && exit 0; exit 9"},
		Env:  []string{"PATH=/usr/bin:/bin"}, Dir: home, Stdio: files, SessionID: "s", ProcID: "p",
	})
	gate.Close()
	if st := waitStatus(t, exit); st.Code != 0 {
		t.Fatalf("unconfined, the server could not read the file either: %+v", st)
	}
}
