//go:build linux

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A daemon that exits and keeps its processes ends every watch it had on
// them at once (monitors, a shared server's supervisor, a broker's
// watches): they wait on the daemon's life, not only on the processes,
// which outlive it. One that did not would be waited for until the bound,
// and named in the log as work left under way (issue 30: every goroutine
// of the daemon has an owner that ends it).
func TestKeepingExitLeavesNoWatchBehind(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	h := in.startHost(t, 2, "--", bin, "_fixture", "echo", "--ready")
	ps := strconv.Itoa(freePort(t))
	if _, errOut, code := in.ensure(t, "--session", "keep", "--port", ps, "--interval", "100ms", "--", bin, "_fixture", "listen", ps); code != 0 {
		t.Fatalf("ensure: exit %d: %s", code, errOut)
	}
	in.startShim("--share", "--name", "shared", "--", bin, "_fixture", "mcp")
	waitCond(t, func() error {
		for _, p := range in.mustProcesses(false) {
			if p.Broker && p.PID > 0 {
				return nil
			}
		}
		return errors.New("no broker runs yet for the shared server")
	})
	in.mustRun("daemon", "stop", "--keep-processes")
	log, err := os.ReadFile(filepath.Join(in.state, "supervisor.log"))
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(string(log), "background work under way"); i >= 0 {
		t.Errorf("the daemon left watches running at a keeping exit:\n%s", log[i:])
	}
	// The next daemon takes them over; the cleanup ends them.
	in.mustRun("daemon")
	in.waitAdopted(t, h.servers)
}
