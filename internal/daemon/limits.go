package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/registry"
)

// Resource limits (run --memory-max, --cpu-max, --pids-max; memory_max,
// cpu_max, pids_max in the config) are the kernel's to enforce, in the
// server's cgroup: the daemon only sets them before the server starts,
// refuses a run whose limits it cannot set (never runs it unbounded), and
// reads afterwards which ones the kernel enforced.

// limitsOf converts a record's limits; a none (from a record or request
// that predates its conversion) is unbounded, never a value to write.
// settings lifts a none on a request's limits, so the record's go through
// that form.
func limitsOf(l *registry.Limits) cgroup.Limits {
	e := settings.EffectiveLimits(wireLimits(l), api.Limits{})
	if e == nil {
		return cgroup.Limits{}
	}
	return cgroup.Limits{MemoryMax: e.MemoryMax, CPUMax: e.CPUMax, PidsMax: e.PidsMax}
}

// setLimits enforces the run's limits on its fresh cgroup cg. The error
// says what cannot be enforced and why.
func (d *Daemon) setLimits(session, id string, l *registry.Limits, cg cgroup.Server, cgErr error) (cgroup.Limited, error) {
	cl := limitsOf(l)
	if cl.IsZero() {
		return cgroup.Limited{}, nil
	}
	if d.cgroups == nil {
		why := "this daemon runs without cgroups"
		for _, w := range d.limits {
			if strings.HasPrefix(w, "no cgroups") {
				why = w
			}
		}
		return cgroup.Limited{}, fmt.Errorf("%s cannot be enforced: %s", DescribeLimits(wireLimits(l)), why)
	}
	if cg.Path == "" {
		return cgroup.Limited{}, fmt.Errorf("%s cannot be enforced: no cgroup for this server: %v", DescribeLimits(wireLimits(l)), cgErr)
	}
	return d.cgroups.SetLimits(cg, session, id, cl)
}

// DescribeLimits is "memory_max 512M, pids_max 100" ("" for none). It
// takes the wire's Limits: inspect describes what ps answered, and a
// broker's key what a run asked.
func DescribeLimits(l *api.Limits) string {
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

// errHitNoted says a limit hit is in the record already.
var errHitNoted = errors.New("limit hit already recorded")

// noteLimitHits records the limits the kernel enforced on p since they
// were last noted: each new one is a process.limit event, a metric and a
// mark in the record (ps shows it), once however many callers look at
// once. It returns p's hits. Only the limits p has are looked at: a
// cgroup's OOM count also counts kills the machine's own memory pressure
// caused.
func (d *Daemon) noteLimitHits(p registry.Process) []string {
	if p.Limits == nil || p.Cgroup == "" && len(p.LimitCgroups) == 0 {
		return p.LimitHit
	}
	all := slices.Clone(p.LimitHit)
	for _, h := range cgroup.Hits(p.Cgroup, p.LimitCgroups) {
		if h == cgroup.HitMemory && p.Limits.MemoryMax == 0 || h == cgroup.HitPids && p.Limits.PidsMax == 0 || slices.Contains(all, h) {
			continue
		}
		all = append(all, h)
		detail := fmt.Sprintf("%s hit: %s", h, limitHitWhy(h, p.Limits))
		_, err := d.reg.UpdateLogged(p.ID, registry.Logged{Kind: "process.limit", Detail: detail}, func(r *registry.Process) error {
			if slices.Contains(r.LimitHit, h) {
				return errHitNoted
			}
			r.LimitHit = append(r.LimitHit, h)
			return nil
		})
		switch {
		case errors.Is(err, errHitNoted):
		case err != nil:
			d.log.Warn("record a limit hit", "id", p.ID, "limit", h, "err", err)
		default:
			d.metrics.LimitHit(h)
			d.log.Info("limit hit", "id", p.ID, "limit", h, "detail", detail)
		}
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

// v1Home is where a thread that forked into dirs goes back to.
func (d *Daemon) v1Home(dirs []string) []string {
	if d.cgroups == nil || len(dirs) == 0 {
		return nil
	}
	return d.cgroups.V1Home(dirs)
}

// applyLimits writes a server's deferred limits (cgroup.Apply) once it is
// in its cgroups. One that cannot be bounded is not left running: it is
// killed, and its record and an event say why.
func (d *Daemon) applyLimits(session, id string, limited cgroup.Limited, cg cgroup.Server) {
	err := cgroup.Apply(limited)
	if err == nil {
		return
	}
	d.log.Error("limits not enforced: killing the server", "id", id, "err", err)
	d.event("limits.failed", session, id, err.Error())
	d.update(id, "limits failed", func(p *registry.Process) error {
		p.Error = "its limits could not be set: " + err.Error()
		return nil
	})
	if err := cgroup.Kill(cg.Path); err != nil {
		d.log.Error("server left running without its limits", "id", id, "err", err)
	}
}
