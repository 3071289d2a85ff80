//go:build unix

package broker

import (
	"bufio"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startWriter runs q's writer as writeClient does, until q is closed.
func startWriter(t *testing.T, q *queue, w io.Writer) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(w, 64<<10)
		for {
			batch, ok := q.take(nil)
			if !ok {
				errc <- nil
				return
			}
			if err := writeBatch(bw, batch, q.pool); err != nil {
				errc <- err
				return
			}
			q.done()
		}
	}()
	return errc
}

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// msgN is message i: its number, padded to size bytes.
func msgN(i, size int) []byte {
	s := strconv.Itoa(i) + ":"
	return []byte(s + strings.Repeat("m", max(size-len(s), 0)))
}

// readN reads n lines and checks they are messages 0..n-1 in order.
func readN(t *testing.T, r io.Reader, n int) {
	t.Helper()
	br := bufio.NewReaderSize(r, 1<<20)
	for i := range n {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read message %d: %v", i, err)
		}
		num, _, _ := strings.Cut(line, ":")
		if num != strconv.Itoa(i) {
			t.Fatalf("message %d: got %q (%d bytes), want number %d", i, num, len(line), i)
		}
	}
}

// A message the fast path cannot write whole (bigger than the pipe) is
// finished by the writer before anything queued behind it, and the queue
// takes the fast path again once idle.
func TestQueueInlineHandOverKeepsOrder(t *testing.T) {
	r, w := pipe(t)
	q := newQueue(w, nil)
	if !q.raw.ok() {
		t.Fatal("os.Pipe's write end: want the fast path (a non-blocking descriptor)")
	}
	done := startWriter(t, q, w)
	ok, inline := q.push(outMsg{b: msgN(0, 300<<10)}, 0)
	if !ok || !inline {
		t.Fatalf("push to an idle queue = %v, %v; want accepted and inline", ok, inline)
	}
	for i := 1; i <= 50; i++ {
		if ok, inline := q.push(outMsg{b: msgN(i, 100)}, 0); !ok || inline {
			t.Fatalf("push %d during an inline write = %v, %v; want queued", i, ok, inline)
		}
	}
	q.writeInline(outMsg{b: msgN(0, 300<<10)}) // 64 KiB at most: the rest is the writer's
	readN(t, r, 51)
	// The writer calls done after its write; then the queue is idle.
	deadline := time.Now().Add(5 * time.Second)
	for {
		q.mu.Lock()
		idle := !q.writing
		q.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never finished its batch")
		}
		time.Sleep(time.Millisecond)
	}
	if ok, inline := q.push(outMsg{b: msgN(51, 10)}, 0); !ok || !inline {
		t.Fatalf("push to the drained queue = %v, %v; want the fast path again", ok, inline)
	}
	q.writeInline(outMsg{b: msgN(51, 10)})
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || line != string(msgN(51, 10))+"\n" {
		t.Fatalf("after the hand-over: read %q, %v; want message 51", line, err)
	}
	q.close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Concurrent routers, as the broker's readers are: each pushes under one
// lock and writes inline after releasing it. Every message arrives, in
// the order pushed, whatever mix of fast path and writer carried it.
func TestQueueInlineConcurrentOrder(t *testing.T) {
	r, w := pipe(t)
	q := newQueue(w, nil)
	done := startWriter(t, q, w)
	const n = 3000
	var mu sync.Mutex // the broker's lock
	next := 0
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				size := 10 + rng.IntN(2<<10)
				if rng.IntN(50) == 0 {
					size = 100 << 10 // over the pipe's capacity
				}
				mu.Lock()
				if next == n {
					mu.Unlock()
					return
				}
				m := msgN(next, size)
				next++
				_, inline := q.push(outMsg{b: m}, 0)
				mu.Unlock()
				if inline {
					q.writeInline(outMsg{b: m})
				}
			}
		}()
	}
	readN(t, r, n)
	wg.Wait()
	q.close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A peer that does not read: the fast path's write finds the pipe full,
// the writer takes the message and waits, and the queue's limit is
// reached as before (the broker then detaches that client).
func TestQueueInlineFullPipeLimit(t *testing.T) {
	_, w := pipe(t)
	q := newQueue(w, nil)
	done := startWriter(t, q, w)
	const limit = 256 << 10
	m := msgN(0, 16<<10)
	pushed := 0
	for ; pushed < 1000; pushed++ {
		ok, inline := q.push(outMsg{b: m}, limit)
		if !ok {
			break
		}
		if inline {
			q.writeInline(outMsg{b: m})
		}
		time.Sleep(100 * time.Microsecond) // let the writer take what it can
	}
	// The pipe (64 KiB), the batch the writer holds and limit bytes behind it.
	if pushed == 1000 || pushed*len(m) < limit {
		t.Fatalf("accepted %d messages of %d bytes to a peer that does not read; want refusal once %d bytes wait", pushed, len(m), limit)
	}
	w.Close() // what detach does: the writer's pending write fails
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("writer: want the write error of a closed output")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("writer still blocked after its output was closed")
	}
}

// Only non-blocking descriptors take the fast path: a write to a
// blocking one could block a router, and other writers have no
// descriptor at all.
func TestQueueInlineOnlyNonBlocking(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	defer r.Close()
	defer w.Close()
	_, pw := io.Pipe()
	for _, tc := range []struct {
		name string
		w    io.Writer
	}{{"blocking pipe", w}, {"io.Pipe", pw}} {
		if q := newQueue(tc.w, nil); q.raw.ok() {
			t.Errorf("%s: fast path on; want it off", tc.name)
		}
		if _, inline := newQueue(tc.w, nil).push(outMsg{b: []byte("x")}, 0); inline {
			t.Errorf("%s: push returned inline", tc.name)
		}
	}
}
