// Package health checks whether a server that listens on a port is
// ready: a TCP connect or an HTTP GET (design §5). It is apart from
// spawn so that what only starts processes (the lean run entry) does not
// link net/http.
package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Probe is how a server's health is checked (design §5): "none" (alive),
// "tcp" (connect to its port), or an http:// URL (2xx).
type Probe struct {
	Kind string // "none", "tcp" or "http"
	URL  string // for "http"
}

// Parse parses --health.
func Parse(s string) (Probe, error) {
	switch {
	case s == "" || s == "none":
		return Probe{Kind: "none"}, nil
	case s == "tcp":
		return Probe{Kind: "tcp"}, nil
	case strings.HasPrefix(s, "http://"):
		return Probe{Kind: "http", URL: s}, nil
	}
	return Probe{}, fmt.Errorf("--health %q: want none, tcp or an http:// URL", s)
}

func (h Probe) String() string {
	if h.Kind == "http" {
		return h.URL
	}
	return h.Kind
}

// Check runs one health check against a server listening on port whose
// main process is alive (the caller checks liveness). It returns nil when
// healthy.
func (h Probe) Check(ctx context.Context, port int) error {
	switch h.Kind {
	case "tcp":
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("tcp health: %w", err)
		}
		c.Close()
		return nil
	case "http":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL, nil)
		if err != nil {
			return fmt.Errorf("http health: %w", err)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return fmt.Errorf("http health: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("http health: %s answered %d", h.URL, resp.StatusCode)
		}
		return nil
	}
	return nil
}

// httpClient never reuses connections: a check must reach the server
// as a new client would.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// ErrNotReady is returned by WaitReady when the deadline passes first.
var ErrNotReady = errors.New("not healthy before the readiness timeout")

// WaitReady checks h until it passes, alive reports false, or timeout
// passes. Checks back off from 20 ms to 500 ms: a server's readiness is not
// an event the kernel can deliver.
func (h Probe) WaitReady(ctx context.Context, port int, timeout time.Duration, alive func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 5 * time.Millisecond
	var last error
	for {
		if err := alive(); err != nil {
			return err
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		last = h.Check(cctx, port)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v; last check: %v)", ErrNotReady, timeout, last)
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}
