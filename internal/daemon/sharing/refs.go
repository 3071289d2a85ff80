package sharing

import (
	"sync"
	"time"
)

// Refs is the life of one shared server apart from its processes: the
// sessions that hold it, the linger that begins when the last one lets go,
// and the one-way passage from in service to stopping (no new references)
// to stopped. A server restarts under the same Refs; it is stopped for good
// only once.
type Refs struct {
	linger time.Duration
	// idle is called, once, when the linger passes with no session and
	// nothing stopping the server yet; the server is stopping from then on.
	idle func()

	mu        sync.Mutex
	sessions  map[string]bool
	timer     *time.Timer
	gen       int  // bumped when a session takes a reference: a stale timer does nothing
	stopping  bool // no new references: a stop for good is decided
	finishing bool // the stop for good is under way (Finish or Detach ran)
	quit      chan struct{}
	stopped   chan struct{}
}

// NewRefs is the life of a server with no session yet (not lingering: a
// reference is expected; Linger arms the timer where none is). idle runs
// when its linger passes unclaimed.
func NewRefs(linger time.Duration, idle func()) *Refs {
	return &Refs{linger: linger, idle: idle, sessions: map[string]bool{},
		quit: make(chan struct{}), stopped: make(chan struct{})}
}

// Take adds session's reference, unless the server is stopping (ok false).
// A session that is no longer active (it ended while its ensure was in
// flight) takes none: a server left with no session then lingers, and
// lingering says so.
func (r *Refs) Take(session string, active bool) (ok, lingering bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return false, false
	}
	if active {
		r.sessions[session] = true
		r.gen++
		r.disarm()
		return true, false
	}
	if len(r.sessions) == 0 {
		r.arm()
		return true, true
	}
	return true, false
}

// Release drops session's reference; lingering says it was the last one
// and the linger began.
func (r *Refs) Release(session string) (lingering bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.sessions[session] {
		return false
	}
	delete(r.sessions, session)
	if len(r.sessions) == 0 && !r.stopping {
		r.arm()
		return true
	}
	return false
}

// Linger arms the linger of a server taken back with no session (a daemon
// restart re-adopted it): it stops unless an ensure claims it in time.
func (r *Refs) Linger() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sessions) == 0 && !r.stopping {
		r.arm()
	}
}

// arm starts the linger timer; r.mu is held. The check when it fires and
// the decision to stop are one critical section, so a concurrent Take
// either gets in first or sees the server stopping.
func (r *Refs) arm() {
	r.disarm()
	gen := r.gen
	r.timer = time.AfterFunc(r.linger, func() {
		r.mu.Lock()
		if len(r.sessions) != 0 || r.gen != gen || r.stopping {
			r.mu.Unlock()
			return
		}
		r.stopping = true
		r.mu.Unlock()
		r.idle()
	})
}

func (r *Refs) disarm() {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}

// Usable says the server is in service: not stopping for good.
func (r *Refs) Usable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.stopping
}

// StoppedCh is nil while the server is in service, else closed once its
// stop for good is done.
func (r *Refs) StoppedCh() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopping {
		return nil
	}
	return r.stopped
}

// Stopped is closed once the stop for good is done (Finish's done, or
// Detach).
func (r *Refs) Stopped() <-chan struct{} { return r.stopped }

// Quit is closed when the stop for good is decided: the server's
// supervision ends, and starts nothing more.
func (r *Refs) Quit() <-chan struct{} { return r.quit }

// Finish decides the stop for good. first says this call decided it: the
// caller stops the server and calls done when it has. A second caller
// gets first false and may wait on Stopped.
func (r *Refs) Finish() (first bool, done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finishing {
		return false, func() {}
	}
	r.finishing, r.stopping = true, true
	close(r.quit)
	r.disarm()
	return true, func() { close(r.stopped) }
}

// Detach ends the server's life here without a stop (daemon stop
// --keep-processes): no linger, health check or restart of this daemon may
// stop a server the next daemon re-adopts, and nobody waits for a stop.
func (r *Refs) Detach() {
	if first, done := r.Finish(); first {
		done()
	}
}
