package daemon

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/api"
)

// The daemon's file descriptors are what every stop needs (a scan of
// /proc, a pidfd per process of the tree): a client must not be able to
// take them all. Connections are capped below RLIMIT_NOFILE with a reserve
// kept for the cascade, and the connections that are not a server's
// lifeline (requests, and peers that said hello and went quiet) are capped
// lower still and closed when idle. A peer refused at a cap gets a
// retryable error: clients retry until their own deadline.

// connCaps derives the connection caps from the fd limit: a reserve of an
// eighth (32 to 1024 fds) for the cascade and the daemon's own files, and
// about four fds per lifeline (its connection, its server's pidfd, its
// host's, and the duplicate of its log pipe's read end, loghub_unix.go).
func connCaps(log hclog.Logger) (conns, requests int) {
	limit := fdLimit()
	reserve := min(max(limit/8, 32), 1024)
	conns = max(8, (limit-reserve)/4)
	requests = min(max(conns/4, 4), 1024)
	log.Debug("connection caps", "fd_limit", limit, "connections", conns, "requests", requests)
	return conns, requests
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

// atServerCap says whether a new server would pass the cap on lifelines.
// A live server with no lifeline (exec'd in its shim's place, or adopted
// after a restart) holds most of a lifeline's fds all the same (its pidfd,
// its log pipe's duplicate, a share of its host's): it counts as one, or
// in-place servers alone could use up the fds every stop needs. Only new
// servers are refused at this cap: requests (ps, stop) still get in.
func (d *Daemon) atServerCap() (bool, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	lifelines := len(d.conns) - d.reqConns // this run's own among them
	used := lifelines + max(0, len(d.live)-lifelines+1)
	if used <= d.connCap {
		return false, ""
	}
	return true, fmt.Sprintf("the daemon is at its server limit (%d live servers; %d from its file descriptor limit): retry once some have ended, or raise `ulimit -n` for the daemon",
		len(d.live), d.connCap)
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
func (d *Daemon) refuseBusy(conn *api.Conn) {
	defer conn.Close()
	d.mu.Lock()
	open, reqs := len(d.conns), d.reqConns
	d.mu.Unlock()
	d.log.Warn("connection refused: at the connection cap", "open", open, "requests", reqs,
		"cap", d.connCap, "request_cap", d.reqCap)
	conn.SetDeadline(time.Now().Add(time.Second))
	conn.Send(api.TypeError, &api.Error{Code: 125, Retry: true, Message: fmt.Sprintf(
		"the daemon is at its connection limit (%d open, %d of them requests; caps %d and %d from its file descriptor limit): retry shortly, or raise `ulimit -n` for the daemon",
		open, reqs, d.connCap, d.reqCap)})
}

// idleTimeout is the request connections' idle limit in force.
func (d *Daemon) idleTimeout() time.Duration {
	if t := d.settings().IdleTimeout; t > 0 {
		return t
	}
	return DefaultSettings().IdleTimeout
}
