package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/shutdown"
)

// socketCheckEvery is how often the daemon looks at its socket file.
const socketCheckEvery = 2 * time.Second

// socketKeeper is the daemon's current listener. A socket file deleted
// (a user's rm, a cleaner of /tmp) or replaced by a dead one leaves the
// daemon serving nobody while it holds the singleton lock, so no other
// daemon can start: every client would fall back to local mode and ps,
// stop and session end would fail until someone killed the daemon by
// hand. The daemon listens again at the same path instead.
type socketKeeper struct {
	path  string
	paths api.Paths // to make the socket's directory again, if it went too

	mu     sync.Mutex
	cur    *api.Listener
	closed bool
}

// close stops the current listener (the daemon is stopping).
func (k *socketKeeper) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if ok, _ := k.cur.Intact(); ok {
		k.cur.Close() // removes the socket file, ours
		return
	}
	_ = k.cur.Abandon() // the file at the path is not ours: left alone; closing our socket cannot fail in a way we could act on
}

// swap makes nl the current listener and abandons the old one, whose
// file is gone or another's; false if the daemon is stopping.
func (k *socketKeeper) swap(nl *api.Listener) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		nl.Close()
		return false
	}
	_ = k.cur.Abandon() // as in close: nothing to act on
	k.cur = nl
	return true
}

func (k *socketKeeper) current() *api.Listener {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cur
}

// keepSocket serves the socket until ctx ends, and listens anew whenever
// its file was deleted or replaced by a socket nobody serves. A socket
// that another process serves is left alone and said once: clients reach
// that process, and the daemon will not take its path.
func (d *Daemon) keepSocket(ctx context.Context, k *socketKeeper) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	errs := make(chan error, 1)
	serve := func(ln *api.Listener) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.serve(ln); err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}()
	}
	serve(k.current())
	t := time.NewTicker(socketCheckEvery)
	defer t.Stop()
	warned := ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return err
		case <-t.C:
		}
		ok, why := k.current().Intact()
		if ok {
			warned = ""
			continue
		}
		if why != "the socket file was deleted" && api.Served(k.path) {
			if warned != why {
				warned = why
				d.log.Error("another process serves on the daemon's socket path; not taking it back", "socket", k.path)
				d.event("daemon.socket", "", "", fmt.Sprintf("%s, and another process serves there: clients reach it, not this daemon (pid %d); stop it or this daemon", why, os.Getpid()))
			}
			continue
		}
		// The state directory gone with the socket in it is the instance
		// removed (its registry with it): making it again would serve an
		// empty directory while this daemon writes an unlinked registry,
		// and keep a keeper restarting into it. This daemon steps down as
		// for an upgrade, leaving every server to the next daemon, which
		// finds them by their markers.
		if filepath.Dir(k.path) == k.paths.StateDir {
			if _, err := os.Stat(k.paths.StateDir); errors.Is(err, fs.ErrNotExist) {
				d.log.Error("the state directory is gone with the socket: exiting and leaving every server running for the next daemon", "state", k.paths.StateDir)
				req := stopRequest{reply: make(chan []shutdown.Outcome, 1), sent: make(chan struct{}), keep: true}
				close(req.sent) // nobody waits for the outcomes
				select {
				case d.stopReq <- req:
				case <-ctx.Done():
				}
				<-ctx.Done() // the stopper ends the group once it has let go
				return nil
			}
		}
		// A cleaner of /tmp may take the fallback directory with the file.
		nl, err := func() (*api.Listener, error) {
			if err := socketDir(k.paths); err != nil {
				return nil, err
			}
			return api.Listen(k.path)
		}()
		if err != nil {
			if warned != err.Error() {
				warned = err.Error()
				d.log.Error("cannot listen again on the daemon's socket", "socket", k.path, "why", why, "err", err)
				d.event("daemon.socket", "", "", fmt.Sprintf("%s and could not be made again (%v): retrying every %v", why, err, socketCheckEvery))
			}
			continue
		}
		if !k.swap(nl) {
			return nil
		}
		warned = ""
		serve(nl)
		d.log.Warn("socket file lost; listening on a new one", "socket", k.path, "why", why)
		d.event("daemon.socket", "", "", why+": listening on a new one at "+k.path)
	}
}
