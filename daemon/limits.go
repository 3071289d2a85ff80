package daemon

import (
	"fmt"
	"slices"
	"strings"

	"github.com/seed-86a41135/supervisor/cgroup"
	"github.com/seed-86a41135/supervisor/registry"
)

// Resource limits (run --memory-max, --cpu-max, --pids-max; memory_max,
// cpu_max, pids_max in the config) are the kernel's to enforce, in the
// server's cgroup: the daemon only sets them before the server starts,
// refuses a run whose limits it cannot set (never runs it unbounded), and
// reads afterwards which ones the kernel enforced.

// limitsOf converts a record's limits.
func limitsOf(l *registry.Limits) cgroup.Limits {
	if l == nil {
		return cgroup.Limits{}
	}
	return cgroup.Limits{MemoryMax: l.MemoryMax, CPUMax: l.CPUMax, PidsMax: l.PidsMax}
}

// setLimits enforces the run's limits on its fresh cgroup cg. The error
// says what cannot be enforced and why.
func (d *Daemon) setLimits(session, id string, l *registry.Limits, cg cgroup.Server) (cgroup.Limited, error) {
	cl := limitsOf(l)
	if cl.IsZero() {
		return cgroup.Limited{}, nil
	}
	if d.cgroups == nil || cg.Path == "" {
		why := "this daemon runs without cgroups"
		for _, w := range d.limits {
			if strings.HasPrefix(w, "no cgroups") {
				why = w
			}
		}
		return cgroup.Limited{}, fmt.Errorf("%s cannot be enforced: %s", describeLimits(l), why)
	}
	return d.cgroups.SetLimits(cg, session, id, cl)
}

// describeLimits is "memory_max 512M, pids_max 100".
func describeLimits(l *registry.Limits) string {
	if l == nil {
		return ""
	}
	var parts []string
	if l.MemoryMax > 0 {
		parts = append(parts, "memory_max "+cgroup.FormatMemory(l.MemoryMax))
	}
	if l.CPUMax > 0 {
		parts = append(parts, fmt.Sprintf("cpu_max %g", l.CPUMax))
	}
	if l.PidsMax > 0 {
		parts = append(parts, fmt.Sprintf("pids_max %d", l.PidsMax))
	}
	return strings.Join(parts, ", ")
}

// noteLimitHits records the limits the kernel enforced on p since they
// were last noted: each new one is a process.limit event, a metric and a
// mark in the record (ps shows it). It returns p's hits.
func (d *Daemon) noteLimitHits(p registry.Process) []string {
	if p.Limits == nil || p.Cgroup == "" && len(p.LimitCgroups) == 0 {
		return p.LimitHit
	}
	hits := cgroup.Hits(p.Cgroup, p.LimitCgroups)
	var fresh []string
	for _, h := range hits {
		if !slices.Contains(p.LimitHit, h) {
			fresh = append(fresh, h)
		}
	}
	if len(fresh) == 0 {
		return p.LimitHit
	}
	all := append(slices.Clone(p.LimitHit), fresh...)
	for _, h := range fresh {
		detail := fmt.Sprintf("%s hit: %s", h, limitHitWhy(h, p.Limits))
		if _, err := d.reg.UpdateLogged(p.ID, registry.Logged{Kind: "process.limit", Detail: detail}, func(r *registry.Process) error {
			if !slices.Contains(r.LimitHit, h) {
				r.LimitHit = append(r.LimitHit, h)
			}
			return nil
		}); err != nil {
			d.log.Warn("record a limit hit", "id", p.ID, "limit", h, "err", err)
		}
		d.metrics.limitHit(h)
		d.log.Info("limit hit", "id", p.ID, "limit", h, "detail", detail)
	}
	return all
}

func limitHitWhy(hit string, l *registry.Limits) string {
	switch hit {
	case cgroup.HitMemory:
		return fmt.Sprintf("the kernel's OOM killer killed a process of it at %s", cgroup.FormatMemory(l.MemoryMax))
	case cgroup.HitPids:
		return fmt.Sprintf("a fork or thread failed at %d processes", l.PidsMax)
	}
	return hit
}

// resourceLimits is status's word on each limit.
func (d *Daemon) resourceLimits() map[string]string {
	if d.cgroups == nil {
		why := "unavailable: this daemon runs without cgroups"
		return map[string]string{"memory_max": why, "cpu_max": why, "pids_max": why}
	}
	return d.cgroups.LimitSupport()
}
