//go:build linux

package spawn

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

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
	r := newReaper(t)
	for i := 0; i < 8; i++ {
		files, gate, _ := stdio(t)
		_, exit := start(t, r, Request{
			Argv: []string{"/bin/sh", "-c", "read x; cat " + secret + " && exit 0; exit 9"},
			Env:  []string{"PATH=/usr/bin:/bin"}, Dir: home, Stdio: files, SessionID: "s", ProcID: "p",
			Sandbox: &rules,
		})
		gate.Close()
		if st := waitStatus(t, exit); st.Code != 9 {
			t.Fatalf("start %d: the sandboxed server read the secret, or failed otherwise: %+v", i, st)
		}
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
	files, gate, _ := stdio(t)
	_, exit := start(t, r, Request{
		Argv: []string{"/bin/sh", "-c", "read x; cat " + secret + " >/dev/null && exit 0; exit 9"},
		Env:  []string{"PATH=/usr/bin:/bin"}, Dir: home, Stdio: files, SessionID: "s", ProcID: "p",
	})
	gate.Close()
	if st := waitStatus(t, exit); st.Code != 0 {
		t.Fatalf("unconfined, the server could not read the file either: %+v", st)
	}
}
