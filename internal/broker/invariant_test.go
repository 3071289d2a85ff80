//go:build linux

package broker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/jsonrpc"
)

// The invariant harness of issue 26: clients doing random operations on
// one lazy, idle-stopping broker, against a Go and a Node upstream, under
// CPU load, and the promises checked after each run.

// TestInvariants runs six clients (two of them attaching late, two of
// them disconnecting with a call in flight) doing seeded random
// operations against a lazy broker with a 300 ms idle stop, over the Go
// fixture ("go") and the real server-everything ("node"), while two busy
// loops load the CPU: echo calls with unique texts, slow calls with
// progress tokens, cancellations of their own calls and of ids they never
// sent (other clients' ids, their own ids in the other JSON type, small
// integers), garbage lines, ambiguous messages (case-variant, escaped and
// duplicate keys), tools/list, pauses longer than the idle time. The
// clients share ids (every client counts 1, 2, 3...) and progress tokens.
// The run is three epochs; after each one every answer is awaited and the
// idle upstream must stop, so the next epoch starts it lazily (the last
// one instead starts as the stop is due, racing it). It checks:
//
//   - a client receives answers only to ids it sent as requests (null for
//     its garbage lines), and progress only for tokens it sent, each
//     within its call's steps and before its answer;
//   - every request of a connected client is answered exactly once (at
//     most once when it cancelled it), with the answer to what it sent
//     (its own echo text, its slow call's steps): an idle stop with a
//     request in flight shows as a request never answered, or an error;
//   - no error answers but the broker's refusals: -32600 under the exact
//     id refuse.go answers with (the last exact "id") for an ambiguous
//     request, nothing for an ambiguous notification or a message with
//     only a case-variant "ID"; one error with id null per garbage line;
//   - Stats().Refused is the number of ambiguous messages sent, the run
//     stopped the upstream for idleness and started it lazily, and it
//     never crashed;
//   - the cache's "tools/list " entry, and every tools/list answer, equal
//     (as JSON values) what a fresh upstream process lists itself.
//
// The seed is logged; BROKER_INVARIANT_SEED=N reruns the same operations.
func TestInvariants(t *testing.T) {
	seed := uint64(26)
	if s := os.Getenv("BROKER_INVARIANT_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BROKER_INVARIANT_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d (rerun with BROKER_INVARIANT_SEED=%d)", seed, seed)
	t.Run("go", func(t *testing.T) {
		runInvariants(t, seed, invFlavor{
			name:       "go",
			argv:       fixtureArgv(),
			initParams: `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"invariant","version":"1"}}`,
			echo: func(text string) (string, string) {
				return fmt.Sprintf(`{"text":%s}`, quote(text)), text
			},
			slow: func(r *rand.Rand) (string, string, int) {
				steps, ms := 1+r.IntN(4), 20+r.IntN(130)
				return "slow", fmt.Sprintf(`{"steps":%d,"ms":%d}`, steps, ms), steps
			},
			slowDone: func(steps int) string { return fmt.Sprintf("done %d steps", steps) },
			long:     func() (string, string) { return "slow", `{"steps":5,"ms":200}` },
		})
	})
	t.Run("node", func(t *testing.T) {
		runInvariants(t, seed, invFlavor{
			name: "node",
			argv: everythingArgv(t),
			// As initEverything: sampling, no roots (server-everything
			// would ask for them with no request in flight).
			initParams: `{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"invariant","version":"1"}}`,
			echo: func(text string) (string, string) {
				return fmt.Sprintf(`{"message":%s}`, quote(text)), "Echo: " + text
			},
			slow: func(r *rand.Rand) (string, string, int) {
				steps, ms := 1+r.IntN(4), 150+r.IntN(600)
				return "trigger-long-running-operation", fmt.Sprintf(`{"duration":%.3f,"steps":%d}`, float64(ms)/1000, steps), steps
			},
			slowDone: func(steps int) string { return fmt.Sprintf("Steps: %d.", steps) },
			long:     func() (string, string) { return "trigger-long-running-operation", `{"duration":1,"steps":4}` },
		})
	})
}

// invFlavor is one upstream and how its tools are called.
type invFlavor struct {
	name       string
	argv       []string
	initParams string // every client's initialize params (the first's reach the upstream)
	// echo returns the arguments of an echo call of text and the answer's
	// text; slow a slow tool, its arguments and steps (each one progress
	// notification), and slowDone what its answer's text holds; long a
	// call still running when a client disconnects.
	echo     func(text string) (args, want string)
	slow     func(r *rand.Rand) (tool, args string, steps int)
	slowDone func(steps int) string
	long     func() (tool, args string)
}

const (
	invClients = 6
	invEpochs  = 3
	invIdle    = 300 * time.Millisecond
	invBudget  = 60 * time.Second // to settle everything a run sent
)

func runInvariants(t *testing.T, seed uint64, f invFlavor) {
	t.Logf("seed %d, upstream %s", seed, f.name)
	began := time.Now()
	invLoad(t, 2)
	h := newHarness(t, f.argv, func(c *Config) { c.Lazy, c.Idle = true, invIdle })

	plan := rand.New(rand.NewPCG(seed, invHash(f.name)))
	shared := &invShared{ids: map[string][]string{}}
	clients := make([]*invClient, invClients)
	for i := range clients {
		c := &invClient{
			name: fmt.Sprintf("c%d", i), f: f, shared: shared, began: began,
			rng:  rand.New(rand.NewPCG(seed, invHash(f.name)+uint64(i)+1)),
			note: make(chan struct{}, 1), done: make(chan struct{}),
			reqs: map[string]*invReq{}, tokens: map[string]*invReq{}, counts: map[string]int{},
			disconnectEpoch: -1,
		}
		c.ops = 30 + c.rng.IntN(11)
		switch i {
		case 4:
			c.attachEpoch = 1
		case 5:
			c.attachEpoch = 2
		}
		if i > 0 {
			c.attachDelay = time.Duration(plan.IntN(400)) * time.Millisecond
		}
		switch i {
		case 1: // an early client leaves mid-run
			c.disconnectEpoch = 1
		case 4: // so does a late one
			c.disconnectEpoch = 2
		}
		c.open(t)
		clients[i] = c
	}
	shared.clients = clients
	defer func() {
		if t.Failed() {
			invDump(t, h, clients)
		}
	}()
	// fatal reports every violation the clients saw, then what stopped the run.
	fatal := func(format string, args ...any) {
		t.Helper()
		for _, c := range clients {
			c.mu.Lock()
			for _, p := range c.problems {
				t.Errorf("client %s: %s", c.name, p)
			}
			c.mu.Unlock()
		}
		t.Fatalf(format, args...)
	}

	// The first client's initialize is the one the upstream gets (and
	// every restart replays): it is done before the others attach.
	if err := clients[0].attach(h); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(invBudget)
	if err := clients[0].initialize(deadline); err != nil {
		fatal("%v", err)
	}

	for epoch := range invEpochs {
		start := time.Now()
		var wg sync.WaitGroup
		for _, c := range clients {
			if c.attachEpoch > epoch || c.isGone() {
				continue
			}
			ops := c.opsFor(epoch)
			wg.Go(func() {
				if c.attachEpoch == epoch && !c.attached {
					time.Sleep(c.attachDelay)
					if err := c.attach(h); err != nil {
						c.problem("attach: %v", err)
						return
					}
					if err := c.initialize(deadline); err != nil {
						c.problem("%v", err)
						return
					}
				}
				c.run(epoch, ops, deadline)
			})
		}
		wg.Wait()
		// Every connected client's requests are answered: then nothing is
		// in flight, and the upstream must stop for idleness.
		for _, c := range clients {
			if !c.attached || c.isGone() {
				continue
			}
			if miss := c.await(deadline); len(miss) > 0 {
				fatal("epoch %d: client %s: requests never answered (or the broker closed its output): %s", epoch, c.name, strings.Join(miss, ", "))
			}
		}
		if epoch == invEpochs-2 {
			// The last epoch starts about when the idle stop is due: its
			// first requests race the stop (and the lazy start after it).
			s := h.b.Stats()
			if !s.IdleSince.IsZero() && s.UpstreamPID != 0 {
				time.Sleep(time.Until(s.IdleSince.Add(invIdle + time.Duration(plan.IntN(80)-40)*time.Millisecond)))
			}
			t.Logf("epoch %d: %v; the next starts as the idle stop is due (upstream pid %d)", epoch, time.Since(start).Round(time.Millisecond), s.UpstreamPID)
			continue
		}
		stopBy := time.Now().Add(wait)
		for s := h.b.Stats(); s.UpstreamPID != 0; s = h.b.Stats() {
			if time.Now().After(stopBy) {
				fatal("epoch %d: nothing in flight, and the upstream (pid %d) was not stopped for idleness; stats %+v", epoch, s.UpstreamPID, s)
			}
			time.Sleep(5 * time.Millisecond)
		}
		s := h.b.Stats()
		t.Logf("epoch %d: %v, then stopped idle; lazy starts %d, idle stops %d, cache hits %d, refused %d", epoch, time.Since(start).Round(time.Millisecond), s.LazyStarts, s.IdleStops, s.CacheHits, s.Refused)
	}

	// Close every client's input: what the broker still holds for it is
	// written before its output closes, so late duplicates show too.
	for _, c := range clients {
		c.w.Close()
	}
	for _, c := range clients {
		if !c.attached {
			t.Errorf("client %s never attached", c.name)
			continue
		}
		select {
		case <-c.done:
		case <-time.After(time.Until(deadline)):
			fatal("client %s: the broker did not close its output after its input closed", c.name)
		}
	}

	fresh := invUpstreamList(t, f.argv, f.initParams)
	refused := 0
	ops := map[string]int{}
	for _, c := range clients {
		c.check(t, fresh)
		refused += c.ambiguous
		for k, n := range c.counts {
			ops[k] += n
		}
	}
	t.Logf("operations: %v", ops)
	s := h.b.Stats()
	if s.Refused != uint64(refused) {
		t.Errorf("Stats().Refused = %d, want %d (the ambiguous messages the clients sent)", s.Refused, refused)
	}
	if s.IdleStops == 0 || s.LazyStarts == 0 {
		t.Errorf("the run stopped the upstream for idleness %d times and started it lazily %d times; want both", s.IdleStops, s.LazyStarts)
	}
	if s.Restarts != 0 {
		t.Errorf("the upstream crashed %d times", s.Restarts)
	}
	cache, _ := h.b.Cache()
	if cache == nil || cache.Lists["tools/list "] == nil {
		t.Errorf("the cache has no tools/list: %+v", cache)
	} else if !invSameJSON(cache.Lists["tools/list "], fresh) {
		t.Errorf("the cache's tools/list differs from the upstream's own:\ncache:    %s\nupstream: %s", cache.Lists["tools/list "], fresh)
	}
	t.Logf("%s: %v; stats: lazy starts %d, idle stops %d, cache hits %d misses %d, refused %d, relayed %d",
		f.name, time.Since(began).Round(time.Millisecond), s.LazyStarts, s.IdleStops, s.CacheHits, s.CacheMisses, s.Refused, s.Relayed)
}

// invReq is a request a client sent that must be answered.
type invReq struct {
	id        string // raw
	kind      string // initialize, echo, slow, list, refused
	token     string // raw progress token, slow
	want      string // the answer's text (echo) or what it holds (slow)
	steps     int
	cancelled bool // by its client: answered at most once
	answers   []msg
	progress  []int
}

// invClient is one client: its operations run on one goroutine, its
// output is read on another.
type invClient struct {
	name            string
	f               invFlavor
	rng             *rand.Rand
	shared          *invShared
	began           time.Time
	ops             int
	attachEpoch     int
	attachDelay     time.Duration
	disconnectEpoch int // -1: never

	inR, w, outW, r *os.File
	note            chan struct{}  // something arrived
	done            chan struct{}  // its output closed (EOF)
	attached        bool           // set before its goroutine starts
	next            int            // its id counter
	garbage         int            // null-id errors it must get
	counts          map[string]int // operations done, by name
	ambiguous       int            // ambiguous messages it sent

	mu       sync.Mutex
	reqs     map[string]*invReq // by raw id
	order    []*invReq
	tokens   map[string]*invReq // by raw progress token
	nulls    []msg
	problems []string
	log      []string
	gone     bool // disconnected: only foreign ids are checked
}

// invShared is what clients know of each other: their ids, which the
// others use as decoys, and whether any of them saw a violation (which
// ends every wait early).
type invShared struct {
	mu      sync.Mutex
	ids     map[string][]string
	clients []*invClient
	failed  atomic.Bool
}

func (s *invShared) add(client, id string) {
	s.mu.Lock()
	s.ids[client] = append(s.ids[client], id)
	s.mu.Unlock()
}

// other picks one of another client's ids (r chooses), "" if none: one
// of its calls in flight when there are, so a cancellation that reached it
// would show.
func (s *invShared) other(client string, r int) string {
	var open []string
	for _, o := range s.clients {
		if o.name != client {
			if q := o.inFlight(r); q != nil {
				open = append(open, q.id)
			}
		}
	}
	if len(open) > 0 && r%4 != 0 {
		return open[r%len(open)]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []string
	for i := range invClients {
		if name := fmt.Sprintf("c%d", i); name != client {
			ids := s.ids[name]
			all = append(all, ids[max(0, len(ids)-8):]...) // recent: likely in flight
		}
	}
	if len(all) == 0 {
		return ""
	}
	return all[r%len(all)]
}

func (c *invClient) open(t *testing.T) {
	var err error
	if c.inR, c.w, err = os.Pipe(); err != nil {
		t.Fatal(err)
	}
	if c.r, c.outW, err = os.Pipe(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.w.Close()
		if c.attached {
			select {
			case <-c.done:
			case <-time.After(wait):
			}
		} else {
			c.inR.Close()
			c.outW.Close()
		}
		c.r.Close()
	})
}

func (c *invClient) attach(h *harness) error {
	if err := h.b.Attach(c.name, c.inR, c.outW); err != nil {
		return err
	}
	c.attached = true
	c.logf("attached")
	go c.read()
	return nil
}

func (c *invClient) isGone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone
}

func (c *invClient) logf(format string, args ...any) {
	line := fmt.Sprintf("%8.3fs %s ", time.Since(c.began).Seconds(), c.name) + fmt.Sprintf(format, args...)
	c.mu.Lock()
	c.log = append(c.log, line)
	c.mu.Unlock()
}

func (c *invClient) problem(format string, args ...any) {
	c.mu.Lock()
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
	c.mu.Unlock()
	c.shared.failed.Store(true)
}

// send writes one line (the op goroutine's only).
func (c *invClient) send(line string) {
	c.logf("-> %s", line)
	if _, err := c.w.WriteString(line + "\n"); err != nil && !c.isGone() {
		c.problem("write %s: %v", line, err)
	}
}

// expect registers a request before it is sent, so its answer is known.
func (c *invClient) expect(r *invReq) {
	c.mu.Lock()
	c.reqs[r.id] = r
	c.order = append(c.order, r)
	if r.token != "" {
		c.tokens[r.token] = r
	}
	c.mu.Unlock()
	c.shared.add(c.name, r.id)
}

// newID is a fresh id of this client: numbers every client also uses,
// the same as strings, strings of its own, and numbers past float64's
// precision (a JavaScript server must never see them).
func (c *invClient) newID() string {
	c.next++
	n := c.next
	switch c.rng.IntN(6) {
	case 0, 1:
		return strconv.Itoa(n)
	case 2:
		return strconv.Quote(strconv.Itoa(n))
	case 3:
		return strconv.Quote(fmt.Sprintf("%s-%d", c.name, n))
	case 4:
		return strconv.Itoa(9007199254740993 + 2*n)
	}
	return strconv.Quote(fmt.Sprintf("id %d é \\ \"x\"", n)) // escapes in an id
}

// newToken is a fresh progress token, shared across clients as ids are.
func (c *invClient) newToken() string {
	c.next++
	switch c.rng.IntN(3) {
	case 0:
		return strconv.Itoa(c.next)
	case 1:
		return strconv.Quote("t" + strconv.Itoa(c.next))
	}
	return strconv.Quote(fmt.Sprintf("%s-t%d", c.name, c.next))
}

// obj is a JSON object of key, value pairs in a random order.
func (c *invClient) obj(kv ...string) string {
	idx := c.rng.Perm(len(kv) / 2)
	parts := make([]string, 0, len(idx))
	for _, i := range idx {
		parts = append(parts, strconv.Quote(kv[2*i])+":"+kv[2*i+1])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func (c *invClient) initialize(deadline time.Time) error {
	r := &invReq{id: "0", kind: "initialize"}
	c.expect(r)
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + c.f.initParams + `}`)
	if miss := c.await(deadline); len(miss) > 0 {
		return fmt.Errorf("client %s: initialize not answered", c.name)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return nil
}

// opsFor is how many operations the client runs in epoch.
func (c *invClient) opsFor(epoch int) int {
	active := invEpochs - c.attachEpoch
	n := c.ops / active
	if epoch == invEpochs-1 {
		n += c.ops % active
	}
	return n
}

var invOps = []struct {
	name   string
	weight int
}{
	{"echo", 24}, {"slow", 12}, {"cancel-own", 7}, {"cancel-foreign", 9}, {"garbage", 4},
	{"ambiguous", 8}, {"list", 6}, {"pause", 14}, {"long-pause", 4}, {"await", 5},
}

// run does n random operations; a client meant to leave in this epoch
// does so with a call in flight at a random point.
func (c *invClient) run(epoch, n int, deadline time.Time) {
	leaveAt := -1
	if c.disconnectEpoch == epoch {
		leaveAt = c.rng.IntN(n)
	}
	total := 0
	for _, op := range invOps {
		total += op.weight
	}
	for i := range n {
		if i == leaveAt {
			c.disconnect()
			return
		}
		pick := c.rng.IntN(total)
		op := invOps[0].name
		for _, o := range invOps {
			if pick < o.weight {
				op = o.name
				break
			}
			pick -= o.weight
		}
		if !c.do(op, deadline) {
			return
		}
	}
}

func (c *invClient) do(op string, deadline time.Time) bool {
	r := c.rng.IntN(1 << 30) // drawn whatever happens, so the ops stay the seed's
	c.counts[op]++
	switch op {
	case "echo":
		c.echo()
	case "slow":
		c.slow()
	case "cancel-own":
		target := c.inFlight(r)
		if target == nil {
			target = c.slow() // cancelled before (or as) it goes out
		}
		c.mu.Lock()
		target.cancelled = true
		c.mu.Unlock()
		c.send(c.obj("jsonrpc", `"2.0"`, "method", `"notifications/cancelled"`, "params", c.obj("requestId", target.id, "reason", `"test"`)))
	case "cancel-foreign":
		c.cancelForeign(r)
	case "garbage":
		c.junk(r)
	case "ambiguous":
		c.ambiguousMsg(r)
	case "list":
		id := c.newID()
		c.expect(&invReq{id: id, kind: "list"})
		if r%2 == 0 {
			c.send(c.obj("jsonrpc", `"2.0"`, "id", id, "method", `"tools/list"`))
		} else {
			c.send(c.obj("jsonrpc", `"2.0"`, "id", id, "method", `"tools/list"`, "params", `{}`))
		}
	case "pause":
		time.Sleep(time.Duration(10+r%140) * time.Millisecond)
	case "long-pause":
		time.Sleep(invIdle + time.Duration(50+r%300)*time.Millisecond)
	case "await":
		if miss := c.await(deadline); len(miss) > 0 {
			c.problem("requests never answered (or the broker closed its output): %s", strings.Join(miss, ", "))
			return false
		}
	}
	return true
}

func (c *invClient) echo() *invReq {
	id := c.newID()
	text := fmt.Sprintf("%s says %s #%d", c.name, id, c.rng.Uint32())
	if c.rng.IntN(4) == 0 {
		text += " \"quoted\" \\ é \u2028 ✓" // escapes for the splice
	}
	args, want := c.f.echo(text)
	req := &invReq{id: id, kind: "echo", want: want}
	c.expect(req)
	c.send(c.obj("jsonrpc", `"2.0"`, "id", id, "method", `"tools/call"`,
		"params", c.obj("name", `"echo"`, "arguments", args)))
	return req
}

func (c *invClient) slow() *invReq {
	id, token := c.newID(), c.newToken()
	tool, args, steps := c.f.slow(c.rng)
	req := &invReq{id: id, kind: "slow", token: token, steps: steps, want: c.f.slowDone(steps)}
	c.expect(req)
	c.send(c.obj("jsonrpc", `"2.0"`, "id", id, "method", `"tools/call"`,
		"params", c.obj("name", invQuote(tool), "arguments", args, "_meta", c.obj("progressToken", token))))
	return req
}

func invQuote(s string) string { return string(quote(s)) }

// inFlight picks one of the client's unanswered, uncancelled calls.
func (c *invClient) inFlight(r int) *invReq {
	c.mu.Lock()
	defer c.mu.Unlock()
	var open []*invReq
	for _, q := range c.order {
		if (q.kind == "echo" || q.kind == "slow") && !q.cancelled && len(q.answers) == 0 {
			open = append(open, q)
		}
	}
	if len(open) == 0 {
		return nil
	}
	return open[r%len(open)]
}

func (c *invClient) sent(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reqs[id] != nil
}

// decoy is an id this client never sent: another client's, one of its
// own in the other JSON type, or a small number (the broker's upstream
// ids are small numbers too).
func (c *invClient) decoy(r int) string {
	var cands []string
	if o := c.shared.other(c.name, r); o != "" {
		cands = append(cands, o)
	}
	if q := c.inFlight(r / 7); q != nil {
		if n, err := strconv.Unquote(q.id); err == nil {
			if _, err := strconv.Atoi(n); err == nil {
				cands = append(cands, n)
			}
		} else {
			cands = append(cands, strconv.Quote(q.id))
		}
	}
	cands = append(cands, strconv.Itoa(1+r%40), strconv.Quote(strconv.Itoa(1+r%40)))
	for i := range cands {
		if d := cands[(r/3+i)%len(cands)]; !c.sent(d) {
			return d
		}
	}
	return "-1"
}

func (c *invClient) cancelForeign(r int) {
	d := c.decoy(r)
	c.send(c.obj("jsonrpc", `"2.0"`, "method", `"notifications/cancelled"`, "params", c.obj("requestId", d, "reason", `"not mine"`)))
}

// junk sends a line that is no JSON-RPC message: each but a blank line
// is answered with an error under id null.
func (c *invClient) junk(r int) {
	lines := []string{
		fmt.Sprintf("garbage from %s #%d", c.name, r),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo"`, 1+r%9),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}}`, 1+r%9),
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`"a string"`,
		"   ",
	}
	line := lines[r%len(lines)]
	if strings.TrimSpace(line) != "" {
		c.garbage++
	}
	c.send(line)
}

// ambiguousMsg sends a message some decoder reads differently. A request
// with an exact id is refused with -32600 under that id (the last exact
// "id" when there are two, as refuse.go's Lookup finds it); one with only
// a case-variant "ID", and a notification, get nothing.
func (c *invClient) ambiguousMsg(r int) {
	c.ambiguous++
	d := c.decoy(r)
	echoArgs, _ := c.f.echo("INJECTED by " + c.name)
	call := c.obj("name", `"echo"`, "arguments", echoArgs)
	variant := r % 12
	if variant >= 9 { // notifications: nothing comes back, nothing happens
		own := d
		if q := c.inFlight(r / 5); q != nil {
			own = q.id // a cancellation of its own call that must not count
		}
		switch variant {
		case 9:
			c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + own + `,"RequestId":` + d + `}}`)
		case 10:
			c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + d + `,"requestId":` + own + `}}`)
		default:
			c.send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"reque\u017ftId\":" + own + "}}")
		}
		return
	}
	id := c.newID()
	if variant == 8 { // no exact id: nothing comes back, under any id
		c.shared.add(c.name, id)
		c.send(`{"jsonrpc":"2.0","ID":` + id + `,"method":"tools/call","params":` + call + `}`)
		return
	}
	c.expect(&invReq{id: id, kind: "refused"})
	var line string
	switch variant {
	case 0:
		line = `{"jsonrpc":"2.0","id":` + id + `,"ID":` + d + `,"method":"tools/call","params":` + call + `}`
	case 1:
		line = `{"jsonrpc":"2.0","id":` + d + `,"id":` + id + `,"method":"tools/call","params":` + call + `}`
	case 2:
		line = `{"\u0069d":` + d + `,"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + call + `}`
	case 3:
		line = `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","Method":"tools/call","params":` + call + `}`
	case 4:
		line = `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","method":"tools/call","params":` + call + `}`
	case 5:
		line = `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":` + echoArgs + `,"_meta":{"progressToken":` + d + `,"progressToken":1}}}`
	case 6:
		line = "{\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":" + echoArgs + ",\"_meta\":{\"progressTo\u212aen\":" + d + "}}}"
	default:
		line = `{"JSONRPC":"2.0","jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + call + `}`
	}
	c.send(line)
}

// disconnect closes the client's input with a call in flight (and
// sometimes a second one just sent).
func (c *invClient) disconnect() {
	id, token := c.newID(), c.newToken()
	tool, args := c.f.long()
	c.expect(&invReq{id: id, kind: "slow", token: token, steps: -1})
	c.send(c.obj("jsonrpc", `"2.0"`, "id", id, "method", `"tools/call"`,
		"params", c.obj("name", invQuote(tool), "arguments", args, "_meta", c.obj("progressToken", token))))
	if c.rng.IntN(2) == 0 {
		time.Sleep(time.Duration(c.rng.IntN(100)) * time.Millisecond)
		c.echo()
	}
	c.mu.Lock()
	c.gone = true
	c.mu.Unlock()
	c.counts["disconnect"]++
	c.logf("disconnects")
	c.w.Close()
}

// read records what the broker writes to the client.
func (c *invClient) read() {
	defer close(c.done)
	br := bufio.NewReaderSize(c.r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if line = bytes.TrimRight(line, "\r\n"); len(line) > 0 {
			c.receive(line)
			select {
			case c.note <- struct{}{}:
			default:
			}
		}
		if err != nil {
			return
		}
	}
}

func (c *invClient) receive(line []byte) {
	c.logf("<- %s", line)
	e, perr := jsonrpc.Parse(line)
	var m msg
	jerr := json.Unmarshal(line, &m)
	m.raw = string(line)
	c.mu.Lock()
	defer c.mu.Unlock()
	bad := func(format string, args ...any) {
		c.problems = append(c.problems, fmt.Sprintf(format, args...)+": "+m.raw)
		c.shared.failed.Store(true)
	}
	switch {
	case perr != nil || jerr != nil:
		bad("the broker wrote a message that does not parse (%v, %v)", perr, jerr)
	case e.Method == "notifications/progress":
		tok := string(span(line, e.NotifToken))
		q := c.tokens[tok]
		if q == nil {
			bad("progress for token %s, which it never sent", tok)
			return
		}
		var p struct{ Progress, Total float64 }
		json.Unmarshal(m.Params, &p)
		if q.steps >= 0 && (p.Total != float64(q.steps) || p.Progress < 1 || p.Progress > p.Total) {
			bad("progress for token %s (call %s of %d steps) out of its steps", tok, q.id, q.steps)
		}
		if len(q.answers) > 0 {
			bad("progress for token %s after its call %s was answered", tok, q.id)
		}
		q.progress = append(q.progress, int(p.Progress))
	case e.IsRequest():
		bad("the server's request %s reached it", e.Method)
	case e.Method != "":
		// list_changed and the server's other notifications concern everyone.
	case e.ID.Present():
		id := string(span(line, e.ID))
		if id == "null" {
			if m.Error == nil {
				bad("an answer with id null that is no error")
			}
			c.nulls = append(c.nulls, m)
			return
		}
		q := c.reqs[id]
		if q == nil {
			bad("an answer to id %s, which it never sent as a request", id)
			return
		}
		q.answers = append(q.answers, m)
	default:
		bad("a message neither request, notification nor answer")
	}
}

// missing lists the requests still owed an answer.
func (c *invClient) missing() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var miss []string
	for _, q := range c.order {
		if !q.cancelled && len(q.answers) == 0 {
			miss = append(miss, q.kind+" "+q.id)
		}
	}
	return miss
}

// await waits until every request the client sent (but cancelled) has
// been answered; what is still owed by the deadline, once its output
// closed or once any client saw a violation, is returned.
func (c *invClient) await(deadline time.Time) []string {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		miss := c.missing()
		if len(miss) == 0 {
			return nil
		}
		if c.shared.failed.Load() {
			return append(miss, "(given up: a violation was seen)")
		}
		select {
		case <-c.note:
		case <-tick.C:
		case <-c.done:
			return c.missing()
		case <-timer.C:
			return c.missing()
		}
	}
}

// check asserts what the client received, once its output has closed.
func (c *invClient) check(t *testing.T, fresh json.RawMessage) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.problems {
		t.Errorf("client %s: %s", c.name, p)
	}
	if c.gone {
		return // it left: only foreign answers (problems) count
	}
	if len(c.nulls) != c.garbage {
		t.Errorf("client %s: %d errors with id null for %d garbage lines", c.name, len(c.nulls), c.garbage)
	}
	for _, m := range c.nulls {
		if m.Error == nil || (m.Error.Code != -32700 && m.Error.Code != -32600) {
			t.Errorf("client %s: garbage line answered %s, want a parse or invalid-request error", c.name, m.raw)
		}
	}
	for _, q := range c.order {
		n := len(q.answers)
		switch {
		case q.cancelled && n > 1:
			t.Errorf("client %s: cancelled %s %s answered %d times", c.name, q.kind, q.id, n)
		case !q.cancelled && n != 1:
			t.Errorf("client %s: %s %s answered %d times, want once", c.name, q.kind, q.id, n)
		}
		for _, m := range q.answers {
			if q.kind == "refused" {
				if m.Error == nil || m.Error.Code != -32600 {
					t.Errorf("client %s: ambiguous request %s answered %s, want -32600", c.name, q.id, m.raw)
				}
				continue
			}
			if m.Error != nil {
				t.Errorf("client %s: %s %s answered with an error: %s", c.name, q.kind, q.id, m.raw)
				continue
			}
			switch q.kind {
			case "echo":
				if m.text() != q.want {
					t.Errorf("client %s: echo %s answered %q, want %q: %s", c.name, q.id, m.text(), q.want, m.raw)
				}
			case "slow":
				if !strings.Contains(m.text(), q.want) {
					t.Errorf("client %s: slow %s answered %q, want %q in it", c.name, q.id, m.text(), q.want)
				}
				if len(q.progress) != q.steps {
					t.Errorf("client %s: slow %s (token %s) got %d progress notifications for its %d steps", c.name, q.id, q.token, len(q.progress), q.steps)
				}
			case "list":
				if !invSameJSON(m.Result, fresh) {
					t.Errorf("client %s: tools/list %s answered %s, want the upstream's own %s", c.name, q.id, m.Result, fresh)
				}
			}
		}
	}
}

// invDump logs every client's transcript and the broker's events.
func invDump(t *testing.T, h *harness, clients []*invClient) {
	for _, c := range clients {
		c.mu.Lock()
		t.Logf("client %s transcript (%d lines):\n%s", c.name, len(c.log), strings.Join(c.log, "\n"))
		c.mu.Unlock()
	}
	h.mu.Lock()
	t.Logf("broker events:\n%s", strings.Join(h.events, "\n"))
	h.mu.Unlock()
}

func invSameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func invHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := range len(s) {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// invLoad starts n busy loops for the test's length.
func invLoad(t *testing.T, n int) {
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		t.Cleanup(func() {
			syscall.Kill(pid, syscall.SIGKILL)
			cmd.Wait()
		})
	}
}

// invUpstreamList runs the upstream itself, as the broker's first client
// would (initialize with params, notifications/initialized once it is
// answered, tools/list), and returns its tools/list result.
func invUpstreamList(t *testing.T, argv []string, initParams string) json.RawMessage {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	lines := make(chan []byte, 64)
	exited := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			select {
			case lines <- bytes.Clone(sc.Bytes()):
			case <-quit:
			}
		}
		close(lines)
		cmd.Wait() // after the last read, as exec asks
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			close(quit)
			stdin.Close()
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				syscall.Kill(pid, syscall.SIGKILL) // not reaped yet: still its pid
				<-exited
			}
		})
	}
	t.Cleanup(stop)
	answer := func(id string) json.RawMessage {
		t.Helper()
		timeout := time.After(wait)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("the upstream %v exited before answering %s", argv, id)
				}
				var m msg
				if json.Unmarshal(line, &m) != nil || string(m.ID) != id || m.Method != "" {
					continue
				}
				if m.Error != nil || m.Result == nil {
					t.Fatalf("the upstream answered %s with %s", id, line)
				}
				return m.Result
			case <-timeout:
				t.Fatalf("the upstream %v did not answer %s within %v", argv, id, wait)
			}
		}
	}
	fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":%s}`+"\n", initParams)
	answer("1")
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	list := answer("2")
	stop()
	return list
}
