package daemon

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// taskWait bounds how long an exiting daemon waits for its background work
// (tasks) once its actors have ended.
const taskWait = 2 * time.Second

// tasks owns the daemon's background goroutines: the work a request, the
// recovery or a server's exit starts and that outlives what started it
// (monitors, stops, the supervisors of shared servers, watches of brokers).
// The run.Group's actors own everything else.
//
// Its life is the daemon's: once the group has ended, the daemon cancels
// d.life, which ends every task that only waits (each selects on it), and
// waits, at most taskWait, for the rest: stops under way. A stop is never
// hurried by the exit (its context is not d.life): one still running at
// the bound is left as a crash would leave it, and the next daemon resumes
// it from its record (design §7). What was left is logged by name.
type tasks struct {
	mu      sync.Mutex
	running map[string]int
	n       int
	idle    chan struct{} // closed when n drops to 0; nil while n is 0
}

// Go runs f on a goroutine of its own, counted under name until it returns.
func (t *tasks) Go(name string, f func()) {
	t.mu.Lock()
	if t.running == nil {
		t.running = map[string]int{}
	}
	t.running[name]++
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
	t.mu.Unlock()
	go func() {
		defer t.done(name)
		f()
	}()
}

func (t *tasks) done(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running[name]--; t.running[name] == 0 {
		delete(t.running, name)
	}
	if t.n--; t.n == 0 {
		close(t.idle)
		t.idle = nil
	}
}

// wait waits until no task runs, or for at most d, and names what still
// runs then ("stop ×2"), sorted; none when all ended.
func (t *tasks) wait(d time.Duration) []string {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		idle := t.idle
		t.mu.Unlock()
		if idle == nil {
			return nil
		}
		select {
		case <-idle:
			// A task may have started another as it ended: look again.
		case <-deadline.C:
			return t.names()
		}
	}
}

// names is what runs now, as "name ×count".
func (t *tasks) names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.running))
	for name, n := range t.running {
		out = append(out, fmt.Sprintf("%s ×%d", name, n))
	}
	sort.Strings(out)
	return out
}
