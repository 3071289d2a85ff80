package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Watcher tells when watched processes (hosts) die. One kqueue serves every
// watch: an EVFILT_PROC NOTE_EXIT knote per watched PID (ident = PID,
// shared by every watch of that PID) and an EVFILT_USER knote that wakes
// Run. No poll interval, no goroutine or fd per host.
//
// A knote binds the process that held the PID when it was added, and
// EV_ADD on a PID that already has one only updates it. So the knote of a
// PID whose process died could be inherited by a watch of a process that
// recycled the PID; the watcher therefore re-reads the process after every
// change to a PID's watches (settleLocked), fires the watches whose process
// is no longer there, and rebinds the knote to the current process.
type Watcher struct {
	log Logger

	mu      sync.Mutex
	kq      int // -1 once closed
	nextID  uint64
	watches map[uint64]*watch // by id: being here is what lets a watch fire
	byPID   map[int][]*watch  // the watches sharing each PID's knote
	due     []*watch          // found exited outside Run, fired by Run
	running bool
	closed  bool
}

type watch struct {
	id     uint64
	pid    int
	tok    proc.Token
	onExit func()
}

// wakeIdent is the EVFILT_USER event that wakes Run (its own ident space:
// it cannot meet a PID).
const wakeIdent = 0

// NewWatcher creates the kqueue; Run drives it, Close releases it.
func NewWatcher(log Logger) (*Watcher, error) {
	if log == nil {
		log = nopLogger{}
	}
	kq, err := unix.Kqueue()
	if err != nil {
		return nil, fmt.Errorf("kqueue: %w", err)
	}
	unix.CloseOnExec(kq)
	// EV_CLEAR: a trigger is reset once Run has taken it.
	if err := change(kq, unix.Kevent_t{Ident: wakeIdent, Filter: unix.EVFILT_USER, Flags: unix.EV_ADD | unix.EV_CLEAR}); err != nil {
		unix.Close(kq)
		return nil, fmt.Errorf("kevent EVFILT_USER: %w", err)
	}
	return &Watcher{log: log, kq: kq, watches: map[uint64]*watch{}, byPID: map[int][]*watch{}}, nil
}

// Watch calls onExit (from the Run goroutine, once) when the process pid
// with creation token tok exits. It returns proc.ErrGone or
// proc.ErrTokenMismatch when that process is already gone; a zombie (or
// exiting process) carrying tok is watched and fires at once, as a pidfd of
// a zombie does on Linux. The returned cancel stops the watch without
// calling onExit.
func (w *Watcher) Watch(pid int, tok proc.Token, onExit func()) (cancel func(), err error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pid %d: %w", pid, proc.ErrGone)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, errors.New("host watcher is closed")
	}
	w.nextID++
	wt := &watch{id: w.nextID, pid: pid, tok: tok, onExit: onExit}
	w.watches[wt.id] = wt
	w.byPID[pid] = append(w.byPID[pid], wt)
	// The knote is added before the process is read: it binds whoever
	// holds the PID at that moment, so the check must come second.
	exited, err := w.settleLocked(pid)
	queued := 0
	for _, x := range exited {
		if x.wt == wt && (err != nil || x.why != nil) {
			if err == nil {
				err = x.why // gone, or the PID is another process's
			}
			continue
		}
		w.due = append(w.due, x.wt) // other watches of pid, or a zombie wt
		queued++
	}
	if queued > 0 {
		w.wakeLocked()
	}
	if err != nil {
		w.removeLocked(wt)
		return nil, err
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.removeLocked(wt)
	}, nil
}

// exit is a watch found exited by settleLocked, and why: nil when the
// process carrying its token is a zombie or exiting, proc.ErrGone or
// proc.ErrTokenMismatch (wrapped) when it is no longer there at all.
type exit struct {
	wt  *watch
	why error
}

// settleLocked (re)arms pid's knote, reads the process now holding pid, and
// returns the watches of pid whose process has exited: gone, a zombie,
// exiting (P_WEXIT comes before NOTE_EXIT is posted, so its knote may never
// fire), or replaced by a process with another token. They stay registered;
// the caller fires or drops them. When some exited and others remain, the
// knote may be bound to the dead process, so it is deleted and added afresh
// (binding the current one) and the rest re-read; each round removes at
// least one watch, so this ends. err reports a kevent failure, ESRCH
// included when the process is neither gone nor exiting.
func (w *Watcher) settleLocked(pid int) (exited []exit, err error) {
	remaining := slices.Clone(w.byPID[pid])
	fresh := false
	for len(remaining) > 0 {
		if fresh {
			change(w.kq, procEvent(pid, unix.EV_DELETE)) // ENOENT if it fired meanwhile
		}
		armErr := change(w.kq, procEvent(pid, unix.EV_ADD|unix.EV_ONESHOT))
		if armErr != nil && !errors.Is(armErr, unix.ESRCH) {
			return exited, fmt.Errorf("kevent EVFILT_PROC for pid %d: %w", pid, armErr)
		}
		info, statErr := proc.Stat(pid)
		if armErr != nil && statErr == nil && info.State != 'Z' && info.State != 'X' {
			// proc_find skips a process still being forked: it cannot
			// be watched yet, and it has not exited either.
			return exited, fmt.Errorf("kevent EVFILT_PROC for pid %d, which is not exiting: %w", pid, armErr)
		}
		n := len(exited)
		var keep []*watch
		for _, wt := range remaining {
			switch {
			case statErr != nil:
				exited = append(exited, exit{wt, statErr})
			case !wt.tok.Matches(info.Token):
				exited = append(exited, exit{wt, fmt.Errorf("pid %d: %w", pid, proc.ErrTokenMismatch)})
			case info.State == 'Z' || info.State == 'X':
				exited = append(exited, exit{wt, nil})
			default:
				keep = append(keep, wt)
			}
		}
		if len(exited) == n {
			break
		}
		remaining, fresh = keep, true
	}
	return exited, nil
}

// removeLocked unregisters wt and reports whether it was still registered:
// the one place that decides between firing and cancelling. The last watch
// of a PID takes the knote with it, so a later watch of a recycled PID
// never inherits it.
func (w *Watcher) removeLocked(wt *watch) bool {
	if cur, ok := w.watches[wt.id]; !ok || cur != wt {
		return false
	}
	delete(w.watches, wt.id)
	list := slices.DeleteFunc(w.byPID[wt.pid], func(x *watch) bool { return x == wt })
	if len(list) > 0 {
		w.byPID[wt.pid] = list
		return true
	}
	delete(w.byPID, wt.pid)
	change(w.kq, procEvent(wt.pid, unix.EV_DELETE)) // ENOENT once Run took its event
	return true
}

// Len returns the number of active watches.
func (w *Watcher) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watches)
}

// Run dispatches exits until ctx is done or the watcher is closed.
func (w *Watcher) Run(ctx context.Context) error {
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		return errors.New("host watcher is closed")
	case w.running:
		w.mu.Unlock()
		return errors.New("host watcher is already running")
	}
	w.running = true
	kq := w.kq
	if len(w.due) > 0 { // left by a previous Run that stopped
		w.wakeLocked()
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.running = false
		if w.closed && w.kq >= 0 { // Close left the kqueue to us
			unix.Close(w.kq)
			w.kq = -1
		}
	}()
	stop := context.AfterFunc(ctx, w.wake)
	defer stop()

	events := make([]unix.Kevent_t, 64)
	for {
		n, err := unix.Kevent(kq, nil, events, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("kevent: %w", err)
		}
		woken := false
		w.mu.Lock()
		for _, ev := range events[:n] {
			switch ev.Filter {
			case unix.EVFILT_USER:
				woken = true
			case unix.EVFILT_PROC:
				// The knote was one-shot: settling re-arms it for the
				// watches whose process is still there (the event may
				// belong to a process that recycled PID before them).
				pid := int(ev.Ident)
				exited, err := w.settleLocked(pid)
				if err != nil {
					w.log.Error("cannot re-arm the exit watch: its exit will be missed", "pid", pid, "err", err)
				}
				for _, x := range exited {
					w.due = append(w.due, x.wt)
				}
			}
		}
		if woken && (ctx.Err() != nil || w.closed) {
			w.mu.Unlock()
			return nil
		}
		var fire []*watch
		for _, wt := range w.due {
			if w.removeLocked(wt) {
				fire = append(fire, wt)
			}
		}
		w.due = nil
		w.mu.Unlock()
		for _, wt := range fire {
			w.log.Debug("watched process exited", "pid", wt.pid)
			wt.onExit()
		}
	}
}

// Close releases every watch and the kqueue. A running Run is woken and
// returns; it closes the kqueue on its way out.
func (w *Watcher) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	w.watches, w.byPID, w.due = nil, nil, nil
	if w.running {
		w.wakeLocked()
		return nil
	}
	err := unix.Close(w.kq)
	w.kq = -1
	return err
}

func (w *Watcher) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wakeLocked()
}

// wakeLocked triggers the EVFILT_USER event Run waits on. The kqueue is
// checked under the lock: a wake after Run closed it must not reach
// whatever now has its fd number.
func (w *Watcher) wakeLocked() {
	if w.kq < 0 {
		return
	}
	if err := change(w.kq, unix.Kevent_t{Ident: wakeIdent, Filter: unix.EVFILT_USER, Fflags: unix.NOTE_TRIGGER}); err != nil {
		w.log.Error("cannot wake the host watcher", "err", err)
	}
}

// procEvent is the exit watch of pid.
func procEvent(pid int, flags uint16) unix.Kevent_t {
	return unix.Kevent_t{Ident: uint64(pid), Filter: unix.EVFILT_PROC, Flags: flags, Fflags: unix.NOTE_EXIT}
}

// change applies one change to kq without waiting for events.
func change(kq int, ev unix.Kevent_t) error {
	for {
		_, err := unix.Kevent(kq, []unix.Kevent_t{ev}, nil, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
