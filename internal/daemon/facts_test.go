package daemon

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/internal/broker"
	"github.com/seed-86a41135/supervisor/store"
)

// The facts a daemon loads: fresh ones kept, stale and unreadable ones
// forgotten (in the file too); a cache is served only for its own
// fingerprint.
func TestFactBook(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	st, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cache := &broker.Cache{Init: json.RawMessage(`{"protocolVersion":"2025-11-25"}`)}
	put := func(key string, v any) {
		if err := st.PutServer(key, v); err != nil {
			t.Fatal(err)
		}
	}
	put("fresh", serverFacts{Name: "a", Fingerprint: "fp1", Stateless: true, Cache: cache, Learned: time.Now().Add(-time.Hour)})
	put("stale", serverFacts{Name: "b", Fingerprint: "fp1", Stateless: true, Learned: time.Now().Add(-factsKeep - time.Hour)})
	put("bad", json.RawMessage(`"not facts"`))

	fb, err := newFactBook(st, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if !fb.stateless("fresh", "fp1") || fb.stateless("fresh", "fp2") || fb.stateless("stale", "fp1") {
		t.Error("stateless: want the fresh key for its own fingerprint only")
	}
	if fb.cache("fresh", "fp1") == nil || fb.cache("fresh", "other") != nil {
		t.Error("cache: want it for its own fingerprint only")
	}
	var left []string
	st.Servers(func(key string, _ []byte) error { left = append(left, key); return nil })
	if len(left) != 1 || left[0] != "fresh" {
		t.Errorf("the file keeps %v, want [fresh]", left)
	}
	// Learning under a new fingerprint replaces what the old files taught.
	fb.learnCache("fresh", "a", "fp2", &broker.Cache{Discover: json.RawMessage(`{}`)})
	if fb.stateless("fresh", "fp2") || fb.cache("fresh", "fp2") == nil || fb.cache("fresh", "fp1") != nil {
		t.Error("an upgrade kept facts of the old fingerprint")
	}

	// A later broker of the same files: a legacy answer unlearns the
	// revision; a server request rules automatic sharing out for good.
	if !fb.learn("k", "c", "fp", broker.Stats{Stateless: true}) || !fb.stateless("k", "fp") {
		t.Fatal("learning the stateless revision")
	}
	fb.learn("k", "c", "fp", broker.Stats{Legacy: true})
	if fb.stateless("k", "fp") {
		t.Error("a legacy answer left the key stateless")
	}
	fb.learn("k", "c", "fp", broker.Stats{Stateless: true, Unsafe: true})
	if fb.stateless("k", "fp") {
		t.Error("a server that sent server-to-client requests is shared automatically")
	}
}
