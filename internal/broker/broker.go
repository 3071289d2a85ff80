// Package broker multiplexes MCP clients onto one upstream server process,
// as design §11 describes: it owns the upstream process's life (start,
// restart behind a breaker, stop) and the protocol rules that make sharing
// safe (id and progress-token mapping, one initialize, routed or refused
// server-to-client requests, per-client subscriptions, cancellation on
// disconnect). It reads only the JSON-RPC envelope of each message
// (package jsonrpc) and splices rewritten values into the raw bytes; it
// never decodes bodies.
//
// # Caveats
//
// Detach and shutdown unblock a client's pending read and write by closing
// its in and out. For *os.File that works only on a non-blocking (pollable)
// descriptor: os.Pipe's are; wrap a descriptor received over a unix socket
// with PollableFile, or a client that never writes keeps a goroutine (and
// Wait) blocked. Only such descriptors get the relay's fast path too (a
// message for an idle peer written by the goroutine that routed it, see
// queue); other writers cost a goroutine hand-over per message.
//
// Legacy servers may keep state per connection; sharing them is safe only
// as far as these rules reach, which is why it is opt-in (design §11).
package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// Config is the upstream command and the broker's limits. Zero fields take
// the defaults given.
type Config struct {
	// Argv, Dir and Env are the upstream command, started with stdin and
	// stdout pipes and stderr inherited (the broker's stderr). Env nil
	// inherits the broker's environment.
	Argv []string
	Dir  string
	Env  []string
	// Sandbox, when set, confines every run of the upstream (and what it
	// starts) to these rules; Env is then what the sandbox keeps.
	Sandbox *sandbox.Rules
	// Log is the broker's logger (default: discard).
	Log hclog.Logger
	// OnEvent is told of "client.attach", "client.detach",
	// "client.needs_own_upstream", "upstream.start", "upstream.exit",
	// "upstream.unsafe", "upstream.breaker", "message.refused" and
	// "cache.invalid", with a human detail. It is
	// called without the broker's lock held, from several goroutines; nil
	// ignores them.
	OnEvent func(kind, detail string)
	// RestartMin and RestartMax bound the backoff between upstream restarts
	// after a crash: it doubles per crash within a minute (defaults 200ms,
	// 10s).
	RestartMin, RestartMax time.Duration
	// MaxRestarts is how many times the upstream is restarted within a
	// minute; the crash after that trips the breaker and Run returns
	// ErrBreaker (default 5).
	MaxRestarts int
	// MaxLine is the longest message accepted, from a client or the
	// upstream (default 64 MiB). A client sending a longer one is detached;
	// an upstream's is dropped.
	MaxLine int
	// MaxQueue is how many bytes may wait for a client that does not read
	// its output before it is detached (default 4 MiB).
	MaxQueue int
	// StopTimeout is how long Run waits for the upstream to exit after
	// closing its stdin, and again after SIGTERM (default 5s).
	StopTimeout time.Duration
	// Lazy answers what Cache can while the upstream is down, and starts
	// it on the first request the cache cannot answer; with no warm Cache
	// the upstream starts at once and fills it (lazy.go).
	Lazy  bool
	Cache *Cache
	// Idle stops an upstream with nothing in flight for this long (0:
	// never); the next request starts it again.
	Idle time.Duration
}

// JSON-RPC error codes the broker answers with.
const (
	// CodeInternal answers requests in flight when the upstream crashes,
	// and server-to-client requests the broker refuses.
	CodeInternal = -32603
	// CodeNeedsOwnUpstream answers an initialize asking for a protocol
	// version other than the one the shared upstream negotiated: that
	// client needs an upstream of its own.
	CodeNeedsOwnUpstream = -32050
	// CodeUnavailable answers requests the broker cannot deliver (the
	// upstream is down with too much queued for it).
	CodeUnavailable = -32051
)

// Errors of Run, Attach; test with errors.Is.
var (
	// ErrBreaker: the upstream crashed more than MaxRestarts times within
	// a minute, and the broker gave up.
	ErrBreaker = errors.New("the upstream keeps crashing")
	// ErrStopped: the broker has stopped (Run returned).
	ErrStopped = errors.New("broker stopped")
	// ErrDuplicate: a client with that id is attached already.
	ErrDuplicate = errors.New("client id in use")
)

// ClientStats is one attached client.
type ClientStats struct {
	ID       string
	InFlight int    // its requests awaiting the upstream's answer
	Messages uint64 // messages read from it and written to it
}

// Stats is a snapshot of the broker.
type Stats struct {
	Clients      []ClientStats // sorted by ID
	UpstreamPID  int           // 0 while the upstream is down
	Restarts     int           // upstream restarts after crashes
	Relayed      uint64        // messages relayed, both ways
	Unsafe       bool          // the upstream sent server-to-client requests
	UnsafeReason string
	IdleSince    time.Time // when the last request in flight was answered; zero while busy
	// Stateless: the upstream answered server/discover supporting the
	// stateless revision (2026-07-28), with these versions.
	Stateless bool     `json:",omitempty"`
	Versions  []string `json:",omitempty"`
	// Legacy: server/discover was refused or named no stateless version.
	Legacy bool `json:",omitempty"`
	// Listens counts clients' open subscriptions/listen requests.
	Listens int `json:",omitempty"`
	// Lazy start (lazy.go): the cache's generation (it changes whenever
	// the cache does), requests answered from it and not, upstream starts
	// on demand and stops for idleness.
	Lazy        bool   `json:",omitempty"`
	CacheGen    uint64 `json:",omitempty"`
	CacheHits   uint64 `json:",omitempty"`
	CacheMisses uint64 `json:",omitempty"`
	LazyStarts  uint64 `json:",omitempty"`
	IdleStops   uint64 `json:",omitempty"`
	// Refused counts messages refused as ambiguous, both ways (refuse.go).
	Refused uint64 `json:",omitempty"`
}

// Broker relays clients to one upstream. Create it with New.
type Broker struct {
	cfg Config
	log hclog.Logger

	mu      sync.Mutex
	events  []event       // emitted once mu is released (see unlock)
	writes  []inlineWrite // the fast path's writes, done once mu is released
	bufs    bufPool       // large answers' buffers
	clients map[string]*client
	up      *upstream // nil while down
	ready   bool      // up takes clients' messages (a restart's re-initialize is done)
	held    []heldMsg // clients' messages waiting for a ready upstream
	heldN   int
	nextID  uint64
	pending map[uint64]*pending // by upstream id
	nextSrv uint64
	srvReqs map[uint64]*srvReq // server-to-client requests, by the id the client sees
	subs    map[string]*sub    // by uri
	listen  listenState        // subscriptions/listen (stateless revision)
	init    initState
	// initialized: notifications/initialized reached the current upstream.
	initialized  bool
	restarts     int
	relayed      uint64
	unsafe       bool
	unsafeReason string
	stateless    bool     // the upstream supports the stateless revision
	legacy       bool     // its server/discover said it does not
	versions     []string // as its server/discover said
	cache        *Cache   // lazy: what is answered while the upstream is down
	cacheGen     uint64
	cacheHits    uint64
	cacheMisses  uint64
	lazyStarts   uint64
	idleStops    uint64
	refused      uint64 // ambiguous messages refused (refuse.go)
	// discoverAsked: the broker's own server/discover went to this run.
	discoverAsked bool
	// renewed: this run's subscriptions were renewed.
	renewed bool
	// cacheDropped: entries of the loaded cache failed validation, so
	// the upstream starts at once and refills it.
	cacheDropped bool
	refusedAt    time.Time     // when the last refusal was evented
	wantUp       chan struct{} // a request waits for a lazy upstream
	idleSince    time.Time
	running      bool
	stopped      bool

	wg      sync.WaitGroup
	runDone chan struct{}
}

type event struct{ kind, detail string }

// inlineWrite is a message for an idle queue, written by the goroutine
// that routed it once it has released mu (queue.writeInline).
type inlineWrite struct {
	q   *queue
	msg outMsg
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Broker, error) {
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return nil, errors.New("broker: no upstream command: Config.Argv is empty")
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.RestartMin <= 0 {
		cfg.RestartMin = 200 * time.Millisecond
	}
	if cfg.RestartMax <= 0 {
		cfg.RestartMax = 10 * time.Second
	}
	if cfg.RestartMax < cfg.RestartMin {
		cfg.RestartMax = cfg.RestartMin
	}
	if cfg.MaxRestarts <= 0 {
		cfg.MaxRestarts = 5
	}
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = 64 << 20
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 4 << 20
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 5 * time.Second
	}
	cache := cfg.Cache.Clone()
	dropped := cache.Sanitize()
	b := &Broker{
		cfg:       cfg,
		log:       cfg.Log,
		clients:   map[string]*client{},
		pending:   map[uint64]*pending{},
		srvReqs:   map[uint64]*srvReq{},
		subs:      map[string]*sub{},
		cache:     cache,
		wantUp:    make(chan struct{}, 1),
		idleSince: time.Now(),
		runDone:   make(chan struct{}),
	}
	if len(dropped) > 0 {
		b.cacheDropped = true
		b.log.Warn("the lazy cache failed validation; starting the server now to refill it", "dropped", dropped)
		b.emit("cache.invalid", "dropped on load, the server starts now to refill it: "+strings.Join(dropped, "; "))
	}
	return b, nil
}

// emit queues an event; call with mu held.
func (b *Broker) emit(kind, detail string) {
	b.events = append(b.events, event{kind, detail})
}

// enqueue queues msg on q (see queue.push); an idle queue's message is
// written by this goroutine in unlock. Call with mu held.
func (b *Broker) enqueue(q *queue, msg []byte, limit int) bool {
	return b.enqueueMsg(q, outMsg{b: msg}, limit)
}

func (b *Broker) enqueueMsg(q *queue, msg outMsg, limit int) bool {
	ok, inline := q.push(msg, limit)
	if inline {
		b.writes = append(b.writes, inlineWrite{q, msg})
	}
	return ok
}

// unlock releases mu, then does the fast path's writes and reports the
// events queued under it, so OnEvent may call back into the broker. A
// write is one non-blocking attempt: never a wait on a peer.
func (b *Broker) unlock() {
	evs, ws := b.events, b.writes
	b.events, b.writes = nil, nil
	b.mu.Unlock()
	for _, w := range ws {
		w.q.writeInline(w.msg)
	}
	if b.cfg.OnEvent == nil {
		return
	}
	for _, e := range evs {
		b.cfg.OnEvent(e.kind, e.detail)
	}
}

// Attach relays the client's newline-delimited messages until in reaches
// EOF or Detach. It returns at once; the relay runs in goroutines the
// broker owns. On detach in is closed at once, and out once what was
// queued for the client has been written (at most 5 s later).
// Clients may attach before Run starts the upstream: their messages wait.
func (b *Broker) Attach(id string, in io.ReadCloser, out io.WriteCloser) error {
	return b.AttachAfterFront(id, in, out, Handover{})
}

// AttachAfterFront attaches a client whose front (front.go) served it so
// far: h.Replay is read as its own messages first, none of them answered
// again, then h.Rest, then in.
func (b *Broker) AttachAfterFront(id string, in io.ReadCloser, out io.WriteCloser, h Handover) error {
	b.mu.Lock()
	defer b.unlock()
	if b.stopped {
		return fmt.Errorf("attach client %q: %w", id, ErrStopped)
	}
	if _, ok := b.clients[id]; ok {
		return fmt.Errorf("attach client %q: %w", id, ErrDuplicate)
	}
	c := &client{
		id: id, in: in, out: out, q: newQueue(out, &b.bufs), stop: make(chan struct{}),
		byOrig: map[string]uint64{}, subs: map[string]bool{},
		log: b.log.With("client", id), replay: h.Replay, rest: h.Rest,
	}
	b.clients[id] = c
	b.wg.Add(2)
	go b.readClient(c)
	go b.writeClient(c)
	b.emit("client.attach", id)
	c.log.Debug("client attached")
	return nil
}

// Detach stops relaying for client id (if attached): its requests in
// flight are cancelled upstream, its subscriptions dropped, and its in
// and out closed.
func (b *Broker) Detach(id string) {
	b.mu.Lock()
	defer b.unlock()
	if c, ok := b.clients[id]; ok {
		b.detachLocked(c, "detached", false)
	}
}

// Stats returns a snapshot.
func (b *Broker) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Stats{
		Restarts: b.restarts, Relayed: b.relayed,
		Unsafe: b.unsafe, UnsafeReason: b.unsafeReason,
		Stateless: b.stateless, Legacy: b.legacy, Versions: slices.Clone(b.versions), Listens: len(b.listen.clients),
		Lazy: b.cfg.Lazy, CacheGen: b.cacheGen, CacheHits: b.cacheHits, CacheMisses: b.cacheMisses,
		LazyStarts: b.lazyStarts, IdleStops: b.idleStops, Refused: b.refused,
	}
	if b.up != nil {
		s.UpstreamPID = b.up.pid
	}
	if len(b.pending) == 0 {
		s.IdleSince = b.idleSince
	}
	for _, c := range b.clients {
		s.Clients = append(s.Clients, ClientStats{ID: c.id, InFlight: c.inflight, Messages: c.messages})
	}
	slices.SortFunc(s.Clients, func(x, y ClientStats) int { return strings.Compare(x.ID, y.ID) })
	return s
}

// Cache returns a copy of the lazy-start cache (nil if none) and its
// generation.
func (b *Broker) Cache() (*Cache, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cache.Clone(), b.cacheGen
}

// Wait returns once Run has returned and every relay goroutine has stopped.
func (b *Broker) Wait() {
	<-b.runDone
	b.wg.Wait()
}

// Run starts the upstream at once and supervises it: a crash answers the
// requests in flight with errors and restarts it with backoff, behind the
// breaker (ErrBreaker). Clients stay attached across restarts. When ctx is
// done it detaches every client, closes the upstream's stdin, waits up to
// StopTimeout, then sends SIGTERM, waits again, then SIGKILL, and returns
// nil. It may be called once.
func (b *Broker) Run(ctx context.Context) error {
	b.mu.Lock()
	if b.running {
		b.mu.Unlock()
		return errors.New("broker: Run called twice")
	}
	b.running = true
	b.mu.Unlock()
	defer close(b.runDone)
	defer b.shutdown()

	var crashes []time.Time
	first := true
	// A lazy broker with a warm cache waits for a request before its
	// first start, and after every idle stop.
	wait := b.cfg.Lazy && b.cache.Warm() && !b.cacheDropped
	for {
		if wait {
			select {
			case <-ctx.Done():
				return nil
			case <-b.wantUp:
			}
			b.mu.Lock()
			b.lazyStarts++
			b.emit("upstream.lazy_start", "a request the cache cannot answer")
			b.unlock()
		}
		// A start a request asked for (lazy, after an idle stop) that fails
		// is a crash like any other: the requests waiting for it are
		// answered with the error, and the breaker counts it.
		byRequest := wait
		wait = false
		u, err := b.startUpstream()
		if err != nil {
			if first && !byRequest {
				return err
			}
			b.log.Error("start upstream", "err", err)
			first = first && !byRequest // from now on the breaker decides
			b.failHeld(fmt.Sprintf("supervisor broker: the MCP server could not be started: %v; retry later or check its command", err))
		} else {
			first = false
			switch b.superviseUpstream(ctx, u) {
			case upStopped:
				return nil
			case upIdle:
				wait = true
				continue
			}
			b.upstreamExited(u)
		}
		now := time.Now()
		crashes = slices.DeleteFunc(crashes, func(t time.Time) bool { return now.Sub(t) > time.Minute })
		crashes = append(crashes, now)
		if len(crashes) > b.cfg.MaxRestarts {
			err := fmt.Errorf("broker: %q crashed %d times within a minute; not restarting it: %w (see its stderr)", b.cfg.Argv[0], len(crashes), ErrBreaker)
			b.mu.Lock()
			b.emit("upstream.breaker", err.Error())
			b.unlock()
			b.log.Error("upstream breaker tripped", "crashes", len(crashes))
			return err
		}
		delay := b.cfg.RestartMin << (len(crashes) - 1)
		if delay > b.cfg.RestartMax || delay <= 0 {
			delay = b.cfg.RestartMax
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		b.mu.Lock()
		b.restarts++
		b.mu.Unlock()
	}
}

// failHeld answers every request waiting for an upstream that could not
// be started.
func (b *Broker) failHeld(msg string) {
	b.mu.Lock()
	defer b.unlock()
	for id, p := range b.pending {
		if !p.sent {
			b.failPending(id, p, CodeUnavailable, msg)
		}
	}
	b.held, b.heldN = nil, 0
}

type upEnd int

const (
	upCrashed upEnd = iota // it exited on its own
	upStopped              // ctx is done: stopped, clients detached
	upIdle                 // stopped for idleness: clients stay
)

// superviseUpstream waits for u to exit, ctx to end, or (Config.Idle) u
// to have been idle long enough to stop.
func (b *Broker) superviseUpstream(ctx context.Context, u *upstream) upEnd {
	for {
		var tick <-chan time.Time
		var t *time.Timer
		if b.cfg.Idle > 0 {
			b.mu.Lock()
			_, left := b.idleNow(time.Now())
			b.mu.Unlock()
			t = time.NewTimer(max(left, 10*time.Millisecond))
			tick = t.C
		}
		stop := func() {
			if t != nil {
				t.Stop()
			}
		}
		select {
		case <-ctx.Done():
			stop()
			b.stopUpstream(u)
			return upStopped
		case <-u.exited:
			stop()
			return upCrashed
		case <-tick:
			if b.idleStop(u) {
				return upIdle
			}
		}
	}
}

// idleStop stops u if it is idle: from the moment it is judged idle no
// message reaches it (they are held, and wake Run for a new start).
func (b *Broker) idleStop(u *upstream) bool {
	b.mu.Lock()
	idle, _ := b.idleNow(time.Now())
	if !idle || b.up != u {
		b.mu.Unlock()
		return false
	}
	b.up, b.ready = nil, false
	b.idleStops++
	b.emit("upstream.idle_stop", fmt.Sprintf("pid %d idle for %v", u.pid, b.cfg.Idle))
	select { // a stale wake-up would start it again at once
	case <-b.wantUp:
	default:
	}
	b.unlock()
	b.log.Info("stopping the idle upstream", "pid", u.pid, "idle", b.cfg.Idle)
	b.endUpstream(u)
	b.upstreamGone(u, "stopped idle")
	return true
}

// shutdown answers every request still waiting with an error (each
// request is answered once, even by a broker that stops), then detaches
// every client and refuses new ones.
func (b *Broker) shutdown() {
	b.mu.Lock()
	defer b.unlock()
	b.stopped = true
	for id, p := range b.pending {
		b.failPending(id, p, CodeUnavailable, "supervisor broker: the shared MCP server is stopping; retry the request")
	}
	for _, c := range b.clients {
		b.detachLocked(c, "broker stopped", false)
	}
	b.held, b.heldN = nil, 0
}
