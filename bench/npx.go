//go:build linux

package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"time"
)

// npxChain (issue 16, launcher flattening's baseline): the real
// server-filesystem started three ways, each answering initialize and
// tools/list over raw JSON-RPC: `node ENTRY ROOT` directly; `npx
// mcp-server-filesystem ROOT` directly (npm exec finds the local bin, no
// network; it stays resident with a shell between it and node); and the
// same npx command through `supervisor run`. Per way: the time from spawn
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
	ways := []struct {
		what string
		argv []string
	}{
		{"node, direct", []string{"node", npmEntry(npm, "server-filesystem"), root}},
		{"npx, direct", []string{npx, "mcp-server-filesystem", root}},
		{"npx, supervised", []string{b.bin, "run", "--name", "npx-fs", "--", npx, "mcp-server-filesystem", root}},
	}
	b.progress("npx-chain: %d trials of server-filesystem started as node, as npx, and as npx under `supervisor run`", trials)
	var start, pss [3]*Figure
	for i, w := range ways {
		start[i] = res.figure("npx-chain", w.what+": spawn → tools/list answered", "ms")
		pss[i] = res.figure("npx-chain", w.what+": PSS of every process it takes", "MiB")
	}
	overDirect := res.figure("npx-chain", "  npx direct − node direct, PSS", "MiB")
	hubPSS := res.figure("npx-chain", "  npx, supervised: of its PSS, the log hub's (one process for all of the daemon's servers, like the daemon itself)", "MiB")
	overSup := res.figure("npx-chain", "**npx supervised, the log hub apart − node direct, PSS** (goal ≤ 2 MiB)", "MiB")
	overSupHub := res.figure("npx-chain", "  npx supervised, the whole log hub counted − node direct, PSS", "MiB")
	for t := range trials {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var got [3]float64
		var hub float64
		for i, w := range ways {
			s := time.Now()
			// npm exec resolves the bin from the working directory's
			// node_modules: run every way from testdata/npm.
			c, err := b.startRaw(ctx, si, npm, w.what, w.argv)
			if err != nil {
				res.Failures++
				return fmt.Errorf("npx-chain (%s): %w", w.what, err)
			}
			start[i].add(ms(time.Since(s)))
			time.Sleep(shareSettle)
			pids := descendants(c.cmd.Process.Pid)
			if i == 2 {
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
				hubs := logWriters(si.d.pid, servers)
				for _, pid := range hubs {
					if m, err := smapsRollup(pid); err == nil {
						hub += m.pss
					}
				}
				pids = append(pids, hubs...)
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
		hubPSS.add(hub)
		overSup.add(got[2] - hub - got[0])
		overSupHub.add(got[2] - got[0])
		b.progress("  trial %d: PSS node %.1f MiB, npx %.1f MiB, npx supervised %.1f MiB (log hub %.1f)", t+1, got[0], got[1], got[2], hub)
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
