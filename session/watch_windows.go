package session

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/windows"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Watcher tells when watched processes (hosts) die. Each watch is one
// goroutine blocked in WaitForMultipleObjects on the process handle and a
// cancel event of its own: one wait per watch because a single wait takes
// at most 64 handles, and no polling anywhere. Each blocked wait holds an
// OS thread, which is fine for the handful of hosts a daemon watches. Exits
// are handed to Run over a channel, so callbacks run on Run's goroutine as
// on Linux.
type Watcher struct {
	log   Logger
	fired chan *watch   // a watched process exited; Run fires it
	done  chan struct{} // closed by Close: Run returns
	wg    sync.WaitGroup

	mu      sync.Mutex
	watches map[*watch]struct{}
	closed  bool
}

// watch is one watched process. Its goroutine owns the process handle and
// the cancel event and closes both when it ends, which is only after stop
// is closed: stop is closed, and the event set, by remove alone, under
// Watcher.mu and once per watch, so no SetEvent can reach a closed (and
// perhaps reused) handle value.
type watch struct {
	pid    int
	h      *proc.Handle
	cancel windows.Handle // manual-reset event
	stop   chan struct{}
	onExit func()
}

// NewWatcher creates an empty watcher; Run drives it, Close releases it.
func NewWatcher(log Logger) (*Watcher, error) {
	if log == nil {
		log = nopLogger{}
	}
	return &Watcher{
		log:     log,
		fired:   make(chan *watch),
		done:    make(chan struct{}),
		watches: map[*watch]struct{}{},
	}, nil
}

// Watch calls onExit (from the Run goroutine, once) when the process pid
// with creation token tok exits. It returns proc.ErrGone or
// proc.ErrTokenMismatch when that process is already gone; the returned
// cancel stops the watch without calling onExit. Two watches of one
// process both fire.
func (w *Watcher) Watch(pid int, tok proc.Token, onExit func()) (cancel func(), err error) {
	h, err := proc.OpenHandle(pid, tok)
	if err != nil {
		return nil, err
	}
	ev, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("create cancel event for the watch of %d: %w", pid, err)
	}
	wt := &watch{pid: pid, h: h, cancel: ev, stop: make(chan struct{}), onExit: onExit}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		windows.CloseHandle(ev)
		h.Close()
		return nil, errors.New("host watcher is closed")
	}
	w.watches[wt] = struct{}{}
	w.wg.Add(1)
	go w.wait(wt)
	return func() { w.remove(wt) }, nil
}

// wait blocks until the process exits or the watch is removed, hands an
// exit to Run, and releases the watch's handles once it is removed.
func (w *Watcher) wait(wt *watch) {
	defer w.wg.Done()
	defer func() {
		<-wt.stop // nobody can SetEvent any more
		windows.CloseHandle(wt.cancel)
		wt.h.Close()
	}()
	ev, err := windows.WaitForMultipleObjects([]windows.Handle{wt.h.Sys(), wt.cancel}, false, windows.INFINITE)
	switch {
	case err != nil:
		w.log.Error("cannot wait for watched process; its exit will go unnoticed", "pid", wt.pid, "err", err)
	case ev == windows.WAIT_OBJECT_0:
		select {
		case w.fired <- wt:
		case <-wt.stop: // cancelled, or the watcher closed, meanwhile
		}
	}
}

// remove ends a watch: it reports whether the watch was still active, so
// that of Run (firing) and cancel exactly one wins.
func (w *Watcher) remove(wt *watch) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.watches[wt]; !ok {
		return false
	}
	delete(w.watches, wt)
	w.stopLocked(wt)
	return true
}

// stopLocked wakes the watch's goroutine and lets it release its handles.
// Called with w.mu held, once per watch.
func (w *Watcher) stopLocked(wt *watch) {
	if err := windows.SetEvent(wt.cancel); err != nil {
		w.log.Error("cannot cancel the wait for a watched process", "pid", wt.pid, "err", err)
	}
	close(wt.stop)
}

// Len returns the number of active watches.
func (w *Watcher) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watches)
}

// Run dispatches exits until ctx is done. It fails if the watcher is
// closed while it runs.
func (w *Watcher) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.done:
			return errors.New("host watcher closed while running")
		case wt := <-w.fired:
			if w.remove(wt) {
				w.log.Debug("watched process exited", "pid", wt.pid)
				wt.onExit()
			}
		}
	}
}

// Close ends every watch without firing it and waits for their goroutines
// to release their handles. Call after Run returned.
func (w *Watcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	for wt := range w.watches {
		w.stopLocked(wt)
	}
	w.watches = nil
	close(w.done)
	w.mu.Unlock()
	w.wg.Wait()
	return nil
}
