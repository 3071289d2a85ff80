//go:build linux

package api

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestHandshakeReadsRefusalAfterStall: a daemon at its connection cap
// writes its refusal and closes before it reads the hello, so the hello's
// write fails (EPIPE). The refusal is then read whatever the client's
// timing: answerWait of a nanosecond stands in for a client goroutine
// held off past its deadline (a -race test's 600 clients on a loaded
// machine), which got the broken pipe instead of the refusal.
func TestHandshakeReadsRefusalAfterStall(t *testing.T) {
	defer func(w time.Duration) { answerWait = w }(answerWait)
	answerWait = time.Nanosecond
	daemon, client := connPair(t)
	if err := daemon.Send(TypeError, &Error{Code: 125, Retry: true, Message: "the daemon is at its connection limit"}); err != nil {
		t.Fatal(err)
	}
	daemon.Close()
	err := (&Client{Conn: client}).handshake()
	var e *Error
	if !errors.As(err, &e) || !e.Retry || !strings.Contains(e.Message, "connection limit") {
		t.Fatalf("handshake with a daemon that refused and closed: %v, want its retryable refusal", err)
	}
}

// TestDialRetriesUnansweredClose: a daemon that closes a connection with
// no answer (a refusal it could not write) is dialled again, a few
// times; Dial then gives up with the error it saw.
func TestDialRetriesUnansweredClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted, answerFrom atomic.Int32
	answerFrom.Store(2) // the first connection is closed unanswered
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if accepted.Add(1) < answerFrom.Load() {
				conn.Close()
				continue
			}
			go func() {
				defer conn.Close()
				if _, _, err := conn.Recv(); err != nil {
					return
				}
				conn.Send(TypeHello, &Hello{Protocol: Protocol, Version: Version})
				conn.Recv() // until the client closes
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, path)
	if err != nil {
		t.Fatalf("Dial after a connection closed unanswered: %v", err)
	}
	c.Close()
	if n := accepted.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}

	// A daemon that never answers: Dial gives up after maxUnanswered
	// retries, with the handshake's error.
	accepted.Store(0)
	answerFrom.Store(1 << 30)
	if _, err := Dial(ctx, path); err == nil || !strings.Contains(err.Error(), "handshake") {
		t.Errorf("Dial of a daemon that closes every connection unanswered: %v, want the handshake's error", err)
	}
	if n := accepted.Load(); n != maxUnanswered+1 {
		t.Errorf("%d connections to a daemon that never answers, want %d", n, maxUnanswered+1)
	}
}
