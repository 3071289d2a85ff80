//go:build unix

package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/seed-86a41135/supervisor/api"
)

// The broker process (`supervisor _broker`) is a server like any other to
// the daemon: spawned with markers, in its own cgroup, stopped by the
// cascade. It listens on a private unix socket; the daemon hands it each
// client's stdin and stdout there (SCM_RIGHTS) and the relay reads and
// writes them itself, so the daemon is off the data path and a daemon
// crash or restart drops no client. Only an explicit detach, or the
// client's own EOF, ends a client; a closed daemon connection does not.

// ServeConfig configures the broker process.
type ServeConfig struct {
	Socket string
	// Linger is how long the broker outlives its last client (and, at
	// start, waits for its first) before it stops its upstream and exits.
	Linger time.Duration
	Broker Config
	// Ready is told "ready\n" once the socket accepts clients.
	Ready io.Writer
}

// Serve runs the broker process until ctx is done or the linger after the
// last client is over; the upstream is stopped before it returns.
func Serve(ctx context.Context, cfg ServeConfig) error {
	b, err := New(cfg.Broker)
	if err != nil {
		return err
	}
	ln, err := api.Listen(cfg.Socket)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &server{b: b, cfg: cfg, cancel: cancel, closed: make(chan struct{})}
	s.idle() // no client yet: the linger runs until the first

	runErr := make(chan error, 1)
	go func() { runErr <- b.Run(ctx) }()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.accept(ln)
	}()
	if cfg.Ready != nil {
		fmt.Fprintln(cfg.Ready, "ready")
	}
	err = <-runErr
	close(s.closed)
	ln.Close()
	s.closeConns()
	wg.Wait()
	b.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

type server struct {
	b      *Broker
	cfg    ServeConfig
	cancel func()

	mu      sync.Mutex
	clients int
	linger  *time.Timer
	conns   map[*api.Conn]bool
	gone    map[string]chan struct{} // attached clients: closed when one goes
	closed  chan struct{}            // the broker is exiting
	exiting bool                     // the linger is over: no new client
	wg      sync.WaitGroup
}

func (s *server) accept(ln *api.Listener) {
	defer s.wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of fds: a passing state
			continue
		}
		s.mu.Lock()
		if s.conns == nil {
			s.conns = map[*api.Conn]bool{}
		}
		s.conns[conn] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, conn)
				s.mu.Unlock()
				conn.Close()
			}()
			s.serve(conn)
		}()
	}
}

func (s *server) closeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// send answers the daemon; a failed send means the daemon went away (a
// restart or a crash), which the next one learns by asking again.
func (s *server) send(conn *api.Conn, typ string, body any) {
	if err := conn.Send(typ, body); err != nil {
		s.b.log.Debug("daemon gone before its answer", "type", typ, "err", err)
	}
}

func (s *server) sendError(conn *api.Conn, code int, format string, args ...any) {
	if err := conn.SendError(code, format, args...); err != nil {
		s.b.log.Debug("daemon gone before its error", "error", fmt.Sprintf(format, args...), "err", err)
	}
}

// serve is one daemon connection: an attach makes it that client's
// connection until the client is detached; a stats request is answered.
func (s *server) serve(conn *api.Conn) {
	if _, err := conn.CheckPeer(); err != nil {
		return // another uid: the socket's mode should have kept it out
	}
	m, fds, err := conn.Recv()
	if err != nil {
		api.CloseFds(fds)
		return
	}
	switch m.Type {
	case MsgStats:
		api.CloseFds(fds)
		s.send(conn, MsgStats, s.b.Stats())
	case MsgCache:
		api.CloseFds(fds)
		c, gen := s.b.Cache()
		s.send(conn, MsgCache, CacheReply{Gen: gen, Cache: c})
	case MsgWatch:
		api.CloseFds(fds)
		var req AttachRequest
		if err := api.Decode(m, &req); err != nil {
			s.sendError(conn, 125, "watch: %v", err)
			return
		}
		s.mu.Lock()
		gone := s.gone[req.ID]
		s.mu.Unlock()
		if gone == nil {
			s.sendError(conn, 125, "watch: client %q is not relayed here", req.ID)
			return
		}
		if err := conn.Send(MsgAttached, nil); err != nil {
			return
		}
		s.relay(conn, req.ID, gone)
	case MsgAttach:
		var req AttachRequest
		if err := api.Decode(m, &req); err != nil || req.ID == "" || len(fds) != 2 {
			api.CloseFds(fds)
			s.sendError(conn, 125, "attach: want a client id and 2 fds (stdin, stdout), got %d fds (%v)", len(fds), err)
			return
		}
		s.attach(conn, req, fds)
	default:
		api.CloseFds(fds)
		s.sendError(conn, 125, "broker: unknown request %q", m.Type)
	}
}

func (s *server) attach(conn *api.Conn, req AttachRequest, fds []int) {
	gone := make(chan struct{})
	var once sync.Once
	done := func() { once.Do(func() { close(gone) }) }
	// Pollable (non-blocking) files: a detach must be able to interrupt a
	// read that waits on the client.
	inf, err := PollableFile(fds[0], "client-stdin")
	if err != nil {
		api.CloseFds(fds)
		s.sendError(conn, 125, "attach %s: %v", req.ID, err)
		return
	}
	outf, err := PollableFile(fds[1], "client-stdout")
	if err != nil {
		inf.Close()
		api.CloseFds(fds[1:])
		s.sendError(conn, 125, "attach %s: %v", req.ID, err)
		return
	}
	in := &closeNotify{File: inf, done: done}
	out := &closeNotify{File: outf, done: done}
	// Counted before the attach, so the linger cannot end the broker
	// under a client it just took; one that ended already refuses (the
	// daemon starts a fresh broker).
	if !s.busy() {
		in.Close()
		out.Close()
		s.send(conn, api.TypeError, &api.Error{Code: 125, Retry: true, Message: "the broker is exiting (its linger is over)"})
		return
	}
	if err := s.b.AttachAfterFront(req.ID, in, out, Handover{Replay: req.Replay, Rest: req.Rest}); err != nil {
		in.Close()
		out.Close()
		s.idle()
		s.sendError(conn, 125, "attach %s: %v", req.ID, err)
		return
	}
	s.mu.Lock()
	if s.gone == nil {
		s.gone = map[string]chan struct{}{}
	}
	s.gone[req.ID] = gone
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.gone, req.ID)
		s.mu.Unlock()
		s.idle()
	}()
	// A daemon that went away meanwhile leaves the client attached: the
	// next one takes it over with MsgWatch.
	s.send(conn, MsgAttached, nil)
	s.relay(conn, req.ID, gone)
}

// relay serves a client's daemon connection: a detach request detaches it
// (the connection closing detaches nothing: the daemon may have crashed),
// and the client going is told back.
func (s *server) relay(conn *api.Conn, id string, gone chan struct{}) {
	go func() { // ends when the connection closes (after gone, by our caller)
		for {
			m, fds, err := conn.Recv()
			api.CloseFds(fds)
			if err != nil {
				return
			}
			if m.Type == MsgDetach {
				s.b.Detach(id)
			}
		}
	}()
	select {
	case <-gone:
		s.send(conn, MsgDetached, nil)
	case <-s.closed:
	}
}

// busy and idle count clients; the linger runs while there are none.
// busy reports false once the linger has ended the broker.
func (s *server) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exiting {
		return false
	}
	s.clients++
	if s.linger != nil {
		s.linger.Stop()
		s.linger = nil
	}
	return true
}

func (s *server) idle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clients > 0 {
		s.clients--
	}
	if s.clients == 0 && s.linger == nil {
		s.linger = time.AfterFunc(s.cfg.Linger, func() {
			s.mu.Lock()
			over := s.clients == 0 // a client may have come as it fired
			s.exiting = s.exiting || over
			s.mu.Unlock()
			if over {
				s.cancel()
			}
		})
	}
}

// closeNotify tells when the relay lets go of a client's fd: the broker
// closes both of a client's fds when it detaches it.
type closeNotify struct {
	*os.File
	done func()
}

func (c *closeNotify) Close() error {
	c.done()
	return c.File.Close()
}
