//go:build unix

package loghub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/logwriter"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// inProcessHubs runs hubs as goroutines on the socket a hub process
// would get (the daemon side cannot tell), and lets the test end one as if
// it died.
type inProcessHubs struct {
	ended chan struct{} // a token per hub that returned
	sides []*api.Conn   // each hub's end of its socket, by start order
}

func (s *inProcessHubs) spawn(sock *os.File) (int, proc.Token, error) {
	defer sock.Close()
	fc, err := net.FileConn(sock)
	if err != nil {
		return 0, proc.Token{}, err
	}
	theirs, err := api.NewConn(fc.(*net.UnixConn))
	if err != nil {
		fc.Close()
		return 0, proc.Token{}, err
	}
	s.sides = append(s.sides, theirs)
	h := logwriter.NewHub()
	go func() {
		h.Run(context.Background(), theirs, func(context.Context) (*api.Conn, error) {
			return nil, errors.New("no next daemon here")
		})
		s.ended <- struct{}{}
	}()
	return 0, proc.Token{}, nil // no process: none to kill
}

// testHubs is the daemon's side of in-process hubs of perHub pipes each,
// closed with the test.
func testHubs(t *testing.T, perHub int) (*Hubs, *inProcessHubs) {
	s := &inProcessHubs{ended: make(chan struct{}, 16)}
	h := New(hclog.NewNullLogger(), 1024, s.spawn)
	h.perHub = perHub
	t.Cleanup(h.Close)
	return h, s
}

// addPipe opens a log pipe to path through h and returns its write end
// (closed with the test).
func addPipe(t *testing.T, h *Hubs, path string) *os.File {
	t.Helper()
	fds, err := cloexecPair(unix.Pipe)
	if err != nil {
		t.Fatal(err)
	}
	unix.SetNonblock(fds[0], true)
	if err := h.add(&hubPipe{r: fds[0], spec: api.LogPipe{Path: path}}, nil); err != nil {
		t.Fatal(err)
	}
	w := os.NewFile(uintptr(fds[1]), "w")
	t.Cleanup(func() { w.Close() })
	return w
}

// TestLogHubsFillAndRehome: a hub takes at most perHub pipes, the next
// ones go to a new hub; a full hub whose pipes all ended is let go; the
// pipes of a hub that dies go to a new one and lose no line.
func TestLogHubsFillAndRehome(t *testing.T) {
	dir := t.TempDir()
	h, s := testHubs(t, 2)

	var writers []*os.File
	for i := range 5 {
		w := addPipe(t, h, filepath.Join(dir, fmt.Sprint(i, ".log")))
		fmt.Fprintf(w, "%d first\n", i)
		writers = append(writers, w)
	}
	pipesOf := func() []int {
		var n []int
		for _, st := range h.Status() {
			n = append(n, st.Pipes)
		}
		return n
	}
	if got := pipesOf(); len(got) != 3 || len(s.sides) != 3 { // no start runs now
		t.Fatalf("hubs with %v pipes (%d started), want 3 hubs for 5 pipes at 2 each", got, len(s.sides))
	}
	logged := func(i int, want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprint(i, ".log")))
			if string(b) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("log %d: %q, want %q", i, b, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// The first hub is full and not where new pipes go: once its two
	// pipes end, it is let go and returns.
	writers[0].Close()
	writers[1].Close()
	select {
	case <-s.ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the drained full hub was not let go")
	}
	logged(0, "0 first\n")

	// The second hub dies (its end of the socket closes): its two pipes go
	// to the primary hub until it is full (one more), then to a new hub,
	// with what was written while none read them.
	h.mu.Lock() // start appends to sides under it
	second := s.sides[1]
	h.mu.Unlock()
	second.Close()
	fmt.Fprintf(writers[2], "2 second\n")
	deadline := time.Now().Add(30 * time.Second)
	for started := 3; started < 4; {
		if time.Now().After(deadline) {
			t.Fatal("no new hub for the dead hub's pipes")
		}
		time.Sleep(10 * time.Millisecond)
		h.mu.Lock() // start runs under it
		started = len(s.sides)
		h.mu.Unlock()
	}
	fmt.Fprintf(writers[3], "3 second\n")
	logged(2, "2 first\n2 second\n")
	logged(3, "3 first\n3 second\n")
	h.mu.Lock()
	n := len(h.pipes)
	h.mu.Unlock()
	if n != 3 {
		t.Errorf("the daemon holds %d pipes, want the 3 open ones", n)
	}
	if got := fmt.Sprint(pipesOf()); got != "[1 2]" {
		t.Errorf("hubs with %s pipes, want [1 2]: a new primary with one of the dead hub's pipes, the full one with its own and the other", got)
	}
}

// TestLogHubsReuseRoom: when the hub new pipes go to is full, a hub with
// room (at most half full) takes them before a new one starts.
func TestLogHubsReuseRoom(t *testing.T) {
	dir := t.TempDir()
	h, s := testHubs(t, 2)
	var writers []*os.File
	add := func() {
		t.Helper()
		writers = append(writers, addPipe(t, h, filepath.Join(dir, fmt.Sprint(len(writers), ".log"))))
	}
	add()
	add() // the first hub is full
	add() // a second hub
	writers[0].Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h.mu.Lock()
		n := len(h.pipes)
		h.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first pipe's end was not reported")
		}
		time.Sleep(10 * time.Millisecond)
	}
	add() // the second hub is full now
	add() // the first has room again
	if len(s.sides) != 2 {
		t.Errorf("%d hubs started, want 2: the first had room again", len(s.sides))
	}
}
