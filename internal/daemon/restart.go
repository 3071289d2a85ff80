package daemon

import (
	"fmt"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/registry"
)

// serveRestart answers `supervisor restart`: a server the daemon started
// itself (ensure: shared on a port) is stopped and started again as it
// was, by its supervision goroutine, at once. Any other is refused with
// why: a host's stdio server talks to its host over the host's own pipes,
// which no new process could be given, so only its host can start it
// again.
func (d *Daemon) serveRestart(conn *api.Conn, m api.Msg) error {
	d.answering.Add(1)
	defer d.answering.Add(-1)
	var req api.RestartRequest
	if err := api.Decode(m, &req); err != nil {
		return err
	}
	g, err := api.GraceOf(req.GraceMS)
	if err != nil {
		return conn.SendError(1, "restart %s: %v", req.Target, err)
	}
	p, err := d.reg.Lookup(req.Target)
	if err != nil {
		return conn.SendError(1, "restart %s: %v", req.Target, err)
	}
	if why := notRestartable(p, d.sharedByID(p.ID)); why != "" {
		return conn.SendError(1, "restart %s: %s", req.Target, why)
	}
	s := d.sharedByID(p.ID)
	order := restartOrder{grace: g, done: make(chan error, 1)}
	select {
	case s.restartNow <- order:
	case <-s.life.StoppedCh():
		return conn.SendError(1, "restart %s: it was stopped for good meanwhile", req.Target)
	default:
		return conn.SendError(1, "restart %s: a restart is under way already", req.Target)
	}
	st := d.settings()
	limit := g + st.ReadyTimeout + time.Minute // its stop, its start, its health
	select {
	case err := <-order.done:
		if err != nil {
			return conn.SendError(1, "restart %s: stopped, but did not start again: %v (see `supervisor events`)", req.Target, err)
		}
	case <-time.After(limit):
		return conn.SendError(1, "restart %s: not healthy again within %v; it goes on restarting (see `supervisor events`)", req.Target, limit)
	}
	now, err := d.reg.Lookup(p.ID)
	if err != nil {
		return conn.SendError(1, "restart %s: restarted, but its record cannot be read: %v", req.Target, err)
	}
	return conn.Send(api.TypeRestarted, &api.Restarted{ID: p.ID, Name: p.Name, OldPID: p.PID, PID: now.PID})
}

// notRestartable says why p cannot be restarted by the daemon, or "".
func notRestartable(p registry.Process, s *shared) string {
	switch {
	case p.State.Final():
		return fmt.Sprintf("%s (%s) is not running (%s): its host, or `supervisor ensure`, starts it again", p.ID, p.Name, p.State)
	case s != nil && s.restartNow == nil:
		return fmt.Sprintf("%s (%s) was adopted by this daemon after a restart, without the environment it was started in: stop it (`supervisor stop %s`) and the next `supervisor ensure` starts it", p.ID, p.Name, p.ID)
	case s != nil:
		return ""
	case p.Broker || p.Shared:
		return fmt.Sprintf("%s (%s) is a shared server's broker: its clients' pipes are its own; stop it (`supervisor stop %s`) and its hosts start it again", p.ID, p.Name, p.ID)
	default:
		return fmt.Sprintf("%s (%s) talks to its host over the host's own pipes, which no new process can be given: only the host can start it again (Claude Code: /mcp, then reconnect); `supervisor stop %s` stops it", p.ID, p.Name, p.ID)
	}
}
