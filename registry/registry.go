package registry

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Persister commits records durably. Its methods may be called concurrently;
// an implementation is expected to coalesce concurrent commits.
type Persister interface {
	// PutSession and PutProcess commit a record and, in the same commit,
	// the events given with it. An error wrapping ErrEventsNotLogged
	// means the record was committed and only its events were lost.
	PutSession(Session, ...Event) error
	PutProcess(Process, ...Event) error
	AppendEvent(Event) error
	// DeleteMany removes session and process records in one commit;
	// missing ones are not an error.
	DeleteMany(sessionIDs, processIDs []string) error
}

// ErrEventsNotLogged is wrapped by a Persister's put whose record was
// committed but whose events could not be appended: the log never blocks
// the change it describes.
var ErrEventsNotLogged = errors.New("events not logged")

// committed reports whether a put's error still committed the record.
func committed(err error) bool { return err == nil || errors.Is(err, ErrEventsNotLogged) }

// Registry is the in-memory view of every session and process, kept in step
// with a Persister. The zero value is not usable; call New.
type Registry struct {
	p   Persister
	now func() time.Time

	mu       sync.Mutex
	sessions map[string]*sessionEntry
	procs    map[string]*procEntry

	compactMu sync.Mutex // one compaction at a time
}

// Each entry has its own lock so that a record's updates are committed in
// order while commits of different records run (and batch) concurrently.
//
// Lock order: an entry's lock before r.mu, never r.mu while waiting for an
// entry's lock.
type sessionEntry struct {
	mu  sync.Mutex
	rec Session
	// gone marks an entry deleted (compacted, or never committed) while
	// someone waited for its lock: the waiter must not write it back.
	gone bool
}

type procEntry struct {
	mu   sync.Mutex
	rec  Process
	gone bool // as sessionEntry.gone
	// session is rec.Session, which never changes: readable under r.mu
	// alone, so Event need not take the entry's lock.
	session string
}

// New returns a registry seeded with previously persisted records.
// now may be nil, meaning time.Now.
func New(p Persister, now func() time.Time, sessions []Session, procs []Process) *Registry {
	if now == nil {
		now = time.Now
	}
	r := &Registry{p: p, now: now, sessions: map[string]*sessionEntry{}, procs: map[string]*procEntry{}}
	for _, s := range sessions {
		r.sessions[s.ID] = &sessionEntry{rec: s}
	}
	for _, pr := range procs {
		r.procs[pr.ID] = &procEntry{rec: cloneProc(pr), session: pr.Session}
	}
	return r
}

// Now returns the registry's clock reading.
func (r *Registry) Now() time.Time { return r.now() }

// Event appends to the lifecycle log. A failure to log is returned but never
// blocks the change it describes. An event about a known process carries its
// session even when the caller passed none, so filtering the log by session
// finds every event of its processes.
func (r *Registry) Event(kind, session, process, detail string) error {
	if session == "" && process != "" {
		r.mu.Lock()
		if e, ok := r.procs[process]; ok {
			session = e.session
		}
		r.mu.Unlock()
	}
	return r.p.AppendEvent(Event{Time: r.now().UTC(), Kind: kind, Session: session, Process: process, Detail: detail})
}

// OpenSession returns the active session with s.ID, creating (and committing)
// it from s when there is none. An ended session with the same id is replaced:
// the id names a host incarnation, so reuse means the caller asked for it.
func (r *Registry) OpenSession(s Session) (Session, bool, error) {
	return r.open(s, true)
}

// errEnded is open's refusal to reopen an ended session.
var errEnded = errors.New("session ended")

// OpenGeneration is OpenSession for an id derived from a host process: an
// ended session is never reopened, since a host that goes on after one of
// its sessions ended (Claude Code's /clear) is starting another one, whose
// events must not be mixed with the old one's. The host's sessions are
// s.ID, then s.ID-2, s.ID-3, ...: the first that has not ended is opened
// (created when missing).
func (r *Registry) OpenGeneration(s Session) (Session, bool, error) {
	base := s.ID
	for n := 1; ; n++ {
		s.ID = base
		if n > 1 {
			s.ID = fmt.Sprintf("%s-%d", base, n)
		}
		sess, created, err := r.open(s, false)
		if !errors.Is(err, errEnded) {
			return sess, created, err
		}
	}
}

func (r *Registry) open(s Session, reopen bool) (Session, bool, error) {
	for {
		r.mu.Lock()
		e, ok := r.sessions[s.ID]
		if !ok {
			e = &sessionEntry{}
			r.sessions[s.ID] = e
		}
		r.mu.Unlock()

		e.mu.Lock()
		if e.gone {
			// Deleted while we waited; whoever deleted it took it out of
			// the map too, so the next round starts a fresh entry.
			e.mu.Unlock()
			continue
		}
		if !reopen && e.rec.ID != "" && e.rec.State == SessionEnded {
			e.mu.Unlock()
			return Session{}, false, errEnded
		}
		sess, created, err := r.openLocked(e, s)
		e.mu.Unlock()
		return sess, created, err
	}
}

// openLocked is OpenSession with e's lock held.
func (r *Registry) openLocked(e *sessionEntry, s Session) (Session, bool, error) {
	if e.rec.ID != "" && e.rec.State == SessionActive {
		return e.rec, false, nil
	}
	if e.rec.State == SessionEnding {
		return e.rec, false, fmt.Errorf("session %s is being ended; retry once it has ended: %w", s.ID, ErrBadTransition)
	}
	s.State = SessionActive
	s.StartedAt = r.now().UTC()
	s.EndedAt = nil
	s.EndReason = ""
	started := Event{Time: s.StartedAt, Kind: "session.start", Session: s.ID,
		Detail: fmt.Sprintf("host %d %s", s.HostPID, clip(s.HostCommand, 200))}
	if err := r.p.PutSession(s, started); !committed(err) {
		if e.rec.ID == "" {
			e.gone = true // a waiter for this entry starts over
			r.mu.Lock()
			if r.sessions[s.ID] == e {
				delete(r.sessions, s.ID)
			}
			r.mu.Unlock()
		}
		return Session{}, false, fmt.Errorf("commit session %s: %w", s.ID, err)
	}
	e.rec = s
	return s, true, nil
}

// SetSessionState moves a session to state, committing it first. Moving an
// ended session anywhere is refused.
func (r *Registry) SetSessionState(id string, state SessionState, reason string) (Session, error) {
	r.mu.Lock()
	e, ok := r.sessions[id]
	r.mu.Unlock()
	if !ok {
		return Session{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone {
		return Session{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if e.rec.State == state {
		return e.rec, nil
	}
	if e.rec.State == SessionEnded {
		return e.rec, fmt.Errorf("session %s is %s, cannot become %s: %w", id, e.rec.State, state, ErrBadTransition)
	}
	next := e.rec
	next.State = state
	if reason != "" {
		next.EndReason = reason
	}
	if state == SessionEnded {
		t := r.now().UTC()
		next.EndedAt = &t
	}
	var evs []Event
	switch state {
	case SessionEnding:
		evs = append(evs, Event{Time: r.now().UTC(), Kind: "session.ending", Session: id, Detail: reason})
	case SessionEnded:
		evs = append(evs, Event{Time: r.now().UTC(), Kind: "session.end", Session: id, Detail: reason})
	}
	if err := r.p.PutSession(next, evs...); !committed(err) {
		return e.rec, fmt.Errorf("commit session %s: %w", id, err)
	}
	e.rec = next
	return next, nil
}

// Session returns the session with id.
func (r *Registry) Session(id string) (Session, error) {
	r.mu.Lock()
	e, ok := r.sessions[id]
	r.mu.Unlock()
	if !ok {
		return Session{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec.ID == "" || e.gone {
		return Session{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	return e.rec, nil
}

// Sessions lists sessions oldest first; ended ones only when all is set.
func (r *Registry) Sessions(all bool) []Session {
	var out []Session
	for _, e := range r.sessionEntries() {
		e.mu.Lock()
		s, gone := e.rec, e.gone
		e.mu.Unlock()
		if s.ID == "" || gone || (!all && s.State == SessionEnded) {
			continue
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (r *Registry) sessionEntries() []*sessionEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*sessionEntry, 0, len(r.sessions))
	for _, e := range r.sessions {
		out = append(out, e)
	}
	return out
}

// AddProcess commits a new process record in state starting (the intent
// record written before the fork, design §7) and returns it.
func (r *Registry) AddProcess(p Process) (Process, error) {
	p.State = StateStarting
	if p.StartedAt.IsZero() {
		p.StartedAt = r.now().UTC()
	}
	if p.Health == "" {
		p.Health = "none"
	}
	p = cloneProc(p)
	r.mu.Lock()
	_, dup := r.procs[p.ID]
	r.mu.Unlock()
	if dup {
		return Process{}, fmt.Errorf("process %s already recorded", p.ID)
	}
	// Committed first, visible after: nobody reads a record that may not
	// be durable. Ids are random, so two adds of one id do not race.
	if err := r.p.PutProcess(p); err != nil {
		return Process{}, fmt.Errorf("commit process %s: %w", p.ID, err)
	}
	r.mu.Lock()
	r.procs[p.ID] = &procEntry{rec: p, session: p.Session}
	r.mu.Unlock()
	return cloneProc(p), nil
}

// Update applies fn to a copy of the process and commits the result. If fn
// changes State, the state machine must allow it. fn returning an error
// aborts the update. fn runs with the record locked: it must not wait for
// another record (Compact holds several at once).
func (r *Registry) Update(id string, fn func(*Process) error) (Process, error) {
	return r.update(id, fn, false, nil, nil)
}

// Logged is an event told of a process's change, committed with it.
type Logged struct{ Kind, Detail string }

// UpdateLogged is Update with the event ev about the process (its session
// filled in) committed in the same transaction: one fsync where the change
// and its event took two. fn returning an error commits neither.
func (r *Registry) UpdateLogged(id string, ev Logged, fn func(*Process) error) (Process, error) {
	return r.update(id, fn, false, &ev, nil)
}

// UpdateLoggedAfter is UpdateLogged that calls first, with the record
// locked, after fn succeeded and before the commit. What first sets going
// (an exec in place) runs beside the commit's fsync instead of after it,
// and readers of the record, who wait for its lock, still see it only as
// committed. fn's error skips first; a failed commit comes after it.
func (r *Registry) UpdateLoggedAfter(id string, first func(), ev Logged, fn func(*Process) error) (Process, error) {
	return r.update(id, fn, false, &ev, first)
}

func (r *Registry) update(id string, fn func(*Process) error, restart bool, ev *Logged, first func()) (Process, error) {
	r.mu.Lock()
	e, ok := r.procs[id]
	r.mu.Unlock()
	if !ok {
		return Process{}, fmt.Errorf("process %s: %w", id, ErrNotFound)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone {
		return Process{}, fmt.Errorf("process %s: %w", id, ErrNotFound)
	}
	next := cloneProc(e.rec)
	if err := fn(&next); err != nil {
		return cloneProc(e.rec), err
	}
	if next.State != e.rec.State && !CanTransition(e.rec.State, next.State) && !restart {
		return cloneProc(e.rec), fmt.Errorf("process %s: %s → %s: %w", id, e.rec.State, next.State, ErrBadTransition)
	}
	if first != nil {
		first()
	}
	var evs []Event
	if ev != nil {
		evs = append(evs, Event{Time: r.now().UTC(), Kind: ev.Kind, Session: next.Session, Process: id, Detail: ev.Detail})
	}
	if err := r.p.PutProcess(next, evs...); !committed(err) {
		return cloneProc(e.rec), fmt.Errorf("commit process %s: %w", id, err)
	}
	e.rec = next
	return cloneProc(next), nil
}

// Transition moves a process to state to, applying mutate (may be nil) in
// the same commit. A process already in a final state is left alone and
// ErrBadTransition is returned.
func (r *Registry) Transition(id string, to ProcState, mutate func(*Process)) (Process, error) {
	return r.Update(id, func(p *Process) error {
		if p.State == to {
			return nil
		}
		if !CanTransition(p.State, to) {
			return fmt.Errorf("process %s: %s → %s: %w", id, p.State, to, ErrBadTransition)
		}
		p.State = to
		if mutate != nil {
			mutate(p)
		}
		return nil
	})
}

// Restart records a new incarnation of a shared server under its old id:
// whatever non-final state the record is in (a restart goes through a
// stop), it is running again after mutate.
func (r *Registry) Restart(id string, mutate func(*Process)) (Process, error) {
	return r.update(id, func(p *Process) error {
		if p.State.Final() {
			return fmt.Errorf("process %s is %s and cannot restart: %w", id, p.State, ErrBadTransition)
		}
		mutate(p)
		p.State = StateRunning
		return nil
	}, true, nil, nil)
}

// Process returns the process with id.
func (r *Registry) Process(id string) (Process, error) {
	r.mu.Lock()
	e, ok := r.procs[id]
	r.mu.Unlock()
	if !ok {
		return Process{}, fmt.Errorf("process %s: %w", id, ErrNotFound)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone {
		return Process{}, fmt.Errorf("process %s: %w", id, ErrNotFound)
	}
	return cloneProc(e.rec), nil
}

// Filter selects processes for Processes.
type Filter struct {
	All     bool   // include processes in a final state
	Session string // only this session, when set
}

// Processes lists processes oldest first.
func (r *Registry) Processes(f Filter) []Process {
	r.mu.Lock()
	entries := make([]*procEntry, 0, len(r.procs))
	for _, e := range r.procs {
		entries = append(entries, e)
	}
	r.mu.Unlock()
	var out []Process
	for _, e := range entries {
		e.mu.Lock()
		p, gone := e.rec, e.gone
		e.mu.Unlock()
		if gone || (!f.All && p.State.Final()) {
			continue
		}
		if f.Session != "" && p.Session != f.Session {
			continue
		}
		out = append(out, cloneProc(p))
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Lookup finds a live process by id, or by name when exactly one live
// process carries it.
func (r *Registry) Lookup(idOrName string) (Process, error) {
	if p, err := r.Process(idOrName); err == nil {
		return p, nil
	}
	var hits []Process
	for _, p := range r.Processes(Filter{}) {
		if p.Name == idOrName {
			hits = append(hits, p)
		}
	}
	switch len(hits) {
	case 0:
		return Process{}, fmt.Errorf("no live process has id or name %q: %w", idOrName, ErrNotFound)
	case 1:
		return hits[0], nil
	default:
		ids := make([]string, len(hits))
		for i, h := range hits {
			ids[i] = h.ID
		}
		return Process{}, fmt.Errorf("name %q matches %d live processes (%s); use an id: %w",
			idOrName, len(hits), strings.Join(ids, ", "), ErrAmbiguous)
	}
}

// Compact deletes what the retention period lets go: processes in a final
// state that exited before before, then ended sessions that ended before
// before and have no process record left. Both go in one commit, and only
// then from memory: a failed commit leaves everything as it was. It returns
// how many sessions and processes it deleted.
func (r *Registry) Compact(before time.Time) (sessions, procs int, err error) {
	r.compactMu.Lock()
	defer r.compactMu.Unlock()
	r.mu.Lock()
	pes := make([]*procEntry, 0, len(r.procs))
	for _, e := range r.procs {
		pes = append(pes, e)
	}
	ses := make([]*sessionEntry, 0, len(r.sessions))
	for _, e := range r.sessions {
		ses = append(ses, e)
	}
	r.mu.Unlock()

	// The picked entries stay locked until they are out of the store and
	// the maps: an update or a reopening that reached one meanwhile waits,
	// then finds it gone instead of writing a deleted record back.
	var pickedP []*procEntry
	var pickedS []*sessionEntry
	defer func() {
		for _, e := range pickedP {
			e.mu.Unlock()
		}
		for _, e := range pickedS {
			e.mu.Unlock()
		}
	}()
	remaining := map[string]int{} // processes kept, by session
	for _, e := range pes {
		e.mu.Lock()
		if !e.gone && e.rec.State.Final() && endedBefore(e.rec.ExitedAt, e.rec.StartedAt, before) {
			pickedP = append(pickedP, e)
			continue
		}
		if !e.gone {
			remaining[e.rec.Session]++
		}
		e.mu.Unlock()
	}
	for _, e := range ses {
		e.mu.Lock()
		s := e.rec
		if !e.gone && s.ID != "" && s.State == SessionEnded && remaining[s.ID] == 0 &&
			endedBefore(s.EndedAt, s.StartedAt, before) {
			pickedS = append(pickedS, e)
			continue
		}
		e.mu.Unlock()
	}
	if len(pickedP) == 0 && len(pickedS) == 0 {
		return 0, 0, nil
	}
	pids := make([]string, len(pickedP))
	for i, e := range pickedP {
		pids[i] = e.rec.ID
	}
	sids := make([]string, len(pickedS))
	for i, e := range pickedS {
		sids[i] = e.rec.ID
	}
	if err := r.p.DeleteMany(sids, pids); err != nil {
		return 0, 0, fmt.Errorf("compact records ended before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	r.mu.Lock()
	for _, e := range pickedP {
		e.gone = true
		if r.procs[e.rec.ID] == e {
			delete(r.procs, e.rec.ID)
		}
	}
	for _, e := range pickedS {
		e.gone = true
		if r.sessions[e.rec.ID] == e {
			delete(r.sessions, e.rec.ID)
		}
	}
	r.mu.Unlock()
	return len(pickedS), len(pickedP), nil
}

// endedBefore reports whether a record that ended at end (or, with no end
// recorded, started at start: a record closed without a time must still age
// out) ended before t.
func endedBefore(end *time.Time, start, t time.Time) bool {
	if end != nil {
		return end.Before(t)
	}
	return start.Before(t)
}

// clip shortens s to at most n bytes (cut at a rune boundary), marking the
// cut. A host's command line can run to kilobytes; the session record keeps
// it whole, and an event in a log capped by count should not.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func cloneProc(p Process) Process {
	p.Argv = append([]string(nil), p.Argv...)
	p.LimitCgroups = append([]string(nil), p.LimitCgroups...)
	p.LimitHit = append([]string(nil), p.LimitHit...)
	if p.Limits != nil {
		l := *p.Limits
		p.Limits = &l
	}
	p.Stdio = append([]StdioInode(nil), p.Stdio...)
	if p.Clients != nil {
		p.Clients = append([]Client(nil), p.Clients...)
	}
	if p.ExitCode != nil {
		c := *p.ExitCode
		p.ExitCode = &c
	}
	if p.ExitedAt != nil {
		t := *p.ExitedAt
		p.ExitedAt = &t
	}
	if p.Stop != nil {
		st := *p.Stop
		st.Procs = append([]StoppedProc(nil), st.Procs...)
		st.Left = append([]int(nil), st.Left...)
		st.Spared = append([]int(nil), st.Spared...)
		st.Unproven = append([]int(nil), st.Unproven...)
		p.Stop = &st
	}
	if p.Usage != nil {
		u := *p.Usage
		p.Usage = &u
	}
	if p.Egress != nil {
		e := *p.Egress
		e.Hosts = append([]string(nil), e.Hosts...)
		p.Egress = &e
	}
	return p
}

// Each runs fn(0..n-1), up to 64 at once. A Persister coalesces only
// concurrent commits (bbolt's Batch): written one at a time, thousands of
// records take seconds; side by side they share transactions.
func Each(n int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < min(64, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
