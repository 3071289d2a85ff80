package sharing

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// wait is how long a test waits for what it expects: generous, as the
// machines are shared.
const wait = 10 * time.Second

// idleCounter counts idle calls and says on a channel each time.
type idleCounter struct {
	n    atomic.Int32
	told chan struct{}
}

func newRefs(linger time.Duration) (*Refs, *idleCounter) {
	c := &idleCounter{told: make(chan struct{}, 8)}
	return NewRefs(linger, func() { c.n.Add(1); c.told <- struct{}{} }), c
}

func TestRefsLingerStopsAnUnclaimedServerOnce(t *testing.T) {
	r, idle := newRefs(10 * time.Millisecond)
	if ok, lingering := r.Take("s1", true); !ok || lingering {
		t.Fatalf("Take by an active session = %v, %v; want a reference and no linger", ok, lingering)
	}
	if !r.Release("s1") {
		t.Fatal("releasing the last reference did not begin the linger")
	}
	select {
	case <-idle.told:
	case <-time.After(wait):
		t.Fatal("the linger passed unclaimed and idle was not called")
	}
	if r.Usable() {
		t.Error("a server whose linger passed is still usable")
	}
	if ok, _ := r.Take("s2", true); ok {
		t.Error("a server stopping after its linger took a new reference")
	}
	if r.StoppedCh() == nil {
		t.Error("StoppedCh is nil for a stopping server")
	}
	// Its stop for good is the daemon's: Finish still decides it once.
	first, done := r.Finish()
	if !first {
		t.Fatal("the first Finish after the linger was not first")
	}
	if again, _ := r.Finish(); again {
		t.Error("a second Finish was first too")
	}
	done()
	select {
	case <-r.Stopped():
	default:
		t.Error("Stopped is not closed after the stop's done")
	}
	if n := idle.n.Load(); n != 1 {
		t.Errorf("idle called %d times, want 1", n)
	}
}

func TestRefsTakeDuringLingerKeepsTheServer(t *testing.T) {
	r, idle := newRefs(150 * time.Millisecond)
	r.Take("s1", true)
	r.Release("s1")
	if ok, _ := r.Take("s2", true); !ok {
		t.Fatal("a session could not take a reference during the linger")
	}
	// Past the linger the stale timer does nothing.
	time.Sleep(300 * time.Millisecond)
	if n := idle.n.Load(); n != 0 {
		t.Fatalf("idle called %d times with a session holding the server", n)
	}
	if !r.Usable() {
		t.Error("a held server is not usable")
	}
	// A release of a session that holds nothing changes nothing.
	if r.Release("s-unknown") {
		t.Error("releasing an unknown session began a linger")
	}
}

func TestRefsInactiveSessionTakesNoReference(t *testing.T) {
	r, idle := newRefs(10 * time.Millisecond)
	ok, lingering := r.Take("ended", false)
	if !ok || !lingering {
		t.Fatalf("Take by an ended session = %v, %v; want usable and lingering", ok, lingering)
	}
	select {
	case <-idle.told:
	case <-time.After(wait):
		t.Fatal("a server only an ended session asked for did not linger out")
	}
}

func TestRefsFinishStopsTheLingerAndQuits(t *testing.T) {
	r, idle := newRefs(50 * time.Millisecond)
	r.Linger() // taken back after a restart: lingers unless claimed
	first, done := r.Finish()
	if !first {
		t.Fatal("Finish was not first")
	}
	select {
	case <-r.Quit():
	default:
		t.Error("Quit is not closed once the stop for good is decided")
	}
	time.Sleep(150 * time.Millisecond)
	if n := idle.n.Load(); n != 0 {
		t.Errorf("the linger fired after Finish (%d)", n)
	}
	select {
	case <-r.Stopped():
		t.Error("Stopped closed before the stop was done")
	default:
	}
	done()
	<-r.Stopped()
}

func TestRefsDetachLeavesNothingToWaitFor(t *testing.T) {
	r, idle := newRefs(20 * time.Millisecond)
	r.Linger()
	r.Detach()
	select {
	case <-r.Stopped():
	case <-time.After(wait):
		t.Fatal("Stopped not closed after Detach")
	}
	time.Sleep(60 * time.Millisecond)
	if idle.n.Load() != 0 || r.Usable() {
		t.Errorf("after Detach: idle %d, usable %v; want neither", idle.n.Load(), r.Usable())
	}
	if first, _ := r.Finish(); first {
		t.Error("Finish after Detach was first: a detached server would be stopped")
	}
}

// server is what tests keep in slots.
type server struct {
	n    int
	life *Refs
}

func (s *server) Life() *Refs { return s.life }

func TestSlotsStartOncePerPort(t *testing.T) {
	var slots Slots[*server]
	var starts atomic.Int32
	release := make(chan struct{})
	start := func() (*server, error) {
		n := starts.Add(1)
		<-release
		return &server{n: int(n), life: NewRefs(time.Hour, func() {})}, nil
	}
	const callers = 16
	var wg sync.WaitGroup
	got := make([]*server, callers)
	startedBy := make([]bool, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, started, err := slots.Get(context.Background(), 8080, start)
			if err != nil {
				t.Error(err)
			}
			got[i], startedBy[i] = s, started
		}()
	}
	time.Sleep(50 * time.Millisecond) // let them all come
	close(release)
	wg.Wait()
	if n := starts.Load(); n != 1 {
		t.Fatalf("%d starts for one port, want 1", n)
	}
	starters := 0
	for i := range callers {
		if got[i] != got[0] || got[i] == nil {
			t.Fatalf("caller %d got %p, caller 0 %p: want one server", i, got[i], got[0])
		}
		if startedBy[i] {
			starters++
		}
	}
	if starters != 1 {
		t.Errorf("%d callers say they started it, want 1", starters)
	}
	// Another port is another server.
	other, started, err := slots.Get(context.Background(), 8081, func() (*server, error) {
		return &server{n: 99, life: NewRefs(time.Hour, func() {})}, nil
	})
	if err != nil || !started || other.n != 99 {
		t.Errorf("port 8081: %+v started %v err %v", other, started, err)
	}
	if len(slots.All()) != 2 {
		t.Errorf("All = %d servers, want 2", len(slots.All()))
	}
}

func TestSlotsShareAFailedStartAndTryAgainAfter(t *testing.T) {
	var slots Slots[*server]
	boom := errors.New("port in use")
	_, started, err := slots.Get(context.Background(), 9000, func() (*server, error) { return nil, boom })
	if !errors.Is(err, boom) || started {
		t.Fatalf("failed start: started %v err %v", started, err)
	}
	s, started, err := slots.Get(context.Background(), 9000, func() (*server, error) {
		return &server{life: NewRefs(time.Hour, func() {})}, nil
	})
	if err != nil || !started || s == nil {
		t.Fatalf("the start after a failed one: %v %v %v", s, started, err)
	}
}

func TestSlotsWaitForAStoppingServerThenStartAnew(t *testing.T) {
	var slots Slots[*server]
	old := &server{n: 1, life: NewRefs(time.Hour, func() {})}
	slots.Put(7000, old)
	_, done := old.life.Finish() // stopping for good, not done yet
	got := make(chan *server, 1)
	go func() {
		s, _, err := slots.Get(context.Background(), 7000, func() (*server, error) {
			return &server{n: 2, life: NewRefs(time.Hour, func() {})}, nil
		})
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	select {
	case s := <-got:
		t.Fatalf("got server %d while the old one was still stopping", s.n)
	case <-time.After(100 * time.Millisecond):
	}
	slots.Forget(7000, old)
	done()
	select {
	case s := <-got:
		if s.n != 2 {
			t.Errorf("got server %d, want the new one", s.n)
		}
	case <-time.After(wait):
		t.Fatal("Get still waits after the old server stopped")
	}
	// Forget of a server no longer in the slot leaves the new one.
	slots.Forget(7000, old)
	if all := slots.All(); len(all) != 1 || all[0].n != 2 {
		t.Errorf("after a stale Forget: %v", all)
	}
}

func TestSlotsGetGivesUpWithItsContext(t *testing.T) {
	var slots Slots[*server]
	block := make(chan struct{})
	defer close(block)
	go slots.Get(context.Background(), 6000, func() (*server, error) { <-block; return nil, errors.New("never") })
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := slots.Get(ctx, 6000, func() (*server, error) { t.Error("a second start while one is in flight"); return nil, nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get behind a stuck start returned %v, want its context's deadline", err)
	}
}
