package api

import (
	"os/exec"
	"strings"
	"testing"
)

// The wire protocol links no more than a client needs: not the cascade
// (shutdown, and hclog with it), not spawn (and net/http with it). A run's
// entry that only talks to the daemon must be able to start light (issue
// 27); the types those packages share with the wire live in
// shutdown/outcome.
//
// Nor does it link registry: the wire has its own types for what the
// daemon stores (records.go), so that a change to a stored record is not
// silently a change to the protocol or to the `--json` output built on it.
func TestWireLinksNoServerSide(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case pkg == "net/http", strings.HasPrefix(pkg, "github.com/hashicorp/go-hclog"),
			strings.HasSuffix(pkg, "/supervisor/shutdown"), strings.HasSuffix(pkg, "/supervisor/spawn"),
			strings.HasSuffix(pkg, "/supervisor/registry"),
			strings.Contains(pkg, "/supervisor/internal/daemon"):
			t.Errorf("api links %s", pkg)
		}
	}
}
