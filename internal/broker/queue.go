package broker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// queue is an outbound message queue drained by one writer goroutine.
// push never blocks, so routing (under the broker's lock) never waits on a
// peer; the writer takes everything queued at once.
//
// The fast path: a message pushed while nothing is queued or being
// written is handed back to the pusher (push's inline), which writes it
// itself once it has released the broker's lock, with one non-blocking
// write (writeInline). That saves the two goroutine wake-ups of a hand-over
// to the writer, most of the relay's cost for small messages. What that
// write leaves (a full pipe, a partial write, an error) becomes the
// writer's, ahead of anything queued meanwhile, so order is kept and
// blocking and errors stay the writer's business.
type queue struct {
	raw  rawWriter // its ok() is false: no fast path (not a non-blocking descriptor)
	pool *bufPool  // recycles messages' buffers once written

	mu      sync.Mutex
	msgs    []outMsg
	size    int // of msgs: what waits behind the message being written
	closed  bool
	inline  bool          // a pusher is writing one message (writeInline)
	writing bool          // the writer holds a batch
	carry   outMsg        // the rest of an inline message, the writer's next
	carried bool          // carry is set (it may be empty: only the newline is left)
	wake    chan struct{} // one pending wake-up for the writer
	drained chan struct{} // closed (and replaced) each time the writer takes a batch
}

// newQueue makes the queue of the writer w; the fast path is taken only
// if w is a non-blocking descriptor.
func newQueue(w io.Writer, pool *bufPool) *queue {
	return &queue{raw: newRawWriter(w), pool: pool, wake: make(chan struct{}, 1), drained: make(chan struct{})}
}

// push appends msg unless that would put more than limit bytes behind the
// batch the writer holds (limit 0: no limit). One message, however large,
// is always accepted by an empty queue: the limit is on a peer that does
// not read, not on the size of an answer. inline hands msg back to the
// caller, who must pass it to writeInline once it holds no lock: the
// queue was idle.
func (q *queue) push(msg outMsg, limit int) (ok, inline bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return true, false // the writer is gone; nobody will read it
	}
	if q.raw.ok() && !q.inline && !q.writing && !q.carried && len(q.msgs) == 0 {
		q.inline = true
		return true, true
	}
	if limit > 0 && len(q.msgs) > 0 && q.size+len(msg.b) > limit {
		return false, false
	}
	q.msgs = append(q.msgs, msg)
	q.size += len(msg.b)
	if !q.inline {
		q.signal()
	}
	return true, false
}

// signal wakes the writer; call with mu held.
func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// writeInline is the fast path's one non-blocking write of msg and its
// newline; whatever it does not write goes to the writer, ahead of what
// was queued meanwhile. Call it without any lock held.
func (q *queue) writeInline(msg outMsg) {
	n := q.raw.writeOnce(msg.b)
	if n > len(msg.b) {
		q.pool.put(msg.buf)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.inline = false
	if n <= len(msg.b) {
		// The pipe was full or the write failed: the writer waits for
		// room, or meets the error and handles it as its own.
		q.carry, q.carried = outMsg{b: msg.b[n:], buf: msg.buf}, true
	}
	if q.carried || len(q.msgs) > 0 || q.closed {
		q.signal()
	}
}

// over reports whether more than limit bytes wait, and a channel closed
// when the writer next takes a batch.
func (q *queue) over(limit int) (bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.size > limit, q.drained
}

// take returns every queued message, waiting for one; ok is false once
// the queue is closed and empty, or stop is closed. The writer calls done
// once it has written the batch.
func (q *queue) take(stop <-chan struct{}) (batch []outMsg, ok bool) {
	for {
		q.mu.Lock()
		if !q.inline && (q.carried || len(q.msgs) > 0) {
			batch = q.msgs
			if q.carried {
				batch = append([]outMsg{q.carry}, batch...)
				q.carry, q.carried = outMsg{}, false
			}
			q.msgs, q.size, q.writing = nil, 0, true
			close(q.drained)
			q.drained = make(chan struct{})
			q.mu.Unlock()
			return batch, true
		}
		closed := q.closed && !q.inline
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

// done tells that the batch take returned is written: the queue is idle
// again unless more waits.
func (q *queue) done() {
	q.mu.Lock()
	q.writing = false
	q.mu.Unlock()
}

// close lets the writer finish what is queued and stop.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.signal()
}

// writeBatch writes each message and its newline, flushing once; the
// buffers of written messages go back to pool.
func writeBatch(w *bufio.Writer, batch []outMsg, pool *bufPool) error {
	for _, m := range batch {
		w.Write(m.b)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, m := range batch {
		pool.put(m.buf)
	}
	return nil
}

// outMsg is a queued message. buf, if set, is the pooled buffer it lies
// in (a large answer to one client), recycled once the message is
// written; nothing else may refer to it.
type outMsg struct {
	b   []byte
	buf []byte
}

// Buffers of pooled messages: from poolMin bytes, for answers of a
// megabyte or so, up to poolMax.
const (
	poolMin = 64 << 10
	poolMax = 16 << 20
)

// bufPool recycles the buffers of large messages. Answers of a megabyte
// come in streaks; without it each is a fresh allocation the runtime
// zeroes, and the heap churn keeps the scavenger returning pages to the
// kernel that the next answer faults back in. The zero value is ready;
// a nil pool recycles nothing.
type bufPool struct{ p sync.Pool }

// get returns an empty buffer of at least n bytes' capacity.
func (p *bufPool) get(n int) []byte {
	if v, _ := p.p.Get().(*[]byte); v != nil && cap(*v) >= n {
		return (*v)[:0]
	}
	// Headroom, so that an answer a little larger than the last reuses it.
	return make([]byte, 0, n+n/8)
}

func (p *bufPool) put(b []byte) {
	if p == nil || cap(b) < poolMin || cap(b) > poolMax {
		return
	}
	b = b[:0]
	p.p.Put(&b)
}

// errLineTooLong is a line over the reader's limit.
var errLineTooLong = errors.New("line too long")

// lineReader reads newline-delimited messages of up to max bytes. It
// reads straight into its own buffer, which grows to hold a long line:
// a megabyte answer is read in as large pieces as the pipe gives and
// copied once (from the kernel), not gathered from a bufio.Reader's.
type lineReader struct {
	r   io.Reader
	max int
	buf []byte
	// buf[start:end] is read and not returned yet; buf[start:scan] holds
	// no newline.
	start, scan, end int
	err              error // of the last read, returned once buf is used up
}

// lineBuf is the reader's usual buffer size, and what it shrinks back to.
const lineBuf = 64 << 10

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: r, max: max, buf: make([]byte, lineBuf)}
}

// next returns the next line without its newline; it is valid until the
// following call. A final line without a newline is returned before EOF.
// A line over max is skipped and reported as errLineTooLong (or
// io.ErrUnexpectedEOF if the input ends within it).
func (l *lineReader) next() ([]byte, error) {
	if l.start == l.end {
		// All read is used up (the usual case between a request and its
		// answer): the next line starts at the front, with no copy.
		l.start, l.scan, l.end = 0, 0, 0
	}
	if len(l.buf) > 2<<20 && l.end-l.start <= lineBuf/2 {
		// Keep a buffer for answers of a megabyte or so, which come in
		// streaks, but not a rare huge message's.
		buf := make([]byte, lineBuf)
		l.end = copy(buf, l.buf[l.start:l.end])
		l.scan -= l.start
		l.start, l.buf = 0, buf
	}
	skipping := false
	for {
		if i := bytes.IndexByte(l.buf[l.scan:l.end], '\n'); i >= 0 {
			nl := l.scan + i
			line := l.buf[l.start:nl]
			l.start, l.scan = nl+1, nl+1
			if skipping || len(line) > l.max {
				return nil, fmt.Errorf("%w: over %d bytes", errLineTooLong, l.max)
			}
			return line, nil
		}
		l.scan = l.end
		if l.end-l.start > l.max {
			// Over the limit with no end in sight: drop what is read and
			// skip to the newline.
			skipping = true
			l.start, l.scan, l.end = 0, 0, 0
		}
		if l.err != nil {
			switch {
			case skipping:
				return nil, io.ErrUnexpectedEOF
			case errors.Is(l.err, io.EOF) && l.end > l.start:
				line := l.buf[l.start:l.end]
				l.start, l.scan = l.end, l.end
				return line, nil
			}
			return nil, l.err
		}
		if l.end == len(l.buf) {
			l.room()
		}
		n, err := l.r.Read(l.buf[l.end:])
		l.end += n
		l.err = err
	}
}

// room makes space after end: the pending bytes move to the front, into
// a buffer twice as large if they fill half of it.
func (l *lineReader) room() {
	pending := l.end - l.start
	buf := l.buf
	if pending*2 > len(buf) {
		buf = make([]byte, min(2*len(buf), l.max+1+lineBuf))
	}
	copy(buf, l.buf[l.start:l.end])
	l.buf = buf
	l.scan -= l.start
	l.start, l.end = 0, pending
}
