//go:build unix

package loghub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/logwriter"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// hubEnv makes the test binary a log hub on its stdin, as
// `supervisor _log-writer` is (TestMain).
const hubEnv = "LOGHUB_TEST_HUB"

func TestMain(m *testing.M) {
	if os.Getenv(hubEnv) == "1" {
		os.Exit(runTestHub())
	}
	os.Exit(m.Run())
}

// runTestHub copies the pipes the daemon side hands it until none is left
// and no daemon is there: there is no next daemon to dial.
func runTestHub() int {
	fc, err := net.FileConn(os.Stdin)
	if err != nil {
		return 2
	}
	os.Stdin.Close()
	conn, err := api.NewConn(fc.(*net.UnixConn))
	if err != nil {
		return 2
	}
	h := logwriter.NewHub()
	h.Run(context.Background(), conn, func(context.Context) (*api.Conn, error) {
		return nil, errors.New("no next daemon here")
	})
	h.Wait()
	return 0
}

// hubProcs starts hubs as processes of the test binary, so a hub the test
// kills stops reading its pipes as a real one does: two readers of one
// pipe would reorder its lines.
type hubProcs struct {
	t      *testing.T
	ended  chan struct{} // a token per hub that exited
	reaped sync.WaitGroup
	mu     sync.Mutex
	procs  []*exec.Cmd // by start order
}

func (s *hubProcs) spawn(sock *os.File) (int, proc.Token, error) {
	defer sock.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hubEnv+"=1", "GOMAXPROCS=1")
	cmd.Stdin = sock
	if err := cmd.Start(); err != nil {
		return 0, proc.Token{}, err
	}
	tok, err := proc.TokenOf(cmd.Process.Pid)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, proc.Token{}, err
	}
	s.mu.Lock()
	s.procs = append(s.procs, cmd)
	s.mu.Unlock()
	s.reaped.Add(1)
	go func() {
		defer s.reaped.Done()
		cmd.Wait()
		s.ended <- struct{}{}
	}()
	return cmd.Process.Pid, tok, nil
}

// started is how many hubs were started.
func (s *hubProcs) started() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.procs)
}

// kill kills the i-th hub started, as if it died.
func (s *hubProcs) kill(i int) {
	s.mu.Lock()
	cmd := s.procs[i]
	s.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil {
		s.t.Fatalf("kill hub %d (pid %d): %v", i, cmd.Process.Pid, err)
	}
}

// testHubs is the daemon's side of hub processes of perHub pipes each,
// closed with the test, which kills every hub it started, by pid.
func testHubs(t *testing.T, perHub int) (*Hubs, *hubProcs) {
	s := &hubProcs{t: t, ended: make(chan struct{}, 16)}
	h := New(hclog.NewNullLogger(), 1024, s.spawn)
	h.perHub = perHub
	t.Cleanup(func() {
		h.Close()
		s.mu.Lock()
		for _, cmd := range s.procs {
			cmd.Process.Kill() // an exited one's pid is still its until reaped
		}
		s.mu.Unlock()
		s.reaped.Wait()
	})
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
	if got := pipesOf(); len(got) != 3 || s.started() != 3 { // no start runs now
		t.Fatalf("hubs with %v pipes (%d started), want 3 hubs for 5 pipes at 2 each", got, s.started())
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

	// The second hub dies (SIGKILL): its two pipes go to the primary hub
	// until it is full (one more), then to a new hub, with what was
	// written while none read them. (What a hub had read and not yet
	// written dies with it: the first lines are waited for.)
	logged(2, "2 first\n")
	logged(3, "3 first\n")
	s.kill(1)
	fmt.Fprintf(writers[2], "2 second\n")
	deadline := time.Now().Add(30 * time.Second)
	for started := 3; started < 4; {
		if time.Now().After(deadline) {
			t.Fatal("no new hub for the dead hub's pipes")
		}
		time.Sleep(10 * time.Millisecond)
		started = s.started()
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
	if n := s.started(); n != 2 {
		t.Errorf("%d hubs started, want 2: the first had room again", n)
	}
}
