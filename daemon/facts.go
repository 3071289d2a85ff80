package daemon

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/broker"
	"github.com/seed-86a41135/supervisor/proc"
	"github.com/seed-86a41135/supervisor/spawn"
	"github.com/seed-86a41135/supervisor/store"
)

// serverFacts is what brokers taught the daemon about one server key
// (design §11), kept in the registry's servers bucket with the
// fingerprint of the files it was learned from: an upgraded server is a
// stranger again until a broker has seen it.
type serverFacts struct {
	Name        string    `json:"name"`
	Fingerprint string    `json:"fingerprint"`
	Stateless   bool      `json:"stateless,omitempty"`
	Versions    []string  `json:"versions,omitempty"`
	Learned     time.Time `json:"learned"`
}

// factBook is the daemon's copy of the servers bucket.
type factBook struct {
	st  *store.Store
	log hclog.Logger

	mu    sync.Mutex
	byKey map[string]serverFacts
}

func newFactBook(st *store.Store, log hclog.Logger) (*factBook, error) {
	fb := &factBook{st: st, log: log, byKey: map[string]serverFacts{}}
	err := st.Servers(func(key string, data []byte) error {
		var f serverFacts
		if err := json.Unmarshal(data, &f); err != nil {
			// One bad entry costs only what was learned about that server.
			log.Warn("forgetting unreadable server facts", "key", key, "err", err)
			return nil
		}
		fb.byKey[key] = f
		return nil
	})
	return fb, err
}

// stateless reports whether key, running the files of fingerprint fp, is
// known to speak the stateless revision.
func (fb *factBook) stateless(key, fp string) bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	f, ok := fb.byKey[key]
	return ok && f.Stateless && f.Fingerprint == fp
}

// learn records a broker's figures for key; false if there was nothing new.
func (fb *factBook) learn(key, name, fp string, st broker.Stats) bool {
	if fp == "" || !st.Stateless {
		return false
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if f, ok := fb.byKey[key]; ok && f.Stateless && f.Fingerprint == fp {
		return false
	}
	f := serverFacts{Name: name, Fingerprint: fp, Stateless: true, Versions: st.Versions, Learned: time.Now().UTC()}
	fb.byKey[key] = f
	if err := fb.st.PutServer(key, f); err != nil {
		fb.log.Warn("store server facts", "name", name, "err", err)
	}
	return true
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
	key, fp, err := d.serverIdentity(req)
	if err != nil {
		return false
	}
	if d.facts.stateless(key, fp) {
		return true
	}
	d.mu.Lock()
	br := d.brokers[key]
	d.mu.Unlock()
	if br == nil || !isDone(br.ready) || br.err != nil || br.l == nil || isDone(br.l.done) {
		return false
	}
	st, err := askStats(br.socket)
	if err != nil {
		return false
	}
	d.learnFrom(br, st)
	return st.Stateless && br.fp == fp
}

// learnFrom keeps what a broker's figures teach about its key.
func (d *Daemon) learnFrom(br *brokerRef, st broker.Stats) {
	if d.facts.learn(br.key, br.name, br.fp, st) {
		d.reg.Event("shared.stateless", brokerSession(br.key), br.id,
			br.name+" speaks the stateless MCP revision ("+strings.Join(st.Versions, ", ")+"): its later runs are shared automatically; share = false in [servers."+br.name+"] opts out")
	}
}
