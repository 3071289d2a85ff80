package daemon

import (
	"context"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/shutdown"
)

// stopByRequest stops process id because a user asked (`supervisor stop`).
// Such a stop is final: a shared server is stopped for good (no restart,
// its port freed for the next ensure), whether it runs or waits out a
// restart backoff.
func (d *Daemon) stopByRequest(ctx context.Context, id string, opt shutdown.Options) []shutdown.Outcome {
	if s := d.sharedByID(id); s != nil {
		return []shutdown.Outcome{d.finishSharedWith(ctx, s, "stopped by request", opt, true)}
	}
	return d.stopIDs(ctx, []string{id}, opt)
}

// serveStop answers `supervisor stop`. The stop runs to its end whatever
// the client does meanwhile: one that disconnects leaves no stop halfway.
func (d *Daemon) serveStop(conn *api.Conn, m api.Msg) error {
	d.answering.Add(1)
	defer d.answering.Add(-1)
	var req api.StopRequest
	if err := api.Decode(m, &req); err != nil {
		return err
	}
	g, err := api.GraceOf(req.GraceMS)
	if err != nil {
		return conn.SendError(1, "stop %s: %v", req.Target, err)
	}
	p, err := d.reg.Lookup(req.Target)
	if err != nil {
		return conn.SendError(1, "stop %s: %v", req.Target, err)
	}
	pr := relayProgress(conn, req.Progress)
	out := d.stopByRequest(context.Background(), p.ID, shutdown.Options{Grace: g, Progress: pr.fn()})
	pr.stop()
	return conn.Send(api.TypeOutcomes, &api.Outcomes{Outcomes: out})
}

// serveSessionEnd answers `supervisor session end`. A session already
// ending has its stop shortened to this request's grace.
func (d *Daemon) serveSessionEnd(conn *api.Conn, m api.Msg) error {
	d.answering.Add(1)
	defer d.answering.Add(-1)
	var req api.SessionEndRequest
	if err := api.Decode(m, &req); err != nil {
		return err
	}
	g, err := api.GraceOf(req.GraceMS)
	if err != nil {
		return conn.SendError(1, "session end %s: %v", req.ID, err)
	}
	if _, err := d.reg.Session(req.ID); err != nil {
		return conn.SendError(1, "session end %s: no such session (see `supervisor sessions --all`)", req.ID)
	}
	pr := relayProgress(conn, req.Progress)
	out := d.endSessionsWith([]string{req.ID}, []string{"ended by request"}, shutdown.Options{Grace: g, Progress: pr.fn()})
	pr.stop()
	return conn.Send(api.TypeOutcomes, &api.Outcomes{Outcomes: out})
}

// progressAfter is how long a stop runs before its client is shown
// progress: most stops are over sooner, and print nothing but the result.
const progressAfter = time.Second

// relay sends a long stop's steps to its client as progress frames: none
// in the first progressAfter, then the latest step and every later one.
// The cascade hands steps over without ever waiting on the client, and a
// client gone only ends the relay: the stop goes on.
type relay struct {
	steps chan string // the latest step not yet taken; a newer one replaces it
	quit  chan struct{}
	done  chan struct{}
}

// relayProgress starts a relay on conn; nil (reporting nothing) when the
// client did not ask for progress.
func relayProgress(conn *api.Conn, want bool) *relay {
	if !want {
		return nil
	}
	r := &relay{steps: make(chan string, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		first := time.NewTimer(progressAfter)
		defer first.Stop()
		var pending string
		shown, gone := false, false
		send := func(s string) {
			if !gone && conn.Send(api.TypeProgress, &api.Progress{Message: s}) != nil {
				gone = true
			}
		}
		for {
			select {
			case <-r.quit:
				return
			case s := <-r.steps:
				if shown {
					send(s)
				} else {
					pending = s
				}
			case <-first.C:
				shown = true
				if pending != "" {
					send(pending)
				}
			}
		}
	}()
	return r
}

// fn is the cascade's Options.Progress for r.
func (r *relay) fn() func(shutdown.Progress) {
	if r == nil {
		return nil
	}
	return func(p shutdown.Progress) {
		s := p.String()
		for {
			select {
			case r.steps <- s:
				return
			default:
			}
			select { // replace the step the relay has not taken yet
			case <-r.steps:
			default:
			}
		}
	}
}

// stop ends the relay before the reply is sent: no progress frame
// follows it.
func (r *relay) stop() {
	if r == nil {
		return
	}
	close(r.quit)
	<-r.done
}
