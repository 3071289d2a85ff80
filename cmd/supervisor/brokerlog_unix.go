//go:build unix

package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/logwriter"
)

// captureStderr makes this process's stderr (fd 2: the broker's log, and
// its upstream's stderr, which inherits it) a pipe that a goroutine copies
// into the capped, rotated log: what `_log-writer` does for a stdio
// server, without a process of its own per broker. finish closes our end
// and waits up to a second for the rest of the output.
func captureStderr(opt logwriter.Options) (finish func(), err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("log pipe: %w", err)
	}
	if err := unix.Dup2(int(w.Fd()), 2); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("log pipe as stderr: %w", err)
	}
	w.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Copy reads on after a failed write; after a failed read the pipe
		// is drained anyway, or a write to stderr would raise SIGPIPE.
		if logwriter.Copy(r, opt) != nil {
			_, _ = io.Copy(io.Discard, r) // draining: its own failure leaves nothing to do
		}
	}()
	return func() {
		os.Stderr.Close()
		select {
		case <-done:
		case <-time.After(time.Second): // a descendant still holds it
		}
	}, nil
}
