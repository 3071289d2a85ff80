//go:build linux

package main

import (
	"fmt"

	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-86a41135/supervisor/api"
)

// Issue 29: inspect shows one server in full; restart stops a server the
// daemon started and starts it again as it was, and refuses, saying why,
// a host's stdio server, which only its host can start again.
func TestRestartAndInspect(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	port := strconv.Itoa(freePort(t))
	res, errOut, code := in.ensure(t, "--name", "web", "--session", "s1", "--port", port, "--", bin, "_fixture", "listen", port)
	if code != 0 {
		t.Fatalf("ensure: exit %d: %s", code, errOut)
	}
	inspect := func(args ...string) inspection {
		t.Helper()
		var got inspection
		out := in.mustRun(append([]string{"inspect", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("inspect --json: %v\n%s", err, out)
		}
		return got
	}
	before := inspect("web")
	if before.Process.ID != res.ID || before.Process.PID <= 0 {
		t.Fatalf("inspect web: process %s pid %d, want %s", before.Process.ID, before.Process.PID, res.ID)
	}
	if !slices.ContainsFunc(before.Tree, func(p treeProc) bool { return p.PID == before.Process.PID && p.Because == "the server" }) {
		t.Errorf("inspect web: tree %+v lacks the server itself", before.Tree)
	}
	if !slices.ContainsFunc(before.Events, func(e api.Event) bool { return e.Kind == "process.start" }) {
		t.Errorf("inspect web: events %+v lack its start", before.Events)
	}
	waitCond(t, func() error {
		if got := inspect(res.ID); !slices.ContainsFunc(got.Log, func(l string) bool { return strings.HasPrefix(l, "listening ") }) {
			return fmt.Errorf("inspect %s: log %q lacks the server's own line", res.ID, got.Log)
		}
		return nil
	})
	oldTok := mustToken(t, before.Process.PID)

	out := in.mustRun("restart", "web")
	if !strings.Contains(out, "restarted, pid ") {
		t.Fatalf("restart web: %q", out)
	}
	after := inspect("web")
	if after.Process.ID != res.ID || after.Process.PID == before.Process.PID || after.Process.Restarts != 1 {
		t.Fatalf("after restart: %s pid %d restarts %d; want %s under a new pid, 1 restart", after.Process.ID, after.Process.PID, after.Process.Restarts, res.ID)
	}
	if alive(before.Process.PID, oldTok) {
		t.Errorf("the old process %d still runs after the restart", before.Process.PID)
	}
	if e2, _, _ := in.ensure(t, "--name", "web", "--session", "s2", "--port", port, "--", bin, "_fixture", "listen", port); e2.ID != res.ID || e2.Started {
		t.Errorf("ensure after the restart: %+v, want the restarted %s, not a new start", e2, res.ID)
	}

	// A host's stdio server (run), inspected with its escaped grandchild,
	// whose proof of belonging inspect names.
	s := in.startShim("--session", "host", "--name", "esc", "--", bin, "_fixture", "escape")
	line, err := readLine(s.stdout, wait)
	var srv, gc int
	if _, serr := fmt.Sscanf(line, "ready %d %d", &srv, &gc); err != nil || serr != nil {
		t.Fatalf("escape fixture: %q: %v %v", line, err, serr)
	}
	cleanupByPID(t, srv)
	cleanupByPID(t, gc)
	esc := inspect("esc")
	if !slices.ContainsFunc(esc.Tree, func(p treeProc) bool {
		return p.PID == gc && slices.Contains(p.Argv, "grandchild") && p.Because != "" && p.Because != "the server"
	}) {
		t.Errorf("inspect esc: tree %+v lacks its escaped grandchild", esc.Tree)
	}
	_, errOut, code = in.run("restart", "esc")
	if code != 1 || !strings.Contains(errOut, "only the host can start it again") {
		t.Errorf("restart of a host's stdio server: exit %d, %q; want 1 saying only its host can", code, errOut)
	}
	for _, cmd := range [][]string{{"restart", "nosuch"}, {"inspect", "nosuch"}} {
		if _, errOut, code := in.run(cmd...); code != 1 || !strings.Contains(errOut, `"nosuch"`) {
			t.Errorf("%v: exit %d, %q; want 1 naming it", cmd, code, errOut)
		}
	}
}
