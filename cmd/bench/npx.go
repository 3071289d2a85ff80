//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/internal/launcher"
)

// npxChain (issue 16, launcher flattening's baseline): the real
// server-filesystem started several ways, each answering initialize and
// tools/list over raw JSON-RPC: `node ENTRY ROOT` directly; `npx
// mcp-server-filesystem ROOT` directly (npm exec finds the local bin, no
// network; it stays resident with a shell between it and node); the same
// npx command through `supervisor run`; and `pnpm dlx` and `bunx` of it,
// direct and through `supervisor run`. Per way: the time from spawn
// to tools/list answered, and the PSS of every process it takes (the
// chain; under the supervisor the shim and the log writer too), read
// after shareSettle. The goal: an npx-launched server costs ≤ its direct
// node start + 2 MiB.
func (b *bench) npxChain(ctx context.Context, res *Results) error {
	npm, err := b.npmOrSkip(res, "npx-chain", "ms", func() error {
		if _, err := exec.LookPath("npx"); err != nil {
			return fmt.Errorf("npx is not on PATH: %w", err)
		}
		return nil
	})
	if npm == "" {
		return err
	}
	trials := max(1, min(b.o.trials, 5))
	si, err := b.startShareInst(ctx, "npx-chain")
	if err != nil {
		return err
	}
	defer si.stop(ctx, b)
	root, err := si.mkdir("root")
	if err != nil {
		return err
	}
	npx, _ := exec.LookPath("npx")
	type way struct {
		what       string
		argv       []string
		env        []string // nil: the instance's
		supervised bool
	}
	ways := []way{
		{"node, direct", []string{"node", npmEntry(npm, "server-filesystem"), root}, nil, false},
		{"npx, direct", []string{npx, "mcp-server-filesystem", root}, nil, false},
		{"npx, supervised", []string{b.bin, "run", "--name", "npx-fs", "--", npx, "mcp-server-filesystem", root}, nil, true},
	}
	// pnpm dlx and bunx (testdata/npm pins both): each installs the same
	// server into the instance's private HOME first, as a host's first
	// start would (the npm registry is needed; without it these rows are
	// left out), then runs it direct and supervised (flattened).
	bins, _ := filepath.Abs(filepath.Join(npm, "node_modules", ".bin"))
	runnerEnv := []string{"PATH=" + bins + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range si.env {
		if !strings.HasPrefix(kv, "npm_config_offline=") && !strings.HasPrefix(kv, "PATH=") {
			runnerEnv = append(runnerEnv, kv)
		}
	}
	version, _ := npmVersion(npm, "server-filesystem")
	spec := "@modelcontextprotocol/server-filesystem@" + version
	for _, r := range [][]string{{"pnpm", "dlx", spec}, {"bunx", spec}} {
		exe := filepath.Join(bins, r[0])
		install := exec.CommandContext(ctx, exe, append(r[1:], root)...)
		install.Dir, install.Env = si.dir, runnerEnv // stdin empty: the server ends once started
		if out, err := install.CombinedOutput(); err != nil && !strings.Contains(string(out), "running on stdio") {
			b.progress("npx-chain: %s rows left out: %s could not install %s: %v", r[0], r[0], spec, err)
			continue
		}
		name := strings.Join(r[:len(r)-1], " ")
		argv := append(append([]string{exe}, r[1:]...), root)
		// The fair baseline: node running the runner's own install (its
		// dependencies may be other versions than testdata's).
		entry, err := installedEntry(argv, si.dir, runnerEnv)
		if err != nil {
			b.progress("npx-chain: %s rows left out: %v", r[0], err)
			continue
		}
		ways = append(ways,
			way{"node, direct, " + name + "'s install", []string{"node", entry, root}, runnerEnv, false},
			way{name + ", direct", argv, runnerEnv, false},
			way{name + ", supervised", append([]string{b.bin, "run", "--name", r[0] + "-fs", "--"}, argv...), runnerEnv, true})
	}
	b.progress("npx-chain: %d trials of server-filesystem started as node, and as npx, pnpm dlx and bunx, direct and under `supervisor run`", trials)
	start := make([]*Figure, len(ways))
	pss := make([]*Figure, len(ways))
	for i, w := range ways {
		start[i] = res.figure("npx-chain", w.what+": spawn → tools/list answered", "ms")
		pss[i] = res.figure("npx-chain", w.what+": PSS of every process it takes", "MiB")
	}
	overDirect := res.figure("npx-chain", "  npx direct − node direct, PSS", "MiB")
	hubPSS := res.figure("npx-chain", "  npx, supervised: of its PSS, the log hub's (one process for all of the daemon's servers, like the daemon itself)", "MiB")
	overSup := res.figure("npx-chain", "**npx supervised, the log hub apart − node direct, PSS** (goal ≤ 2 MiB)", "MiB")
	overSupHub := res.figure("npx-chain", "  npx supervised, the whole log hub counted − node direct, PSS", "MiB")
	var over [][2]*Figure // per runner: direct and supervised over node on its install
	for i := 3; i+2 < len(ways); i += 3 {
		runner := strings.TrimSuffix(ways[i+1].what, ", direct")
		over = append(over, [2]*Figure{
			res.figure("npx-chain", "  "+runner+" direct − node direct on its install, PSS", "MiB"),
			res.figure("npx-chain", "**"+runner+" supervised, the log hub apart − node direct on its install, PSS** (goal ≤ 2 MiB)", "MiB"),
		})
	}
	for t := range trials {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		got := make([]float64, len(ways))
		hubs := make([]float64, len(ways))
		for i, w := range ways {
			s := time.Now()
			// npm exec resolves the bin from the working directory's
			// node_modules: run the npx ways from testdata/npm; pnpm dlx
			// and bunx from elsewhere, so that no local bin is found.
			dir := npm
			inst := si
			if w.env != nil {
				cp := *si
				cp.env = w.env
				inst, dir = &cp, si.dir
			}
			c, err := b.startRaw(ctx, inst, dir, w.what, w.argv)
			if err != nil {
				res.Failures++
				return fmt.Errorf("npx-chain (%s): %w", w.what, err)
			}
			start[i].add(ms(time.Since(s)))
			time.Sleep(shareSettle)
			pids := descendants(c.cmd.Process.Pid)
			if w.supervised {
				// The chain is the daemon's child and the shim only waits,
				// or the shim exec'd the chain in its own place (then its
				// descendants are the chain already).
				recs, err := si.procs(ctx)
				if err != nil {
					c.close(b)
					return fmt.Errorf("npx-chain: %w", err)
				}
				for _, r := range recs {
					if r.State == "running" {
						pids = append(pids, descendants(r.PID)...)
					}
				}
				var servers []int
				for _, r := range recs {
					servers = append(servers, r.PID)
				}
				hubPIDs := logWriters(si.d.pid, servers)
				for _, pid := range hubPIDs {
					if m, err := smapsRollup(pid); err == nil {
						hubs[i] += m.pss
					}
				}
				pids = append(pids, hubPIDs...)
				slices.Sort(pids)
				pids = slices.Compact(pids)
			}
			var total memStat
			for _, pid := range pids {
				if m, err := smapsRollup(pid); err == nil {
					total = total.plus(m)
				}
			}
			got[i] = total.pss
			pss[i].add(total.pss)
			c.close(b)
		}
		overDirect.add(got[1] - got[0])
		hubPSS.add(hubs[2])
		overSup.add(got[2] - hubs[2] - got[0])
		overSupHub.add(got[2] - got[0])
		for k, i := 0, 3; i+2 < len(ways); k, i = k+1, i+3 {
			over[k][0].add(got[i+1] - got[i])
			over[k][1].add(got[i+2] - hubs[i+2] - got[i])
		}
		b.progress("  trial %d: PSS node %.1f MiB, npx %.1f MiB, npx supervised %.1f MiB (log hub %.1f); others %.1f", t+1, got[0], got[1], got[2], hubs[2], got[3:])
	}
	return nil
}

// descendants is pid and every process below it.
func descendants(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children(out[i])...)
	}
	return out
}

// installedEntry is the script a runner command's flattened bin runs with
// node: pnpm's shell shim names it (cmd-shim-target), bun links to it.
func installedEntry(argv []string, dir string, env []string) (string, error) {
	r, ok, why := launcher.Flatten(argv, dir, env)
	if !ok {
		return "", fmt.Errorf("%s is not flattened: %s", argv[0], why)
	}
	bin := r.Argv[0]
	if b, err := os.ReadFile(bin); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if t, ok := strings.CutPrefix(line, "# cmd-shim-target="); ok {
				return t, nil
			}
		}
	}
	return filepath.EvalSymlinks(bin)
}
