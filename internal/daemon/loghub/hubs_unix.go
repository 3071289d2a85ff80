//go:build unix

package loghub

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Hubs is the daemon's side of the log hubs: the hub new pipes go to, the
// other hubs (full ones, and those that re-joined from an earlier
// daemon), and a duplicate of every pipe's read end, so that a hub's
// death loses no pipe: they go to a new hub.
//
// A pipe handed to a new hub after its hub died is logged but no longer
// teed: with no copy of the tee kept (see the package comment), its
// host's stderr reaches EOF with the dead hub.
type Hubs struct {
	log   hclog.Logger
	spawn Spawn
	// perHub caps the pipes of one hub: each costs it three fds (the read
	// end, the tee, the log file), under the hub's own fd limit.
	perHub int

	mu      sync.Mutex
	primary *hubConn // where new pipes go; nil until needed
	hubs    map[*hubConn]bool
	pipes   map[string]*hubPipe
	idBase  string
	seq     uint64
	closed  bool
	retry   *time.Timer // re-homing pipes whose hub died, when no new one could start
	wg      sync.WaitGroup
}

// hubConn is one hub process's connection. alive and released are
// guarded by Hubs.mu.
type hubConn struct {
	conn  *api.Conn
	pid   int
	tok   proc.Token // to kill it by: a hub given up on must not copy on
	alive bool       // false once given up on (dropLocked)
	n     int        // its pipes (setHubLocked)
	// released: an idle hub of an earlier daemon the daemon let go, to
	// exit by itself.
	released bool
}

// hubPipe is one pipe as the daemon holds it: the duplicate of its read
// end (a raw fd: an *os.File's Fd would turn the shared read end back to
// blocking under the hub's poller), and where its copy runs.
type hubPipe struct {
	spec api.LogPipe
	r    int
	hub  *hubConn
}

// New returns the hubs, none started yet: the first pipe starts one,
// through spawn. fdLimit is the daemon's RLIMIT_NOFILE, which its hubs
// inherit.
func New(log hclog.Logger, fdLimit int, spawn Spawn) *Hubs {
	var b [6]byte
	rand.Read(b[:])
	return &Hubs{log: log, spawn: spawn, perHub: max(16, min(1000, (fdLimit-64)/3)),
		hubs: map[*hubConn]bool{}, pipes: map[string]*hubPipe{}, idBase: hex.EncodeToString(b[:])}
}

// Open makes a log pipe to spec's log (its ID and Tee are Open's to
// set), hands its read end to a hub, and returns its write end, for the
// server's output, and the pipe's id. tee, when not nil, is where the hub
// copies everything too; the caller keeps (and closes) its own tee, the
// hub gets a copy.
func (h *Hubs) Open(spec api.LogPipe, tee *os.File) (*os.File, string, error) {
	fds, err := cloexecPair(unix.Pipe)
	if err != nil {
		return nil, "", fmt.Errorf("create the log pipe: %w", err)
	}
	// The read end is only ever read by the hub, through its poller; the
	// write end is the server's and stays blocking.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, "", fmt.Errorf("create the log pipe: %w", err)
	}
	p := &hubPipe{spec: spec, r: fds[0]}
	p.spec.Tee = tee != nil
	w := os.NewFile(uintptr(fds[1]), "log-pipe-w")
	if err := h.add(p, tee); err != nil {
		w.Close()
		p.close()
		return nil, "", err
	}
	return w, p.spec.ID, nil
}

// start starts a hub process, connected by a socket pair on its stdin.
func (h *Hubs) start() (*hubConn, error) {
	fds, err := cloexecPair(func(p []int) error {
		fd, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		copy(p, fd[:])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("socket pair for the log hub: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "log-hub"), os.NewFile(uintptr(fds[1]), "log-hub")
	defer ours.Close() // FileConn holds its own copy
	pid, tok, err := h.spawn(theirs)
	if err != nil {
		return nil, err
	}
	fc, err := net.FileConn(ours)
	if err != nil {
		return nil, fmt.Errorf("the log hub's socket: %w", err)
	}
	conn, err := api.NewConn(fc.(*net.UnixConn))
	if err != nil {
		fc.Close()
		return nil, err
	}
	return &hubConn{conn: conn, pid: pid, tok: tok, alive: true}, nil
}

// cloexecPair makes a pipe or socket pair whose fds are close-on-exec
// before any fork can see them (macOS has neither pipe2 nor
// SOCK_CLOEXEC): a server spawned meanwhile must not inherit one, least of
// all a log pipe's read end.
func cloexecPair(open func([]int) error) ([2]int, error) {
	var p [2]int
	syscall.ForkLock.RLock()
	err := open(p[:])
	if err == nil {
		unix.CloseOnExec(p[0])
		unix.CloseOnExec(p[1])
	}
	syscall.ForkLock.RUnlock()
	return p, err
}

func (p *hubPipe) close() {
	if p.r >= 0 {
		unix.Close(p.r)
		p.r = -1
	}
}

// send hands p to hub, with tee when not nil (only a new pipe has one).
func (p *hubPipe) send(hub *hubConn, tee *os.File) error {
	spec := p.spec
	spec.Tee = tee != nil
	if tee == nil {
		return hub.conn.Send(api.TypeLogPipe, &spec, p.r)
	}
	// Through Control: Fd would switch a non-blocking host stderr to
	// blocking, for the host too.
	rc, err := tee.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(t uintptr) { serr = hub.conn.Send(api.TypeLogPipe, &spec, p.r, int(t)) }); err != nil {
		return err
	}
	return serr
}

// add gives p an id and hands it, and tee if not nil, to the primary hub,
// starting one when there is none (or it is gone, or full).
func (h *Hubs) add(p *hubPipe, tee *os.File) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errors.New("the daemon is exiting")
	}
	h.seq++
	p.spec.ID = fmt.Sprintf("%s-%d", h.idBase, h.seq)
	for try := 0; ; try++ {
		hub, err := h.primaryLocked()
		if err != nil {
			return err
		}
		h.setHubLocked(p, hub)
		h.pipes[p.spec.ID] = p
		if err = p.send(hub, tee); err == nil {
			return nil
		}
		h.setHubLocked(p, nil)
		delete(h.pipes, p.spec.ID)
		h.log.Warn("log hub unreachable; starting another", "pid", hub.pid, "err", err)
		h.dropLocked(hub) // its other pipes go to the next hub too
		if try == 1 {
			return fmt.Errorf("hand the log pipe to the log hub: %w", err)
		}
	}
}

// primaryLocked is the hub new pipes go to, started when needed. Once it
// copies perHub pipes another takes over: a hub at most half full if one
// serves, else a new one (the full one keeps its pipes, and is let go once
// they have ended).
func (h *Hubs) primaryLocked() (*hubConn, error) {
	if h.primary != nil && h.countLocked(h.primary) >= h.perHub {
		full := h.primary
		h.primary = nil
		for hub := range h.hubs {
			if hub != full && hub.alive && !hub.released && h.countLocked(hub) <= h.perHub/2 {
				h.primary = hub
				break
			}
		}
		h.log.Info("log hub full; new pipes go to another", "pid", full.pid, "pipes", h.perHub, "reused", h.primary != nil)
	}
	if h.primary != nil {
		return h.primary, nil
	}
	hub, err := h.start()
	if err != nil {
		return nil, err
	}
	h.primary = hub
	h.hubs[hub] = true
	h.wg.Add(1)
	go h.read(hub)
	return hub, nil
}

// read takes a hub's reports until its connection fails, then re-homes
// its pipes.
func (h *Hubs) read(hub *hubConn) {
	defer h.wg.Done()
	for {
		m, fds, err := hub.conn.Recv()
		api.CloseFds(fds)
		if err != nil {
			break
		}
		if m.Type != api.TypeLogDone {
			continue
		}
		var done api.LogDone
		if err := api.Decode(m, &done); err != nil {
			h.log.Warn("a log hub's message does not decode", "pid", hub.pid, "err", err)
			continue
		}
		if done.Dropped > 0 {
			h.log.Warn("a server's output was partly lost: its log file could not take it", "pipe", done.ID,
				"dropped_bytes", done.Dropped, "err", done.LogError)
		}
		h.mu.Lock()
		if p := h.pipes[done.ID]; p != nil && p.hub == hub {
			delete(h.pipes, done.ID)
			h.setHubLocked(p, nil)
			p.close()
		}
		if hub != h.primary && h.countLocked(hub) == 0 && !hub.released {
			// A hub of an earlier daemon with nothing left to copy:
			// let it go (it exits once no daemon and no pipe is left).
			h.log.Debug("letting an idle log hub go", "pid", hub.pid)
			hub.released = true
			hub.conn.Close()
		}
		h.mu.Unlock()
	}
	hub.conn.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(hub)
}

// countLocked is how many pipes are hub's.
func (h *Hubs) countLocked(hub *hubConn) int { return hub.n }

// setHubLocked makes hub (nil: none) p's, keeping each hub's count: a
// count by a scan of every pipe, on every pipe's end, made the end of
// thousands of servers at once quadratic.
func (h *Hubs) setHubLocked(p *hubPipe, hub *hubConn) {
	if p.hub != nil {
		p.hub.n--
	}
	p.hub = hub
	if hub != nil {
		hub.n++
	}
}

// dropLocked gives up on hub and hands its pipes to the primary hub (a
// new one if that was it). What the servers wrote meanwhile waits in the
// pipes; what the hub had read and not yet written is lost.
//
// A hub given up on is killed first, should it live: two hubs reading
// one pipe would split its lines between them and each rotate the log by
// its own count. Not when the daemon is exiting (the hubs outlive it and
// re-join the next), nor for an idle hub it let go.
func (h *Hubs) dropLocked(hub *hubConn) {
	if !hub.alive {
		return
	}
	hub.alive = false
	hub.conn.Close()
	delete(h.hubs, hub)
	if h.primary == hub {
		h.primary = nil
	}
	if h.closed || hub.released {
		return
	}
	if hub.pid > 0 {
		if ph, err := proc.OpenHandle(hub.pid, hub.tok); err == nil {
			ph.Signal(unix.SIGKILL)
			ph.Close()
		}
	}
	h.rehomeLocked()
}

// rehomeLocked hands every pipe whose hub is gone to the primary hub.
func (h *Hubs) rehomeLocked() {
	var orphans []*hubPipe
	for id, p := range h.pipes {
		if p.hub != nil && p.hub.alive {
			continue
		}
		if ended(p.r) {
			// Its server is gone and nothing is left to copy.
			delete(h.pipes, id)
			h.setHubLocked(p, nil)
			p.close()
			continue
		}
		orphans = append(orphans, p)
	}
	if len(orphans) == 0 {
		return
	}
	for i, p := range orphans {
		hub, err := h.primaryLocked() // a new one whenever one fills up
		if err != nil {
			// The servers' writes block once their pipes are full, at
			// worst (the daemon still holds a read end: no SIGPIPE).
			h.log.Error("no log hub for the pipes of one that died; retrying in a second", "pipes", len(orphans)-i, "err", err)
			for _, q := range orphans[i:] {
				h.setHubLocked(q, nil)
			}
			h.retryLocked()
			return
		}
		h.setHubLocked(p, hub)
		if err := p.send(hub, nil); err != nil {
			h.log.Warn("hand a log pipe to the new log hub", "pid", hub.pid, "err", err)
			h.dropLocked(hub) // and the pipes go to the next one
			return
		}
	}
	h.log.Info("log pipes handed to a new log hub", "pipes", len(orphans))
}

// retryLocked re-homes orphaned pipes in a second.
func (h *Hubs) retryLocked() {
	if h.retry != nil {
		return
	}
	h.retry = time.AfterFunc(time.Second, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.retry = nil
		if !h.closed {
			h.rehomeLocked()
		}
	})
}

// ended says whether a pipe's writers are all gone and nothing is left
// in it.
func ended(fd int) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	return err == nil && n == 1 && pfd[0].Revents&unix.POLLHUP != 0 && pfd[0].Revents&unix.POLLIN == 0
}

// Adopt serves a hub that re-joined from an earlier daemon on conn, once
// the daemon has read its hello and made conn the hub's (no deadline, not
// counted among requests): it takes its pipes' duplicates, then its
// reports, until it is gone.
func (h *Hubs) Adopt(conn *api.Conn) {
	hub := &hubConn{conn: conn, alive: true}
	// Who it is comes from the socket, not from what it says: it may
	// have to be killed (dropLocked).
	if pid, err := conn.CheckPeer(); err == nil {
		if tok, err := proc.TokenOf(pid); err == nil {
			hub.pid, hub.tok = pid, tok
		}
	}
	var got []*hubPipe
	handed := false
	for {
		m, fds, err := conn.Recv()
		if err != nil {
			api.CloseFds(fds)
			break
		}
		if m.Type == api.TypeLogPipesEnd {
			api.CloseFds(fds)
			handed = true
			break
		}
		var spec api.LogPipe
		if m.Type != api.TypeLogPipe || api.Decode(m, &spec) != nil || spec.ID == "" || len(fds) != 1 {
			api.CloseFds(fds)
			continue
		}
		got = append(got, &hubPipe{spec: spec, r: fds[0]})
	}
	if !h.register(hub, got, handed) {
		return
	}
	h.log.Info("a log hub of an earlier daemon re-joined", "pid", hub.pid, "pipes", len(got))
	h.read(hub)
}

// register takes the pipes a re-joining hub handed over (all of them:
// handed) and the hub with them, and says whether the hub is to be
// served.
func (h *Hubs) register(hub *hubConn, got []*hubPipe, handed bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	conflict := false
	for _, p := range got {
		if old := h.pipes[p.spec.ID]; old != nil && old.hub != nil && old.hub.alive {
			conflict = true // another hub copies it already
			p.close()
			continue
		}
		if old := h.pipes[p.spec.ID]; old != nil {
			h.setHubLocked(old, nil)
			old.close()
		}
		h.setHubLocked(p, hub)
		h.pipes[p.spec.ID] = p
	}
	h.hubs[hub] = true
	switch {
	case h.closed:
		hub.alive = false
		delete(h.hubs, hub)
		return false
	case !handed || conflict:
		// Gone before it handed everything over, or it copies a pipe
		// another hub copies: what it has goes to the primary hub.
		h.log.Warn("a log hub of an earlier daemon could not re-join", "pid", hub.pid, "pipes", len(got), "handed_over", handed, "conflict", conflict)
		h.dropLocked(hub)
		return false
	}
	if h.primary == nil {
		h.primary = hub // new pipes go to it too
	}
	h.wg.Add(1) // read's
	return true
}

// Closing marks the daemon exiting, before its connections close: from
// here a hub whose connection ends is let go, not replaced. The hubs go
// on copying, and re-join the next daemon.
func (h *Hubs) Closing() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.retry != nil {
		h.retry.Stop()
	}
	for hub := range h.hubs {
		hub.conn.Close()
	}
}

// Close waits for the hubs' readers and lets go of every duplicate.
func (h *Hubs) Close() {
	h.Closing()
	h.wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, p := range h.pipes {
		h.setHubLocked(p, nil)
		p.close()
		delete(h.pipes, id)
	}
}

// Status lists the hubs and their pipes, the primary first.
func (h *Hubs) Status() []api.LogHubStatus {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []api.LogHubStatus
	for hub := range h.hubs {
		out = append(out, api.LogHubStatus{PID: hub.pid, Pipes: hub.n, Primary: hub == h.primary})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Primary || !out[j].Primary && out[i].PID < out[j].PID })
	return out
}
