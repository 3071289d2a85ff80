package daemon

import (
	"context"
	"fmt"
	"strings"

	"github.com/seed-86a41135/supervisor/internal/sandbox/denials"
	"github.com/seed-86a41135/supervisor/registry"
)

// openDenials starts reading what Landlock denies this daemon's servers
// from the kernel's audit, where it can (root, Landlock ABI 7): nil, and
// the reason in the capabilities, where it cannot.
func (d *Daemon) openDenials() *denials.Reader {
	switch {
	case d.sandboxCaps.Mechanism != "landlock":
		d.sandboxCaps.NoDenialEvents = "Landlock's audit records are Linux's"
		return nil
	case d.sandboxCaps.ABI < 7:
		d.sandboxCaps.NoDenialEvents = fmt.Sprintf("this kernel's Landlock, ABI %d, writes no audit records: ABI 7, Linux 6.15, does", d.sandboxCaps.ABI)
		return nil
	}
	r, err := denials.Open()
	if err != nil {
		d.sandboxCaps.NoDenialEvents = err.Error()
		return nil
	}
	return r
}

// denialsWhyNot says why a denied file is not an event now, or "": the
// kernel's audit may be turned on or off while the daemon runs.
func (d *Daemon) denialsWhyNot() string {
	if d.sandboxCaps.NoDenialEvents != "" {
		return d.sandboxCaps.NoDenialEvents
	}
	on, err := denials.On()
	switch {
	case err != nil:
		return err.Error()
	case !on:
		return "the kernel's audit is off: `auditctl -e 1` or auditd turns it on"
	}
	return ""
}

// sandboxStatus is the sandbox's line of `status`: what this kernel can
// enforce, and whether denied files are events now.
func (d *Daemon) sandboxStatus() string {
	caps := d.sandboxCaps
	caps.NoDenialEvents = d.denialsWhyNot()
	return caps.String()
}

// denialWatch is what watchDenials keeps: which Landlock domain is which
// server's, and how many events each server has had.
type denialWatch struct {
	domains map[string]string // domain id -> server id
	events  map[string]int    // server id -> sandbox.denied events of the kernel's
}

// watchDenials makes each denial the kernel's audit reports of one of this
// daemon's sandboxed servers a sandbox.denied event and a count in the
// metrics, until ctx ends. Denials of other programs' sandboxes, another
// daemon's included, are passed over.
func (d *Daemon) watchDenials(ctx context.Context, r *denials.Reader) error {
	w := denialWatch{domains: map[string]string{}, events: map[string]int{}}
	err := r.Run(ctx, func(x denials.Denial) {
		p, ok := d.denialServer(&w, x)
		if !ok {
			return
		}
		d.metrics.SandboxDenied(x.What)
		if len(w.events) > 4096 {
			clear(w.events) // servers long gone: a fresh count is harmless
		}
		w.events[p.ID]++
		switch n := w.events[p.ID]; {
		case n < maxDenialEvents:
			d.event("sandbox.denied", p.Session, p.ID, x.String())
		case n == maxDenialEvents:
			d.event("sandbox.denied", p.Session, p.ID, x.String()+"; further denials of this server are counted (supervisor_sandbox_denied_total), not logged")
		}
	})
	if err != nil {
		// An optional view: the daemon goes on without it, and says so.
		d.log.Warn("the kernel's audit cannot be read any more: denied files are not events until the daemon restarts", "err", err)
		<-ctx.Done()
	}
	return nil
}

// denialServer finds the server x was denied to: by the tag its domain was
// made with (the server's id; in the first denial of a domain), by the
// domain once known, else by the cgroup of the process denied (after a
// daemon restart, where its system calls are audited).
func (d *Daemon) denialServer(w *denialWatch, x denials.Denial) (registry.Process, bool) {
	if id, ok := w.domains[x.Domain]; ok {
		if id == "" {
			return registry.Process{}, false // known not to be ours
		}
		p, err := d.reg.Process(id)
		return p, err == nil
	}
	var p registry.Process
	found := false
	switch {
	case x.Tag != "":
		// Another's sandbox (another daemon's, another program's) has a
		// tag that is no id of ours.
		var err error
		p, err = d.reg.Process(x.Tag)
		found = err == nil && p.Sandboxed
	case x.PID > 0:
		p, found = d.sandboxedServerOf(x.PID)
	}
	if len(w.domains) > 4096 {
		clear(w.domains) // servers long gone: their domains are known again by pid
	}
	if !found {
		if x.Tag != "" {
			// Another program's sandbox, by its tag: remembered as such,
			// so its later denials cost no /proc read and no scan of the
			// registry. (A pid not found may be one that exited: asked
			// again.)
			w.domains[x.Domain] = ""
		}
		return registry.Process{}, false
	}
	w.domains[x.Domain] = p.ID
	return p, true
}

// sandboxedServerOf is the live sandboxed server whose cgroup pid is in,
// if any.
func (d *Daemon) sandboxedServerOf(pid int) (registry.Process, bool) {
	if d.cgroups == nil || pid <= 0 {
		return registry.Process{}, false
	}
	cg, err := d.cgroups.Of(pid)
	if err != nil {
		return registry.Process{}, false
	}
	return d.sandboxedInCgroup(cg)
}

// sandboxedInCgroup is the live sandboxed server whose cgroup is cg or
// holds it.
func (d *Daemon) sandboxedInCgroup(cg string) (registry.Process, bool) {
	for _, p := range d.reg.Processes(registry.Filter{}) {
		if p.Sandboxed && p.Cgroup != "" && !p.State.Final() && (cg == p.Cgroup || strings.HasPrefix(cg, p.Cgroup+"/")) {
			return p, true
		}
	}
	return registry.Process{}, false
}
