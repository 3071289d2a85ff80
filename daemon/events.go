package daemon

import (
	"github.com/seed-86a41135/supervisor/api"
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
	return conn.Send(api.TypeEventList, &api.EventList{Events: evs, Last: last})
}
