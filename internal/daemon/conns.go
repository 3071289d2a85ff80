package daemon

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/settings"
)

// The daemon's file descriptors are what every stop needs (a scan of
// /proc, a pidfd per process of the tree): a client must not be able to
// take them all. Connections are capped below RLIMIT_NOFILE with a reserve
// kept for the cascade, and the connections that are not a server's
// lifeline (requests, and peers that said hello and went quiet) are capped
// lower still and closed when idle. A peer refused at a cap gets a
// retryable error: clients retry until their own deadline.

// connCaps derives the connection caps from the fd limit: a reserve of an
// eighth (64 to 1024 fds) for the cascade and the daemon's own files, and
// about four fds per lifeline (its connection, its server's pidfd, its
// host's, and the duplicate of its log pipe's read end, loghub.Hubs).
func connCaps(log hclog.Logger) (conns, requests, budget int) {
	limit := fdLimit()
	reserve := min(max(limit/8, 64), 1024)
	conns = max(8, (limit-reserve)/4)
	budget = limit - reserve
	requests = min(max(conns/4, 4), 1024)
	log.Debug("connection caps", "fd_limit", limit, "connections", conns, "requests", requests)
	return conns, requests, budget
}

// admit counts a new connection, or says the daemon is at a cap.
func (d *Daemon) admit(conn *api.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.conns) >= d.connCap || d.reqConns >= d.reqCap {
		return false
	}
	d.conns[conn] = true
	d.reqConns++
	return true
}

// becomeLifeline moves conn out of the request count: it now carries a
// server's life, and is never closed for idling.
func (d *Daemon) becomeLifeline(conn *api.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conns[conn] {
		d.conns[conn] = false
		d.reqConns--
	}
}

// reserveServer takes a slot for a new server under the daemon's fd
// budget (the fd limit less the cascade's reserve), or says why there is
// none. The estimate is conservative: a connection costs one fd, a host
// one (its pidfd), and a live server or a start in flight four (its
// pidfd, its log pipe's duplicate, and the pidfd and cgroup.events a stop
// opens), whether or not it keeps a lifeline: servers exec'd in their
// shims' places keep none, and alone they could otherwise use up the fds
// every stop needs.
// Starts in flight hold their slot from here (a burst of runs sees every
// other one), until release, called once the server is live or its start
// failed. Only new servers are refused: requests (ps, stop) still get in.
func (d *Daemon) reserveServer() (release func(), why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	est := len(d.conns) + len(d.hosts) + 4*(len(d.live)+d.starting+1)
	if est > d.fdBudget {
		return nil, fmt.Sprintf("the daemon is at its server limit (%d live servers, %d starting; about %d of its %d file descriptors in use or promised): retry once some have ended, or raise `ulimit -n` for the daemon",
			len(d.live), d.starting, est-4, d.fdBudget)
	}
	d.starting++
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			d.starting--
			d.mu.Unlock()
		})
	}, ""
}

// forget uncounts a closed connection.
func (d *Daemon) forget(conn *api.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conns[conn] {
		d.reqConns--
	}
	delete(d.conns, conn)
}

// refuseBusy answers a connection over a cap with a retryable error and
// closes it. The peer's hello is not awaited: the answer is written at
// once, and a peer that does not read it loses nothing but this attempt.
//
// The answer goes first and the connection is closed before anything is
// logged: a flood's warnings queue on the log (its lock, the pipe of a
// stderr read slowly), and every refused connection held its fd
// meanwhile, which took the daemon to EMFILE. The frame, a few hundred
// bytes into a new socket's empty send buffer, does not wait; the
// deadline only bounds a write that would, and it is generous: Go checks
// a deadline before it tries the write, so one that passed while this
// goroutine was held off on a loaded machine would lose the answer (the
// client then sees only its broken pipe).
func (d *Daemon) refuseBusy(conn *api.Conn) {
	d.mu.Lock()
	open, reqs := len(d.conns), d.reqConns
	d.mu.Unlock()
	conn.SetDeadline(time.Now().Add(refuseWait))
	err := conn.Send(api.TypeError, &api.Error{Code: 125, Retry: true, Message: fmt.Sprintf(
		"the daemon is at its connection limit (%d open, %d of them requests; caps %d and %d from its file descriptor limit): retry shortly, or raise `ulimit -n` for the daemon",
		open, reqs, d.connCap, d.reqCap)})
	conn.Close()
	d.log.Warn("connection refused: at the connection cap", "open", open, "requests", reqs,
		"cap", d.connCap, "request_cap", d.reqCap)
	switch {
	case err == nil:
	case api.PeerGone(err):
		d.log.Debug("client gone before its answer", "type", api.TypeError, "err", err)
	default:
		// The client finds the connection closed with no answer, and
		// retries a few times (api.Dial).
		d.log.Warn("a refused client was not told why", "err", err)
	}
}

// refuseWait bounds the write of a refusal (see refuseBusy).
const refuseWait = 10 * time.Second

// idleTimeout is the request connections' idle limit in force.
func (d *Daemon) idleTimeout() time.Duration {
	if t := d.settings().IdleTimeout; t > 0 {
		return t
	}
	return settings.Defaults().IdleTimeout
}
