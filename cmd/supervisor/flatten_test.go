//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// An npx command runs as the program npx would run (package launcher): the
// real server-filesystem, launched the ways a host config names it, with
// no npm process left between it and the host, and the same answers. With
// --flatten=false npm exec stays, as before.
func TestFlattenNpxChain(t *testing.T) {
	t.Parallel()
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
			chain, start := runFilesystem(t, in, npm, mcpEnv(t, in), tc.argv, tc.flatten, tc.share)
			hasNpm := false // npm exec shows as "npm exec ..." (its process title)
			for _, argv := range chain {
				hasNpm = hasNpm || len(argv) > 0 && (argv[0] == "npm" || strings.HasPrefix(argv[0], "npm "))
			}
			if hasNpm == tc.flatten || !strings.Contains(strings.Join(chain[len(chain)-1], " "), "node") {
				t.Errorf("server's process chain %q: want node alone when flattened, npm exec's chain when kept (flatten %v)", chain, tc.flatten)
			}
			if strings.Contains(start, "(flattened, npx: ") != tc.flatten {
				t.Errorf("process.start %q: want it to say whether it was flattened (%v)", start, tc.flatten)
			}
		})
	}
}

// pnpm dlx and bunx commands run as the program they would run from their
// caches: the real runners (testdata/npm pins pnpm and bun) first install
// the real server-filesystem into a private HOME, as a host's first start
// would (this needs the npm registry); then under `supervisor run` the
// server runs with no pnpm or bun process left above it, and answers.
func TestFlattenPnpmDlxAndBunx(t *testing.T) {
	t.Parallel()
	npm := npmDeps(t)
	bins := filepath.Join(npm, "node_modules", ".bin")
	for _, r := range []string{"pnpm", "bunx"} {
		if _, err := os.Stat(filepath.Join(bins, r)); err != nil {
			npmMissing(t, "testdata/npm/node_modules lacks "+r)
		}
	}
	b, err := os.ReadFile(filepath.Join(npm, "node_modules", "@modelcontextprotocol", "server-filesystem", "package.json"))
	var pkg struct{ Version string }
	if err != nil || json.Unmarshal(b, &pkg) != nil || pkg.Version == "" {
		t.Fatalf("server-filesystem's version: %v", err)
	}
	spec := "@modelcontextprotocol/server-filesystem@" + pkg.Version
	for _, tc := range []struct {
		runner []string
		via    string
	}{
		{[]string{"pnpm", "dlx", spec}, "pnpm dlx: "},
		{[]string{"bunx", spec}, "bunx: "},
	} {
		t.Run(tc.runner[0], func(t *testing.T) {
			in := newInstance(t)
			env := append(mcpEnv(t, in), "PATH="+bins+string(os.PathListSeparator)+os.Getenv("PATH"))
			// Outside the project, so that no bin of its own is found.
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			install := exec.CommandContext(ctx, filepath.Join(bins, tc.runner[0]), append(tc.runner[1:], dir)...)
			install.Dir = dir // stdin is empty: the server ends once started
			install.Env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "npm_config_offline=") })
			if out, err := install.CombinedOutput(); err != nil && !strings.Contains(string(out), "running on stdio") {
				npmMissing(t, fmt.Sprintf("%s could not install %s (it needs the npm registry): %v\n%s", tc.runner[0], spec, err, out))
			}
			chain, start := runFilesystem(t, in, dir, env, tc.runner, true, false)
			if len(chain) != 1 {
				t.Errorf("server's process chain %q: want node alone", chain)
			}
			for _, argv := range chain {
				if name := filepath.Base(argv[0]); name == "pnpm" || name == "bun" || name == "bunx" {
					t.Errorf("server's process chain %q: %s is still there", chain, name)
				}
			}
			if !strings.Contains(start, "(flattened, "+tc.via) {
				t.Errorf("process.start %q: want it flattened through %s", start, tc.via)
			}
		})
	}
}

// runFilesystem runs argv with an allowed directory through `supervisor
// run --name fs` in dir, as an MCP host would, checks the server lists that
// directory, and returns the server's process chain (its record's, or its
// broker's when shared; parents first) and its process.start detail.
func runFilesystem(t *testing.T, in *instance, dir string, env, argv []string, flatten, share bool) ([][]string, string) {
	t.Helper()
	root := mcpRoot(t)
	args := []string{"run", "--name", "fs"}
	if !flatten {
		args = append(args, "--flatten=false")
	}
	if share {
		args = append(args, "--share")
	}
	args = append(append(append(args, "--"), argv...), root)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
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
	var server api.Process // the server's record, or its broker's
	for _, p := range in.mustProcesses(false) {
		if p.Broker || !share {
			server = p
		}
	}
	if server.PID == 0 {
		t.Fatalf("no record of the server: %+v", in.mustProcesses(false))
	}
	var chain [][]string
	for _, pid := range descendantsOf(server.PID) {
		argv, _ := proc.Cmdline(pid)
		chain = append(chain, argv)
	}
	if len(chain) == 0 {
		t.Fatalf("no process of the server %d", server.PID)
	}
	var start string
	for _, e := range in.eventsJSON("--json") {
		if e.Kind == "process.start" && e.Process == server.ID {
			start = e.Detail
		}
	}
	return chain, start
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
