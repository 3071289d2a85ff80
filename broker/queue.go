package broker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
)

// queue is an outbound message queue drained by one writer goroutine.
// push never blocks, so routing (under the broker's lock) never waits on a
// peer; the writer takes everything queued at once.
type queue struct {
	mu      sync.Mutex
	msgs    [][]byte
	size    int
	closed  bool
	wake    chan struct{} // one pending wake-up for the writer
	drained chan struct{} // closed (and replaced) each time the writer takes a batch
}

func newQueue() *queue {
	return &queue{wake: make(chan struct{}, 1), drained: make(chan struct{})}
}

// push appends msg unless that would put more than limit bytes behind the
// batch the writer holds (limit 0: no limit). One message, however large,
// is always accepted by an empty queue: the limit is on a peer that does
// not read, not on the size of an answer.
func (q *queue) push(msg []byte, limit int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return true // the writer is gone; nobody will read it
	}
	if limit > 0 && len(q.msgs) > 0 && q.size+len(msg) > limit {
		return false
	}
	q.msgs = append(q.msgs, msg)
	q.size += len(msg)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// over reports whether more than limit bytes wait, and a channel closed
// when the writer next takes a batch.
func (q *queue) over(limit int) (bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.size > limit, q.drained
}

// take returns every queued message, waiting for one; ok is false once
// the queue is closed and empty, or stop is closed.
func (q *queue) take(stop <-chan struct{}) (batch [][]byte, ok bool) {
	for {
		q.mu.Lock()
		if len(q.msgs) > 0 {
			batch, q.msgs, q.size = q.msgs, nil, 0
			close(q.drained)
			q.drained = make(chan struct{})
			q.mu.Unlock()
			return batch, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, false
		}
		select {
		case <-q.wake:
		case <-stop:
			return nil, false
		}
	}
}

// close lets the writer finish what is queued and stop.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// writeBatch writes each message and its newline, flushing once.
func writeBatch(w *bufio.Writer, batch [][]byte) error {
	for _, m := range batch {
		w.Write(m)
		w.WriteByte('\n')
	}
	return w.Flush()
}

// errLineTooLong is a line over the reader's limit.
var errLineTooLong = errors.New("line too long")

// lineReader reads newline-delimited messages of up to max bytes.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its newline; it is valid until the
// following call. A final line without a newline is returned before EOF.
func (l *lineReader) next() ([]byte, error) {
	if cap(l.buf) > 2<<20 {
		// Keep a buffer for answers of a megabyte or so, which come in
		// streaks, but not a rare huge message's.
		l.buf = nil
	}
	l.buf = l.buf[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		if err == nil && len(l.buf) == 0 && len(chunk)-1 <= l.max {
			return chunk[:len(chunk)-1], nil // the common case: no copy
		}
		if len(l.buf)+len(chunk) > l.max+1 {
			l.buf = nil
			if err != nil && !l.skipLine() {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("%w: over %d bytes", errLineTooLong, l.max)
		}
		l.buf = append(l.buf, chunk...)
		switch {
		case err == nil:
			return l.buf[:len(l.buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(l.buf) > 0:
			return l.buf, nil
		default:
			return nil, err
		}
	}
}

// skipLine discards the rest of a line; false at EOF or error.
func (l *lineReader) skipLine() bool {
	l.buf = nil
	for {
		_, err := l.r.ReadSlice('\n')
		switch {
		case err == nil:
			return true
		case errors.Is(err, bufio.ErrBufferFull):
		default:
			return false
		}
	}
}
