package daemon

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/broker"
	"github.com/seed-86a41135/supervisor/internal/daemon/sharing"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/settings"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/spawn"
	"github.com/seed-86a41135/supervisor/store"
)

// serverFacts is what brokers taught the daemon about one server key
// (design §11), kept in the registry's servers bucket with the
// fingerprint of the files it was learned from: an upgraded server is a
// stranger again until a broker has seen it.
type serverFacts struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
	Stateless   bool   `json:"stateless,omitempty"`
	// Unsafe: the server sent server-to-client requests; never shared
	// automatically.
	Unsafe   bool      `json:"unsafe,omitempty"`
	Versions []string  `json:"versions,omitempty"`
	Learned  time.Time `json:"learned"`
	// Cache is the lazy-start cache (run --lazy), nil until a lazy broker
	// filled one.
	Cache *broker.Cache `json:"cache,omitempty"`
}

// factBook is the daemon's copy of the servers bucket.
type factBook struct {
	st  *store.Store
	log hclog.Logger

	mu    sync.Mutex
	byKey map[string]serverFacts
}

// factsKeep is how long what was learned about a server key is kept
// without being learned again (every lazy session refreshes its cache):
// keys of servers no longer run (a project's directory, an old
// environment) must not pile up in the registry.
const factsKeep = 30 * 24 * time.Hour

func newFactBook(st *store.Store, log hclog.Logger) (*factBook, error) {
	fb := &factBook{st: st, log: log, byKey: map[string]serverFacts{}}
	var stale []string
	err := st.Servers(func(key string, data []byte) error {
		var f serverFacts
		if err := json.Unmarshal(data, &f); err != nil {
			// One bad entry costs only what was learned about that server.
			log.Warn("forgetting unreadable server facts", "key", key, "err", err)
			stale = append(stale, key)
			return nil
		}
		if time.Since(f.Learned) > factsKeep {
			stale = append(stale, key)
			return nil
		}
		fb.byKey[key] = f
		return nil
	})
	for _, key := range stale {
		if err := st.DeleteServer(key); err != nil {
			log.Warn("forget server facts", "key", key, "err", err)
		}
	}
	return fb, err
}

// stateless reports whether key, running the files of fingerprint fp, is
// known to speak the stateless revision.
func (fb *factBook) stateless(key, fp string) bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	f, ok := fb.byKey[key]
	return ok && f.Stateless && !f.Unsafe && f.Fingerprint == fp
}

// anyStateless reports whether some key is known to speak the stateless
// revision: until one is, a run need not work out its key.
func (fb *factBook) anyStateless() bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	for _, f := range fb.byKey {
		if f.Stateless && !f.Unsafe {
			return true
		}
	}
	return false
}

// cache returns the lazy-start cache of key for fingerprint fp: nil if
// none, or if it was filled by other files (an upgrade starts eagerly).
func (fb *factBook) cache(key, fp string) *broker.Cache {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	f, ok := fb.byKey[key]
	if !ok || f.Fingerprint != fp || !f.Cache.Warm() {
		return nil
	}
	return f.Cache
}

// update changes key's facts (those of another fingerprint are dropped)
// and stores them; change reports whether it changed anything.
func (fb *factBook) update(key, name, fp string, change func(*serverFacts) bool) bool {
	if key == "" || fp == "" {
		return false
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	f, ok := fb.byKey[key]
	if !ok || f.Fingerprint != fp {
		f = serverFacts{Name: name, Fingerprint: fp}
	}
	if !change(&f) {
		return false
	}
	f.Learned = time.Now().UTC()
	fb.byKey[key] = f
	if err := fb.st.PutServer(key, f); err != nil {
		fb.log.Warn("store server facts", "name", name, "err", err)
	}
	return true
}

// learn records what st says of key: it speaks the stateless revision
// (true is returned when that is news), it does not (any more), or it
// sent server-to-client requests, which rules automatic sharing out.
func (fb *factBook) learn(key, name, fp string, st broker.Stats) bool {
	news := false
	fb.update(key, name, fp, func(f *serverFacts) bool {
		changed := false
		switch {
		case st.Stateless && !f.Stateless:
			f.Stateless, f.Versions, news, changed = true, st.Versions, true, true
		case st.Legacy && f.Stateless:
			f.Stateless, f.Versions, changed = false, nil, true
		}
		if st.Unsafe && !f.Unsafe {
			f.Unsafe, changed = true, true
		}
		return changed
	})
	return news && !st.Unsafe
}

// learnCache keeps a lazy broker's cache for key.
func (fb *factBook) learnCache(key, name, fp string, c *broker.Cache) {
	if !c.Warm() {
		return
	}
	fb.update(key, name, fp, func(f *serverFacts) bool {
		f.Cache = c
		return true
	})
}

// serverIdentity is a run request's server key and fingerprint, or an
// error where its command cannot be resolved (the run then fails as it
// would have anyway).
func (d *Daemon) serverIdentity(req api.RunRequest) (key, fp string, err error) {
	cwd := string(req.Cwd)
	pathEnv, ok := proc.EnvValue(req.Env, "PATH")
	if !ok {
		pathEnv = "/usr/local/bin:/usr/bin:/bin"
	}
	resolved, err := spawn.Resolve(req.Argv[0], pathEnv, cwd)
	if err != nil {
		return "", "", err
	}
	return broker.Key(resolved, req.Argv, cwd, req.Env, d.settings().VolatileEnv), broker.Fingerprint(resolved, req.Argv, cwd), nil
}

// autoShare reports whether a run that asked for neither sharing nor not
// sharing is shared: its server speaks the stateless revision (design
// §11), as the registry remembers for its key and fingerprint, or as the
// live broker of its key has seen.
func (d *Daemon) autoShare(req api.RunRequest, name string) bool {
	if req.Share || req.NoShare || d.settings().Servers[name].NoShare || len(req.Argv) == 0 {
		return false
	}
	// Limits bound one server's tree: a server with any (its own or the
	// config's for all) is never shared on its own.
	if settings.EffectiveLimits(req.Limits, d.settings().Limits) != nil {
		return false
	}
	// The spawn path's common case: nothing learned, no broker to ask.
	d.mu.Lock()
	brokers := len(d.brokers)
	d.mu.Unlock()
	if brokers == 0 && !d.facts.anyStateless() {
		return false
	}
	key, fp, err := d.serverIdentity(req)
	if err != nil {
		return false
	}
	d.mu.Lock()
	br := d.brokers[key]
	d.mu.Unlock()
	live := br != nil && isDone(br.ready) && br.err == nil && br.l != nil && !isDone(br.l.done)
	if live && br.fp != fp {
		return false // it runs other files (an upgrade since): no joining it unasked
	}
	if d.facts.stateless(key, fp) {
		return true
	}
	if !live {
		return false
	}
	st, err := sharing.AskStats(br.socket)
	if err != nil {
		return false
	}
	d.learnFrom(br, st)
	return st.Stateless && !st.Unsafe
}

// learnFrom keeps what a broker's figures teach about its server key
// (the stateless revision, the lazy cache) and turns what changed since
// it was last asked into events and metrics.
func (d *Daemon) learnFrom(br *brokerRef, st broker.Stats) {
	br.mu.Lock()
	seen := br.seen
	br.seen = st
	br.mu.Unlock()
	sess := sharing.BrokerSession(br.key)
	if d.facts.learn(br.serverKey, br.name, br.fp, st) {
		d.event("shared.stateless", sess, br.id,
			br.name+" speaks the stateless MCP revision ("+strings.Join(st.Versions, ", ")+"): its later runs are shared automatically; share = false in [servers."+br.name+"] opts out")
	}
	grew := func(now, then uint64) uint64 {
		if now < then {
			return 0
		}
		return now - then
	}
	if n := grew(st.Refused, seen.Refused); n > 0 {
		d.metrics.Refused(n)
		d.event("shared.refused", sess, br.id, fmt.Sprintf("%s: %d ambiguous messages refused (a JSON-RPC key written twice, in another case or escaped); nothing of them reached the server or another client", br.name, n))
	}
	if !st.Lazy && st.Restarts == seen.Restarts && st.IdleStops == 0 {
		return
	}
	starts, stops := grew(st.LazyStarts, seen.LazyStarts), grew(st.IdleStops, seen.IdleStops)
	d.metrics.LazyEvents(starts, stops, grew(st.CacheHits, seen.CacheHits), grew(st.CacheMisses, seen.CacheMisses))
	if starts > 0 {
		d.event("lazy.start", sess, br.id, fmt.Sprintf("%s: started on a request the cache could not answer (pid %d)", br.name, st.UpstreamPID))
	}
	if stops > 0 {
		d.event("idle.stop", sess, br.id, fmt.Sprintf("%s: stopped after %v with nothing in flight; the next request starts it again", br.name, br.idle))
	}
	if st.CacheGen != seen.CacheGen && st.CacheGen > 0 && br.serverKey != "" {
		if cr, err := sharing.AskCache(br.socket); err == nil {
			d.facts.learnCache(br.serverKey, br.name, br.fp, cr.Cache)
		}
	}
	health := "healthy"
	switch {
	case st.UpstreamPID == 0 && st.LazyStarts == 0 && st.Lazy:
		health = "cached" // answering from the cache; the server never started
	case st.UpstreamPID == 0 && st.IdleStops > 0:
		health = "idle" // stopped for idleness; the next request starts it
	}
	d.update(br.id, "broker health", func(p *registry.Process) error {
		if p.Health == health || p.Health == "starting" {
			return errUnchanged
		}
		p.Health = health
		return nil
	})
}
