package leanrun

import (
	"os/exec"
	"strings"
	"testing"
)

// The lean entry links only what a run's fast path needs: its start is
// paid at every server start (issue 27). Not the CLI framework, the
// logger, HTTP, the store, the daemon, the cascade or the config file.
func TestLeanEntryLinksLittle(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/supervisor-run").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	pkgs := strings.Fields(string(out))
	for _, pkg := range pkgs {
		switch {
		case pkg == "net/http", pkg == "regexp", pkg == "crypto/tls",
			strings.HasPrefix(pkg, "github.com/hashicorp/go-hclog"), strings.HasPrefix(pkg, "github.com/spf13/cobra"),
			strings.HasPrefix(pkg, "go.etcd.io/bbolt"),
			strings.Contains(pkg, "/supervisor/internal/daemon"), strings.Contains(pkg, "/supervisor/internal/shim"),
			strings.Contains(pkg, "/supervisor/internal/config"), strings.Contains(pkg, "/supervisor/internal/settings"),
			strings.HasSuffix(pkg, "/supervisor/shutdown"):
			t.Errorf("supervisor-run links %s", pkg)
		}
	}
	if len(pkgs) > 130 {
		t.Errorf("supervisor-run links %d packages, want at most 130 (121 when this test was written)", len(pkgs))
	}
}
