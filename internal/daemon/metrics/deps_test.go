package metrics

import (
	"os/exec"
	"strings"
	"testing"
)

// TestMetricsLinksNoDaemonState: the metrics reach the daemon only
// through Source. Linking the daemon would be a cycle the compiler
// refuses; linking its registry, store, spawning or wire would be a way
// to read its state here after all, which this test refuses.
func TestMetricsLinksNoDaemonState(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, no := range []string{"/supervisor/internal/daemon", "/supervisor/registry", "/supervisor/store",
			"/supervisor/spawn", "/supervisor/api"} {
			if strings.HasSuffix(pkg, no) {
				t.Errorf("internal/daemon/metrics links %s", pkg)
			}
		}
	}
}
