package daemon

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/spawn"
	"github.com/seed-86a41135/supervisor/store"
)

// breakers holds every server key's circuit breaker, persisted in the
// store's breakers bucket so a restart does not forget a crash loop.
type breakers struct {
	cfg spawn.BreakerConfig
	st  *store.Store
	log hclog.Logger
	now func() time.Time

	mu sync.Mutex
	m  map[string]*spawn.Breaker
}

func newBreakers(st *store.Store, cfg spawn.BreakerConfig, log hclog.Logger) (*breakers, error) {
	b := &breakers{cfg: cfg.WithDefaults(), st: st, log: log, now: time.Now, m: map[string]*spawn.Breaker{}}
	err := st.Breakers(func(key string, data []byte) error {
		var br spawn.Breaker
		if err := json.Unmarshal(data, &br); err != nil {
			return err
		}
		b.m[key] = &br
		return nil
	})
	return b, err
}

// allow returns the key of argv/cwd and nil when a start may go ahead, or
// an *spawn.OpenError naming why not.
func (b *breakers) allow(argv []string, cwd, name string) (string, error) {
	key := spawn.BreakerKey(argv, cwd)
	b.mu.Lock()
	defer b.mu.Unlock()
	br, ok := b.m[key]
	if !ok {
		return key, nil // never failed: nothing to remember yet
	}
	before := *br
	err := br.Allow(b.now())
	if br.State != before.State || br.Trial != before.Trial {
		b.persist(br)
	}
	if br.State != before.State {
		b.event(br, "one trial start let through after the cooldown")
	}
	return key, err
}

// result records how a start ended: reason "" is a success.
func (b *breakers) result(key string, argv []string, cwd, name, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	br, ok := b.m[key]
	if reason == "" {
		if ok && (br.State != spawn.BreakerClosed || br.Failures > 0) {
			was := br.State
			br.Success()
			b.persist(br)
			if was != br.State {
				b.event(br, "a start succeeded")
			}
		}
		return
	}
	if !ok {
		br = &spawn.Breaker{BreakerState: registry.BreakerState{Key: key, State: spawn.BreakerClosed}}
		b.m[key] = br
	}
	br.Name, br.Argv, br.Cwd = name, argv, cwd
	br.Failure(reason, b.now(), b.cfg)
	b.persist(br)
	if br.State == spawn.BreakerOpen {
		// Every failure that leaves it open (re-)armed its cooldown,
		// after a failed half-open trial too.
		b.event(br, fmt.Sprintf("%d failures in a row, last: %s; retrying after %s",
			br.Failures, reason, br.RetryAt.UTC().Format(time.RFC3339)))
		b.log.Warn("circuit breaker open", "name", name, "key", key, "failures", br.Failures,
			"last", reason, "retry_at", br.RetryAt)
	}
}

// release gives back a trial whose start was aborted or stopped early.
func (b *breakers) release(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if br, ok := b.m[key]; ok && br.Trial {
		br.Release()
		b.persist(br)
	}
}

func (b *breakers) persist(br *spawn.Breaker) {
	if err := b.st.PutBreaker(br.Key, br); err != nil {
		b.log.Error("persist breaker", "key", br.Key, "err", err)
	}
}

// event logs br's new state in the lifecycle log as breaker.<state>. The
// breakers write to the store directly: they are set up apart from the
// registry, and a breaker is no session's or process's.
func (b *breakers) event(br *spawn.Breaker, detail string) {
	ev := registry.Event{Time: b.now().UTC(), Kind: "breaker." + br.State,
		Detail: fmt.Sprintf("%s (key %s): %s", br.Name, br.Key, detail)}
	if err := b.st.AppendEvent(ev); err != nil {
		b.log.Error("log breaker event", "key", br.Key, "err", err)
	}
}

func (b *breakers) list() []registry.BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]registry.BreakerState, 0, len(b.m))
	for _, br := range b.m {
		out = append(out, br.BreakerState)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name+out[i].Key < out[j].Name+out[j].Key })
	return out
}

// reset closes the breakers whose key or name is keyOrName.
func (b *breakers) reset(keyOrName string) ([]registry.BreakerState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []registry.BreakerState
	for _, br := range b.m {
		if br.Key == keyOrName || br.Name == keyOrName {
			was := br.State
			br.Reset()
			b.persist(br)
			if was != br.State {
				b.event(br, "reset by hand")
			}
			out = append(out, br.BreakerState)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no breaker has key or name %q (see `supervisor breaker list`): %w", keyOrName, registry.ErrNotFound)
	}
	return out, nil
}
