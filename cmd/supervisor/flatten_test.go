//go:build linux

package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-86a41135/supervisor/proc"
	"github.com/seed-86a41135/supervisor/registry"
)

// An npx command runs as the program npx would run (package launcher): the
// real server-filesystem, launched the ways a host config names it, with
// no npm process left between it and the host, and the same answers. With
// --flatten=false npm exec stays, as before.
func TestFlattenNpxChain(t *testing.T) {
	npm := npmDeps(t)
	const filesystem = "@modelcontextprotocol/server-filesystem"
	for _, tc := range []struct {
		name    string
		argv    []string
		flatten bool
		share   bool
	}{
		{"package", []string{"npx", "--no-install", filesystem}, true, false},
		{"local bin", []string{"npx", "-y", "mcp-server-filesystem"}, true, false},
		{"npm exec", []string{"npm", "exec", "--yes", "--", filesystem}, true, false},
		{"kept", []string{"npx", "--no-install", filesystem}, false, false},
		{"shared", []string{"npx", "--no-install", filesystem}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newInstance(t)
			root := mcpRoot(t)
			args := []string{"run", "--name", "fs"}
			if !tc.flatten {
				args = append(args, "--flatten=false")
			}
			if tc.share {
				args = append(args, "--share")
			}
			args = append(append(append(args, "--"), tc.argv...), root)
			cmd := exec.Command(bin, args...)
			cmd.Dir = npm
			cmd.Env = mcpEnv(t, in)
			cmd.Stderr = &prefixWriter{t: t, prefix: "server: "}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "supervisor-e2e-flatten", Version: "0.0.0"}, nil)
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: wait}, nil)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			res := goSDKSession(ctx, cs, "list_allowed_directories", map[string]any{})
			if res.Error != "" || !strings.Contains(res.Text, root) {
				t.Fatalf("session: %+v, want the allowed directory %s listed", res, root)
			}
			var server registry.Process // the server's record, or its broker's
			for _, p := range in.mustProcesses(false) {
				if p.Broker || !tc.share {
					server = p
				}
			}
			if server.PID == 0 {
				t.Fatalf("no record of the server: %+v", in.mustProcesses(false))
			}
			var chain []string
			hasNpm := false // npm exec shows as "npm exec ..." (its process title)
			for _, pid := range descendantsOf(server.PID) {
				argv, _ := proc.Cmdline(pid)
				chain = append(chain, strings.Join(argv, " "))
				hasNpm = hasNpm || len(argv) > 0 && (argv[0] == "npm" || strings.HasPrefix(argv[0], "npm "))
			}
			if len(chain) == 0 || hasNpm == tc.flatten || !strings.Contains(chain[len(chain)-1], "node") {
				t.Errorf("server's process chain %q: want node alone when flattened, npm exec's chain when kept (flatten %v)", chain, tc.flatten)
			}
			var start string
			for _, e := range in.eventsJSON("--json") {
				if e.Kind == "process.start" && e.Process == server.ID {
					start = e.Detail
				}
			}
			if strings.Contains(start, "(flattened, npx: ") != tc.flatten {
				t.Errorf("process.start %q: want it to say whether it was flattened (%v)", start, tc.flatten)
			}
		})
	}
}

// descendantsOf is pid and its descendants, parents first.
func descendantsOf(pid int) []int {
	infos, _ := proc.Scan()
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		for _, info := range infos {
			if info.PPID == out[i] && info.State != 'Z' {
				out = append(out, info.PID)
			}
		}
	}
	return out
}
