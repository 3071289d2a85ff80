package store

import (
	"crypto/rand"
	"errors"
	"fmt"
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
	start := time.Now()
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
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("second Open took %s, want about 100ms", d)
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
	if err == nil || !strings.Contains(err.Error(), "processes/px") {
		t.Errorf("Load() error = %v, want one naming processes/px", err)
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
		})
	}
}
