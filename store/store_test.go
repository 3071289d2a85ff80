package store

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/seed-86a41135/supervisor/registry"
)

func openT(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	opts.NoSync = true
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%s) error = %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func intp(i int) *int { return &i }

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "registry.db")
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	t1 := t0.Add(time.Minute)
	sessions := []registry.Session{
		{ID: "s1", Label: "claude-1", HostPID: 100, HostToken: registry.Token{BootID: "b", StartTicks: 42}, HostCommand: "claude", State: registry.SessionActive, StartedAt: t0},
		{ID: "s2", HostPID: 200, State: registry.SessionEnded, StartedAt: t0, EndedAt: &t1, EndReason: "host exited"},
	}
	procs := []registry.Process{
		{ID: "p1", Session: "s1", Name: "web", Argv: []string{"npm", "run", "dev"}, Path: "/usr/bin/npm", Cwd: "/src", PID: 300, PGID: 300,
			Token: registry.Token{BootID: "b", StartTicks: 7}, ShimPID: 299, ShimToken: registry.Token{BootID: "b", StartTicks: 6},
			State: registry.StateRunning, StartedAt: t0, Port: 3000, Shared: true, Health: "ok", Restarts: 2,
			Stdio: []registry.StdioInode{{Fd: 1, Kind: "pipe", Inode: 123}, {Fd: 2, Kind: "socket", Inode: 456}}},
		{ID: "p2", Session: "s1", Name: "job", Argv: []string{"true"}, State: registry.StateExited, StartedAt: t0, ExitedAt: &t1, ExitCode: intp(0), Health: "none"},
		{ID: "p3", Session: "s2", Name: "bad", Argv: []string{"false"}, State: registry.StateFailed, StartedAt: t0, ExitedAt: &t1, ExitCode: intp(1), Signal: "SIGTERM", Error: "boom"},
	}

	s := openT(t, path, Options{})
	for _, sess := range sessions {
		if err := s.PutSession(sess); err != nil {
			t.Fatalf("PutSession(%s) error = %v", sess.ID, err)
		}
	}
	for _, p := range procs {
		if err := s.PutProcess(p); err != nil {
			t.Fatalf("PutProcess(%s) error = %v", p.ID, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() error = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close() error = %v, want nil", err)
	}

	s = openT(t, path, Options{})
	if got := s.Path(); got != path {
		t.Errorf("Path() = %q, want %q", got, path)
	}
	if size, err := s.Size(); err != nil || size <= 0 {
		t.Errorf("Size() = %d, %v, want > 0, nil", size, err)
	}
	gotS, gotP, err := s.Load()
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	sort.Slice(gotS, func(i, j int) bool { return gotS[i].ID < gotS[j].ID })
	sort.Slice(gotP, func(i, j int) bool { return gotP[i].ID < gotP[j].ID })
	if !reflect.DeepEqual(gotS, sessions) {
		t.Errorf("Load() sessions =\n%+v\nwant\n%+v", gotS, sessions)
	}
	if !reflect.DeepEqual(gotP, procs) {
		t.Errorf("Load() processes =\n%+v\nwant\n%+v", gotP, procs)
	}

	if err := s.DeleteProcess("p2"); err != nil {
		t.Fatalf("DeleteProcess error = %v", err)
	}
	if err := s.DeleteSession("s2"); err != nil {
		t.Fatalf("DeleteSession error = %v", err)
	}
	gotS, gotP, err = s.Load()
	if err != nil {
		t.Fatalf("Load() after delete error = %v", err)
	}
	if len(gotS) != 1 || len(gotP) != 2 {
		t.Errorf("after delete got %d sessions, %d processes, want 1, 2", len(gotS), len(gotP))
	}
}

func TestFileMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "registry.db")
	openT(t, path, Options{})
	for _, tc := range []struct {
		path string
		want os.FileMode
	}{{path, 0o600}, {dir, 0o700}} {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != tc.want {
			t.Errorf("mode of %s = %o, want %o", tc.path, got, tc.want)
		}
	}
}

func TestConcurrentPuts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	s, err := Open(path, Options{}) // with fsync: the real batching path
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.PutProcess(registry.Process{ID: fmt.Sprintf("p%03d", i), Name: "x", Argv: []string{"sleep", "1"}})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("PutProcess error = %v", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, path, Options{})
	_, procs, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(procs); got != n {
		t.Fatalf("Load() returned %d processes, want %d", got, n)
	}
	seen := map[string]bool{}
	for _, p := range procs {
		seen[p.ID] = true
	}
	for i := range n {
		if id := fmt.Sprintf("p%03d", i); !seen[id] {
			t.Errorf("process %s missing after reopen", id)
		}
	}
}

func TestEventsCapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	s := openT(t, path, Options{MaxEvents: 10})
	for i := range 25 {
		if err := s.AppendEvent(registry.Event{Kind: "k", Detail: fmt.Sprint(i)}); err != nil {
			t.Fatalf("AppendEvent(%d) error = %v", i, err)
		}
	}
	for _, tc := range []struct {
		n         int
		wantFirst int
		wantLen   int
	}{{0, 15, 10}, {-1, 15, 10}, {3, 22, 3}, {10, 15, 10}, {50, 15, 10}} {
		evs, err := s.Events(tc.n)
		if err != nil {
			t.Fatalf("Events(%d) error = %v", tc.n, err)
		}
		if len(evs) != tc.wantLen {
			t.Fatalf("Events(%d) len = %d, want %d", tc.n, len(evs), tc.wantLen)
		}
		for i, ev := range evs {
			if want := fmt.Sprint(tc.wantFirst + i); ev.Detail != want {
				t.Errorf("Events(%d)[%d].Detail = %q, want %q", tc.n, i, ev.Detail, want)
			}
		}
	}
	// The cap holds across reopen with a smaller limit too.
	s.Close()
	s = openT(t, path, Options{MaxEvents: 4})
	if err := s.AppendEvent(registry.Event{Kind: "k", Detail: "25"}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Detail)
	}
	if want := []string{"22", "23", "24", "25"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Events(0) after reopen = %v, want %v", got, want)
	}
}

func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	openT(t, path, Options{})
	s2, err := Open(path, Options{Timeout: 100 * time.Millisecond})
	if err == nil {
		s2.Close()
		t.Fatal("second Open succeeded, want ErrLocked")
	}
	if !errors.Is(err, ErrLocked) {
		t.Errorf("second Open error = %v, want errors.Is ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("second Open error = %q, want it to name %s", err, path)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	s := openT(t, path, Options{})
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("99"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	_, err = Open(path, Options{})
	if err == nil {
		t.Fatal("Open of schema 99 succeeded, want error")
	}
	if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "99") || !strings.Contains(err.Error(), "upgrade supervisor") {
		t.Errorf("Open error = %q, want ErrSchema naming 99 and saying upgrade supervisor", err)
	}
}

func TestUndecodableRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	s := openT(t, path, Options{})
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketProcesses).Put([]byte("px"), []byte("{not json"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s = openT(t, path, Options{})
	_, _, err = s.Load()
	if err == nil || !strings.Contains(err.Error(), "processes/px") || !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load() error = %v, want one naming processes/px and wrapping ErrCorrupt", err)
	}
}

func TestCorruptFile(t *testing.T) {
	for _, size := range []int{10, 4096, 64 << 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "registry.db")
			junk := make([]byte, size)
			rand.Read(junk)
			if err := os.WriteFile(path, junk, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, Options{Timeout: 100 * time.Millisecond})
			if err == nil {
				s.Close()
				t.Fatal("Open of garbage succeeded, want error")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("Open error = %v, want one wrapping ErrCorrupt", err)
			}
		})
	}
}

func TestEventsAfter(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "registry.db"), Options{MaxEvents: 8})
	// Ten events, sessions a, b, a, b, ...; the cap leaves seqs 3..10.
	for i := 1; i <= 10; i++ {
		sess := "a"
		if i%2 == 0 {
			sess = "b"
		}
		if err := s.AppendEvent(registry.Event{Seq: 999, Kind: "k", Session: sess, Detail: fmt.Sprint(i)}); err != nil {
			t.Fatalf("AppendEvent(%d) error = %v", i, err)
		}
	}
	tests := []struct {
		name    string
		after   uint64
		session string
		limit   int
		want    []uint64
	}{
		{"all", 0, "", 0, []uint64{3, 4, 5, 6, 7, 8, 9, 10}},
		{"newest three", 0, "", 3, []uint64{8, 9, 10}},
		{"after 6", 6, "", 0, []uint64{7, 8, 9, 10}},
		{"after 6, newest two", 6, "", 2, []uint64{9, 10}},
		{"session a", 0, "a", 0, []uint64{3, 5, 7, 9}},
		{"session b, newest two", 0, "b", 2, []uint64{8, 10}},
		{"session a after 5", 5, "a", 0, []uint64{7, 9}},
		{"after the newest", 10, "", 0, nil},
		{"after more than the newest", 50, "", 0, nil},
		{"unknown session", 0, "zzz", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, last, err := s.EventsAfter(tt.after, tt.session, tt.limit)
			if err != nil {
				t.Fatalf("EventsAfter(%d, %q, %d) error = %v", tt.after, tt.session, tt.limit, err)
			}
			var got []uint64
			for _, ev := range evs {
				got = append(got, ev.Seq)
				if want := fmt.Sprint(ev.Seq); ev.Detail != want {
					t.Errorf("event seq %d has detail %q, want %q", ev.Seq, ev.Detail, want)
				}
				if tt.session != "" && ev.Session != tt.session {
					t.Errorf("event seq %d of session %q, want only %q", ev.Seq, ev.Session, tt.session)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("EventsAfter(%d, %q, %d) seqs = %v, want %v", tt.after, tt.session, tt.limit, got, tt.want)
			}
			if last != 10 {
				t.Errorf("EventsAfter(%d, %q, %d) last = %d, want 10", tt.after, tt.session, tt.limit, last)
			}
		})
	}

	// An empty log hands out nothing and says so.
	empty := openT(t, filepath.Join(t.TempDir(), "registry.db"), Options{})
	if evs, last, err := empty.EventsAfter(0, "", 0); len(evs) != 0 || last != 0 || err != nil {
		t.Errorf("EventsAfter on an empty log = %v, %d, %v, want none, 0, nil", evs, last, err)
	}
}

func TestDeleteMany(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "registry.db"), Options{})
	for _, id := range []string{"s1", "s2", "s3"} {
		if err := s.PutSession(registry.Session{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"p1", "p2", "p3"} {
		if err := s.PutProcess(registry.Process{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteMany([]string{"s1", "s3", "missing"}, []string{"p2", "missing"}); err != nil {
		t.Fatalf("DeleteMany error = %v", err)
	}
	if err := s.DeleteMany(nil, nil); err != nil {
		t.Fatalf("DeleteMany(nil, nil) error = %v", err)
	}
	sessions, procs, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	var gotS, gotP []string
	for _, x := range sessions {
		gotS = append(gotS, x.ID)
	}
	for _, x := range procs {
		gotP = append(gotP, x.ID)
	}
	if want := []string{"s2"}; !reflect.DeepEqual(gotS, want) {
		t.Errorf("sessions after DeleteMany = %v, want %v", gotS, want)
	}
	if want := []string{"p1", "p3"}; !reflect.DeepEqual(gotP, want) {
		t.Errorf("processes after DeleteMany = %v, want %v", gotP, want)
	}
}

// TestCompactionBoundsFile churns sessions and processes through the
// registry and compacts them away every round. bbolt never shrinks its file,
// but it reuses freed pages: the size must level off after the first rounds
// instead of growing with every round.
func TestCompactionBoundsFile(t *testing.T) {
	const (
		rounds          = 20
		sessionsPerRnd  = 50
		procsPerSession = 9 // 50 + 450 = 500 records a round
	)
	path := filepath.Join(t.TempDir(), "registry.db")
	// A small event cap: the log is bounded by its own cap, tested above;
	// here it would only add its growth up to the default cap.
	s := openT(t, path, Options{MaxEvents: 100})
	var clock struct {
		sync.Mutex
		t time.Time
	}
	clock.t = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return clock.t
	}
	reg := registry.New(s, now, nil, nil)
	argv := []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", strings.Repeat("/some/project/dir", 4)}

	// The file grows in power-of-two steps of bbolt's mmap; the pages in
	// use (the high-water mark a transaction sees) show growth finer.
	sizes := make([]int64, rounds+1)
	marks := make([]int64, rounds+1)
	for round := 1; round <= rounds; round++ {
		var wg sync.WaitGroup
		errs := make(chan error, sessionsPerRnd)
		// Concurrently, as the daemon commits: Batch coalesces the commits.
		for i := range sessionsPerRnd {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sid := fmt.Sprintf("r%02d-s%02d", round, i)
				if _, _, err := reg.OpenSession(registry.Session{ID: sid, HostPID: 1000 + i, HostCommand: "claude"}); err != nil {
					errs <- err
					return
				}
				for j := range procsPerSession {
					pid := fmt.Sprintf("%s-p%d", sid, j)
					if _, err := reg.AddProcess(registry.Process{ID: pid, Session: sid, Name: "fs", Argv: argv, Cwd: "/src"}); err != nil {
						errs <- err
						return
					}
					if _, err := reg.Transition(pid, registry.StateExited, func(p *registry.Process) {
						t := now()
						p.ExitedAt = &t
					}); err != nil {
						errs <- err
						return
					}
				}
				if _, err := reg.SetSessionState(sid, registry.SessionEnded, "host exited"); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		clock.Lock()
		clock.t = clock.t.Add(time.Hour)
		clock.Unlock()
		ns, np, err := reg.Compact(now())
		if err != nil {
			t.Fatalf("round %d: Compact: %v", round, err)
		}
		if ns != sessionsPerRnd || np != sessionsPerRnd*procsPerSession {
			t.Fatalf("round %d: Compact deleted %d sessions, %d processes; want %d, %d",
				round, ns, np, sessionsPerRnd, sessionsPerRnd*procsPerSession)
		}
		if sizes[round], err = s.Size(); err != nil {
			t.Fatal(err)
		}
		s.db.View(func(tx *bolt.Tx) error { marks[round] = tx.Size(); return nil })
	}
	t.Logf("file size by round: %v", sizes[1:])
	t.Logf("pages in use (bytes) by round: %v", marks[1:])
	sessions, procs, err := s.Load()
	if err != nil || len(sessions) != 0 || len(procs) != 0 {
		t.Fatalf("Load after the last compaction = %d sessions, %d processes, %v; want none", len(sessions), len(procs), err)
	}
	// Linear growth would make round 20 four times round 5; page reuse
	// keeps it within a little slack of it (a freelist page, a split).
	for _, m := range []struct {
		what  string
		by    []int64
		slack int64
	}{{"file size", sizes, sizes[5] / 4}, {"pages in use", marks, marks[5] / 4}} {
		if limit := m.by[5] + m.slack; m.by[rounds] > limit {
			t.Errorf("%s %d after round %d, %d after round 5: grows with churn (limit %d)",
				m.what, m.by[rounds], rounds, m.by[5], limit)
		}
	}
}

// TestCorruptionIsAnError: the damaged files of issue 13, on which bbolt
// panicked inside Open or Load (invalid freelist page, index out of range,
// unexpected page type), are errors wrapping ErrCorrupt, never a panic.
func TestCorruptionIsAnError(t *testing.T) {
	base := filepath.Join(t.TempDir(), "registry.db")
	s := openT(t, base, Options{})
	for i := range 20 {
		sess := fmt.Sprintf("host-%d-%d", 1000+i, 5000+i)
		if err := s.PutSession(registry.Session{ID: sess, HostPID: 1000 + i, HostCommand: "claude", State: registry.SessionActive}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutProcess(registry.Process{ID: fmt.Sprintf("p%02d", i), Session: sess, Name: "server",
			Argv: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/src"}, PID: 2000 + i, State: registry.StateRunning}); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvent(registry.Event{Kind: "process.start", Session: sess, Detail: strings.Repeat("x", 100)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	clean, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(clean) <= 20000 {
		t.Fatalf("the registry is %d bytes, too small for the recipes", len(clean))
	}
	for _, tc := range []struct {
		name  string
		apply func([]byte) []byte
	}{
		{"zero page at 8 KiB", func(b []byte) []byte { clear(b[8192 : 8192+4096]); return b }},
		{"truncated to 20000 bytes", func(b []byte) []byte { return b[:20000] }},
		{"random after 16 KiB", func(b []byte) []byte { mrand.New(mrand.NewSource(13)).Read(b[16384:]); return b }},
		{"every 97th byte flipped", func(b []byte) []byte {
			for i := 0; i < len(b); i += 97 {
				b[i] ^= 0xff
			}
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "registry.db")
			if err := os.WriteFile(path, tc.apply(append([]byte(nil), clean...)), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, Options{Timeout: time.Second, NoSync: true})
			if err == nil {
				// Open may find nothing wrong only if Load then does.
				_, _, err = s.Load()
				s.Close()
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open and Load error = %v, want one wrapping ErrCorrupt", err)
			}
			t.Log(err)
			// A panic inside bolt.Open must not leave the file locked: a
			// second open fails the same way, not on the lock.
			if _, err := Open(path, Options{Timeout: 100 * time.Millisecond, NoSync: true}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("second Open error = %v, want one wrapping ErrCorrupt", err)
			}
		})
	}
}

// TestCheckFindsWhatReadsMiss: a file every read succeeds on but whose
// freelist lost a page (the page is neither in use nor free, so a later
// commit could never reuse it, or worse) fails Open's consistency check.
func TestCheckFindsWhatReadsMiss(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	s := openT(t, path, Options{})
	var ids []string
	for i := range 200 {
		p := registry.Process{ID: fmt.Sprintf("p%03d", i), Argv: []string{strings.Repeat("a", 200)}}
		if err := s.PutProcess(p); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	if err := s.DeleteMany(nil, ids); err != nil { // frees their pages
		t.Fatal(err)
	}
	s.Close()

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The newer of the two meta pages (page header 16 bytes, then magic,
	// version, page size, flags, root bucket 16, freelist, pgid, txid)
	// names the freelist page; dropping its last id loses that page.
	le := binary.LittleEndian
	pageSize := int(le.Uint32(b[16+8:]))
	meta := 16
	if le.Uint64(b[pageSize+16+48:]) > le.Uint64(b[16+48:]) {
		meta = pageSize + 16
	}
	fl := int(le.Uint64(b[meta+32:])) * pageSize
	count := le.Uint16(b[fl+10:])
	if count == 0 || count == 0xffff {
		t.Fatalf("freelist holds %d ids, want a few", count)
	}
	le.PutUint16(b[fl+10:], count-1)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	_, err = Open(path, Options{Timeout: time.Second, NoSync: true})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "consistency check") {
		t.Fatalf("Open error = %v, want a failed consistency check wrapping ErrCorrupt", err)
	}
	t.Log(err)
}

// TestGuard: what bbolt does on a damaged page inside Open or Load, a
// panic or a fault, comes back as an error wrapping ErrCorrupt.
func TestGuard(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func() error
	}{
		{"panic", func() error { panic("invalid freelist page: 0, page type is unknown<00>") }},
		{"nil dereference", func() error {
			var p *registry.Process
			return errors.New(p.ID)
		}},
		{"index out of range", func() error {
			var ids []uint64
			i := 3
			return fmt.Errorf("%d", ids[i])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := guard(tc.f); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("guard error = %v, want one wrapping ErrCorrupt", err)
			}
		})
	}
	if err := guard(func() error { return nil }); err != nil {
		t.Fatalf("guard of a sound read = %v, want nil", err)
	}
}

// TestPageCycleIsAnError: a branch page that names itself as its child
// sent bbolt's cursor down forever, its stack growing until the machine
// ran out of memory (found by damaging files at random). Open refuses
// the file first.
func TestPageCycleIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	s := openT(t, path, Options{})
	for i := range 300 { // enough for the processes bucket to need a branch page
		if err := s.PutProcess(registry.Process{ID: fmt.Sprintf("p%03d", i), Argv: []string{strings.Repeat("a", 100)}}); err != nil {
			t.Fatal(err)
		}
	}
	var branch int
	if err := s.db.View(func(tx *bolt.Tx) error {
		branch = int(tx.Bucket(bucketProcesses).Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := int(binary.LittleEndian.Uint32(b[16+8:]))
	if flags := binary.LittleEndian.Uint16(b[branch*ps+8:]); flags != branchPage {
		t.Fatalf("the processes bucket's root %d has flags %#x, want a branch page", branch, flags)
	}
	// Its first child becomes the branch page itself.
	binary.LittleEndian.PutUint64(b[branch*ps+pageHeader+8:], uint64(branch))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, Options{Timeout: time.Second, NoSync: true})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open error = %v, want one wrapping ErrCorrupt", err)
	}
	t.Log(err)
}

// FuzzOpen damages a registry file (bytes written at an offset, then an
// optional truncation) and opens and loads it: the result is the records
// or an error wrapping ErrCorrupt, never a panic, a crash or a hang. Plain
// `go test` runs the seeds; `go test -fuzz FuzzOpen ./store` explores (with
// a memory limit on the machine: what it hunts for is unbounded growth).
func FuzzOpen(f *testing.F) {
	clean := fuzzBase(f)
	f.Add(uint32(8192), make([]byte, 4096), uint32(0))
	f.Add(uint32(0), []byte{}, uint32(20000))
	f.Add(uint32(16384), []byte("\x42\x17\xff\x00\x9a\x13\x37\x00\x00\x00\x01\x00\x00\x00\x00\x00"), uint32(0))
	f.Add(uint32(4096+75), []byte{0xff}, uint32(0))
	f.Add(uint32(3*4096+8), []byte{0x01, 0x00}, uint32(0))
	f.Fuzz(func(t *testing.T, off uint32, data []byte, trunc uint32) {
		b := append([]byte(nil), clean...)
		if int(off) < len(b) {
			copy(b[off:], data)
		}
		if trunc > 0 && int(trunc) < len(b) {
			b = b[:trunc]
		}
		path := filepath.Join(t.TempDir(), "registry.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, Options{Timeout: time.Second, NoSync: true})
		if err == nil {
			_, _, err = s.Load()
			s.Close()
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open and Load error = %v, want nil or one wrapping ErrCorrupt", err)
		}
	})
}

// fuzzBase is a registry of a few sessions, processes and events.
func fuzzBase(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "registry.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 40 {
		sess := fmt.Sprintf("host-%d-%d", 1000+i, 5000+i)
		s.PutSession(registry.Session{ID: sess, HostPID: 1000 + i, State: registry.SessionActive})
		s.PutProcess(registry.Process{ID: fmt.Sprintf("p%02d", i), Session: sess, Argv: []string{"npx", "server"}, State: registry.StateRunning})
		s.AppendEvent(registry.Event{Kind: "process.start", Session: sess, Detail: strings.Repeat("x", 60)})
	}
	s.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// TestPutProcessWithEvents: a record and the events given with it land in
// one commit, in order, after the events already logged, under the cap; a
// refused record logs no event.
func TestPutProcessWithEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	s := openT(t, path, Options{MaxEvents: 3})
	if err := s.AppendEvent(registry.Event{Kind: "before"}); err != nil {
		t.Fatal(err)
	}
	p := registry.Process{ID: "p-1", Session: "s", State: registry.StateRunning, PID: 42}
	if err := s.PutProcess(p, registry.Event{Kind: "process.start", Process: "p-1", Detail: "pid 42"},
		registry.Event{Kind: "second", Process: "p-1"}); err != nil {
		t.Fatal(err)
	}
	_, procs, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 1 || procs[0].PID != 42 {
		t.Fatalf("records after PutProcess with events: %+v", procs)
	}
	evs, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind)
	}
	if want := []string{"before", "process.start", "second"}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("events = %v, want %v", kinds, want)
	}
	// Past the cap, the oldest go in the same commit.
	if err := s.PutProcess(p, registry.Event{Kind: "third"}); err != nil {
		t.Fatal(err)
	}
	if evs, _ = s.Events(0); len(evs) != 3 || evs[0].Kind != "process.start" || evs[2].Kind != "third" {
		t.Errorf("events past the cap: %+v", evs)
	}
	// A record without an id: refused, and its event not logged either.
	if err := s.PutProcess(registry.Process{}, registry.Event{Kind: "orphan"}); err == nil {
		t.Error("PutProcess without an id: no error")
	}
	if evs, _ = s.Events(0); evs[len(evs)-1].Kind != "third" {
		t.Errorf("an event of a refused put was logged: %+v", evs)
	}
}

// TestPutWithDamagedEventLog: an event that cannot be appended (here the
// log holds a key that is no sequence number, so trimming fails) does not
// hold back the record it came with: the record commits and the error
// says only the events were lost.
func TestPutWithDamagedEventLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	s := openT(t, path, Options{MaxEvents: 3})
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEvents).Put([]byte("bogus"), []byte("{}"))
	}); err != nil {
		t.Fatal(err)
	}
	p := registry.Process{ID: "p-1", Session: "s", State: registry.StateRunning, PID: 42}
	err := s.PutProcess(p, registry.Event{Kind: "process.start"})
	if !errors.Is(err, registry.ErrEventsNotLogged) {
		t.Fatalf("PutProcess with a damaged log: %v, want ErrEventsNotLogged", err)
	}
	_, procs, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 1 || procs[0].PID != 42 {
		t.Fatalf("the record was not committed: %+v", procs)
	}
}
