package daemon

import (
	"math"
	"sync"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/usage"
	"github.com/seed-86a41135/supervisor/registry"
)

// usageFresh is how long a sample serves every ps and sessions call:
// listing 4,000 servers twice a second measures them once.
const usageFresh = time.Second

// usageKeep is how long a sample stays the base of a CPU percentage; an
// older one (nobody asked for a while) gives way to the average since the
// process started.
const usageKeep = time.Minute

// usageCache keeps each running server's latest sample and the one before
// it, by record ID.
type usageCache struct {
	mu   sync.Mutex
	last map[string]usageSamples
}

type usageSamples struct {
	pid        int
	prev, last usage.Sample
	// gen is when the fill that took last began: a fill measures every
	// server it lists that is older than usageFresh by this, so a listing
	// of thousands is measured as one, not a slice of it per call.
	gen time.Time
}

// fillUsage sets Usage on every running process of procs: from a sample
// younger than usageFresh, else from a new one. A limited server freshly
// sampled is also checked for the limits the kernel enforced on it
// (noteLimitHits), after the samples, outside their lock: it commits.
func (d *Daemon) fillUsage(procs []registry.Process) {
	for _, i := range d.sampleUsage(procs) {
		procs[i].LimitHit = d.noteLimitHits(procs[i])
	}
}

// sampleUsage fills procs' Usage and returns which of them are limited
// servers it sampled anew.
func (d *Daemon) sampleUsage(procs []registry.Process) (limited []int) {
	c := &d.usage
	now := time.Now()
	var tree map[int][]int // children by parent, for servers with no cgroup
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]usageSamples{}
	}
	for id, e := range c.last {
		if now.Sub(e.gen) > usageKeep {
			delete(c.last, id)
		}
	}
	for i := range procs {
		p := &procs[i]
		if p.State != registry.StateRunning || p.PID <= 0 {
			continue
		}
		e, ok := c.last[p.ID]
		if !ok || e.pid != p.PID || now.Sub(e.gen) >= usageFresh {
			t := usage.Target{Cgroup: p.Cgroup, PIDs: []int{p.PID}}
			if d.cgroups != nil {
				t.CgroupMemory = d.cgroups.AccountsMemory()
				t.V1Memory = d.cgroups.V1Memory(p.LimitCgroups)
			}
			if p.Cgroup == "" {
				if tree == nil {
					tree = childrenOf()
				}
				t.PIDs = descendantsIn(tree, p.PID)
			}
			s := usage.Of(t)
			if ok && e.pid == p.PID && now.Sub(e.last.At) <= usageKeep {
				e.prev = e.last
			} else {
				e.prev = usage.Sample{}
			}
			e.pid, e.last, e.gen = p.PID, s, now
			c.last[p.ID] = e
			if p.Limits != nil {
				limited = append(limited, i)
			}
		}
		if e.last.MemorySource == "" {
			continue // gone, or not measured on this OS: ps shows dashes
		}
		// Rounded: a listing of thousands carries these for each.
		p.Usage = &registry.Usage{
			MemoryBytes:  e.last.Memory,
			MemorySource: e.last.MemorySource,
			CPUPercent:   math.Round(usage.Percent(e.prev, e.last, p.StartedAt)*100) / 100,
			CPUSeconds:   math.Round(e.last.CPU.Seconds()*1000) / 1000,
			Procs:        e.last.Procs,
		}
	}
	return limited
}

// childrenOf maps each process to its children, from one scan.
func childrenOf() map[int][]int {
	infos, _ := proc.Scan()
	out := make(map[int][]int, len(infos))
	for _, in := range infos {
		out[in.PPID] = append(out[in.PPID], in.PID)
	}
	return out
}

// descendantsIn is pid and every process below it in tree.
func descendantsIn(tree map[int][]int, pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, tree[out[i]]...)
	}
	return out
}
