package daemon

import (
	"errors"
	"fmt"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/registry"
)

// serveEvents answers one events request from the store's lifecycle log.
// Following is the client's loop of requests on the same connection. bbolt
// commits one writer at a time and hands out the sequence inside it, so a
// read sees every event up to the Last it returns: asking for what is after
// it never skips one.
func (d *Daemon) serveEvents(conn *api.Conn, m api.Msg) error {
	var req api.EventsRequest
	if err := api.Decode(m, &req); err != nil {
		return err
	}
	evs, last, err := d.store.EventsAfter(req.After, req.Session, req.Limit)
	if err != nil {
		return conn.SendError(1, "events: %v", err)
	}
	if evs == nil {
		evs = []registry.Event{}
	}
	return conn.Send(api.TypeEventList, &api.EventList{Events: wireEvents(evs), Last: last})
}

// event appends an event to the log. The log never holds up the change it
// tells of: an append that fails (the store closing, a full disk) is
// logged with its reason and the work goes on.
func (d *Daemon) event(kind, session, process, detail string) {
	if err := d.reg.Event(kind, session, process, detail); err != nil {
		d.log.Warn("event not logged", "kind", kind, "session", session, "process", process, "detail", detail, "err", err)
	}
}

// send answers a client. A send fails only when the client has gone (its
// shim exited, a command was interrupted): that is logged, not acted on,
// since what the client asked for stands or was already undone.
func (d *Daemon) send(conn *api.Conn, typ string, body any, fds ...int) {
	if err := conn.Send(typ, body, fds...); err != nil {
		d.log.Debug("client gone before its answer", "type", typ, "err", err)
	}
}

// sendError answers a client with an error, as send does.
func (d *Daemon) sendError(conn *api.Conn, code int, format string, args ...any) {
	if err := conn.SendError(code, format, args...); err != nil {
		d.log.Debug("client gone before its error", "error", fmt.Sprintf(format, args...), "err", err)
	}
}

// update commits a change to process id's record. One that cannot be
// committed (the store failing, the record compacted away) is logged with
// what it was for, and the caller's work goes on: the registry keeps the
// last committed record, which recovery reads as such. errUnchanged is a
// change found unneeded, no failure.
func (d *Daemon) update(id, what string, fn func(*registry.Process) error) {
	if _, err := d.reg.Update(id, fn); err != nil && !errors.Is(err, errUnchanged) {
		d.log.Warn("record not updated", "id", id, "change", what, "err", err)
	}
}

// transition moves process id's record to state to, as update does. A
// record already final (its exit was recorded meanwhile) keeps its state:
// that is logged at debug level, as it is the expected race.
func (d *Daemon) transition(id string, to registry.ProcState, mutate func(*registry.Process)) {
	_, err := d.reg.Transition(id, to, mutate)
	switch {
	case errors.Is(err, registry.ErrBadTransition):
		d.log.Debug("record not moved: it is final already", "id", id, "to", to, "err", err)
	case err != nil:
		d.log.Warn("record not moved", "id", id, "to", to, "err", err)
	}
}

// removeCgroup removes the cgroup of a server that did not start. One left
// behind (a process in it after all) is logged; recovery's sweep of the
// instance's cgroups finds it again.
func (d *Daemon) removeCgroup(path string) {
	if err := cgroup.Remove(path); err != nil {
		d.log.Warn("cgroup of a server that did not start not removed", "path", path, "err", err)
	}
}
