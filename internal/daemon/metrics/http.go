package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/internal/promtext"
)

// Server serves /metrics over HTTP: an actor of the daemon's run group
// (Run and Stop), so it stops with the daemon and starts no goroutine of
// its own beyond what net/http runs per request.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	log  hclog.Logger
	quit chan struct{}
}

// Listen binds addr for the metrics endpoint, serving set's exposition
// at /metrics and, when pprof is set, Go's profiles at /debug/pprof/.
// Binding here, before Run, lets an address that cannot be had fail the
// daemon's start before it acts on anything. An address that is not
// loopback is served, with a loud warning: the metrics carry no names,
// but they say how busy this user's agents are to anyone who can reach it.
func Listen(addr string, set *Set, pprof bool, log hclog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		log.Warn("METRICS ARE SERVED BEYOND THIS MACHINE: the address is not loopback; anyone who can reach it sees this user's session and process counts (use 127.0.0.1:PORT)",
			"addr", ln.Addr().String())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		text, err := set.Gather()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", promtext.ContentType)
		_, _ = io.WriteString(w, text) // fails only once the scraper has gone
	})
	log.Info("serving Prometheus metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	if pprof {
		// Opt-in: profiles show the daemon's internals (and cost CPU while
		// taken); the handlers go on this mux, never on http's default one.
		mux.HandleFunc("/debug/pprof/", servePprof)
		log.Info("serving pprof profiles", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	}
	return &Server{
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug})},
		ln: ln, log: log, quit: make(chan struct{}),
	}, nil
}

// Addr is the address bound, with the port the system chose for :0.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Run serves until Stop. The endpoint failing does not take the daemon
// and its servers down: it is logged, and the actor waits for the others.
func (s *Server) Run() error {
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("metrics endpoint failed; the daemon goes on without it", "err", err)
		<-s.quit
	}
	return nil
}

// Stop ends Run: requests under way get two seconds to finish (a CPU
// profile being taken does not hold the daemon's exit longer), then the
// connections are closed. Its argument is the run group's reason, unused.
func (s *Server) Stop(error) {
	close(s.quit)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
}

// Close closes the listener of a Server whose Run was never reached (the
// daemon failed before serving). After Run, Serve owns the listener and
// closing it again is harmless.
func (s *Server) Close() error { return s.ln.Close() }
