package sharing

import (
	"context"
	"sync"
)

// Server is what a slot holds: a shared server with its life (Refs).
type Server interface {
	comparable
	Life() *Refs
}

// Slots holds one server per port, and serializes its starts: the first
// caller for a port with no server starts it, those that come meanwhile
// wait for that start and share its result.
type Slots[S Server] struct {
	mu    sync.Mutex
	ports map[int]*slot[S]
}

type slot[S Server] struct {
	mu     sync.Mutex
	srv    S
	has    bool
	flight *flight[S]
}

type flight[S Server] struct {
	done chan struct{}
	srv  S
	err  error
}

func (t *Slots[S]) slot(port int) *slot[S] {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ports == nil {
		t.ports = map[int]*slot[S]{}
	}
	s, ok := t.ports[port]
	if !ok {
		s = &slot[S]{}
		t.ports[port] = s
	}
	return s
}

// Get returns the server in service on port, or starts one with start when
// there is none; started says this call started it. A server being
// stopped for good is waited for, and a new one started: a reference to a
// dying server is never handed out, nor is its listener taken for a
// stranger's. A failed start is every waiter's error.
func (t *Slots[S]) Get(ctx context.Context, port int, start func() (S, error)) (srv S, started bool, err error) {
	sl := t.slot(port)
	for {
		sl.mu.Lock()
		if sl.has {
			srv := sl.srv
			sl.mu.Unlock()
			if done := srv.Life().StoppedCh(); done != nil {
				select {
				case <-done:
				case <-ctx.Done():
					return srv, false, ctx.Err()
				}
				continue
			}
			return srv, false, nil
		}
		if f := sl.flight; f != nil {
			sl.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return srv, false, ctx.Err()
			}
			if f.err != nil {
				return srv, false, f.err
			}
			continue // it is in the slot now
		}
		f := &flight[S]{done: make(chan struct{})}
		sl.flight = f
		sl.mu.Unlock()

		f.srv, f.err = start()
		sl.mu.Lock()
		sl.flight = nil
		if f.err == nil {
			sl.srv, sl.has = f.srv, true
		}
		sl.mu.Unlock()
		close(f.done)
		return f.srv, f.err == nil, f.err
	}
}

// Put places srv in port's slot: a server taken back after a daemon
// restart.
func (t *Slots[S]) Put(port int, srv S) {
	sl := t.slot(port)
	sl.mu.Lock()
	sl.srv, sl.has = srv, true
	sl.mu.Unlock()
}

// Forget empties port's slot if srv is still in it: its stop for good is
// done, and the port is free for a new one.
func (t *Slots[S]) Forget(port int, srv S) {
	sl := t.slot(port)
	sl.mu.Lock()
	if sl.has && sl.srv == srv {
		var none S
		sl.srv, sl.has = none, false
	}
	sl.mu.Unlock()
}

// All are the servers of every port.
func (t *Slots[S]) All() []S {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []S
	for _, sl := range t.ports {
		sl.mu.Lock()
		if sl.has {
			out = append(out, sl.srv)
		}
		sl.mu.Unlock()
	}
	return out
}
