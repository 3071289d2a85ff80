package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/seed-86a41135/supervisor/registry"
)

// SchemaVersion is the schema this code reads and writes.
const SchemaVersion = 1

// Sentinel errors of the store.
var (
	// ErrLocked means another process (another supervisor daemon) holds the
	// registry file's lock.
	ErrLocked = errors.New("registry in use by another supervisor daemon")
	// ErrSchema means the file's schema version cannot be used by this code.
	ErrSchema = errors.New("unsupported registry schema")
	// ErrCorrupt means the file is damaged: bbolt refused it, panicked or
	// faulted reading it, its consistency check failed, or a record does
	// not decode. The daemon moves such a file aside and starts afresh.
	ErrCorrupt = errors.New("registry file is corrupt")
)

var (
	bucketMeta      = []byte("meta")
	bucketSessions  = []byte("sessions")
	bucketProcesses = []byte("processes")
	bucketPorts     = []byte("ports")
	bucketBreakers  = []byte("breakers")
	bucketEvents    = []byte("events")
	bucketServers   = []byte("servers")
	keySchema       = []byte("schema")

	allBuckets = [][]byte{bucketMeta, bucketSessions, bucketProcesses, bucketPorts, bucketBreakers, bucketEvents, bucketServers}
)

// Options tunes Open. The zero value is usable.
type Options struct {
	// Timeout is how long Open waits for the file lock before failing with
	// ErrLocked. Default 5s.
	Timeout time.Duration
	// MaxEvents caps the events bucket; the oldest entries beyond it are
	// deleted on append. Default 10000.
	MaxEvents int
	// NoSync skips fsync on commit (tests only: a crash can lose commits).
	// Default false.
	NoSync bool
}

const (
	defaultTimeout   = 5 * time.Second
	defaultMaxEvents = 10000
)

// Store is the bbolt-backed registry.Persister. Its methods are safe for
// concurrent use.
type Store struct {
	db        *bolt.DB
	path      string
	maxEvents int
	// inflight counts commits under way: a lone one runs at once, the
	// others join bolt's Batch (commit).
	inflight atomic.Int32

	closeOnce sync.Once
	closeErr  error
}

var _ registry.Persister = (*Store)(nil)

// Open opens (creating if missing) the registry file at path, checks that
// every page of it can be read and is consistent (bolt's tx.Check), creates
// every bucket and checks the schema version. A damaged file is an error
// wrapping ErrCorrupt, never a panic.
func Open(path string, opts Options) (*Store, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = defaultMaxEvents
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open registry %s: %w", path, err)
	}
	if err := check(path, opts.Timeout); err != nil {
		return nil, fmt.Errorf("open registry %s: %w", path, err)
	}
	db, err := openBolt(path, &bolt.Options{Timeout: opts.Timeout, NoSync: opts.NoSync})
	if err != nil {
		return nil, fmt.Errorf("open registry %s: %w", path, err)
	}
	db.MaxBatchDelay = time.Millisecond
	// Written only when something is missing: a file that then fails to
	// load is moved aside as it was found.
	err = db.View(initSchema)
	if errors.Is(err, errIncomplete) {
		err = db.Update(initSchema)
	}
	if err != nil {
		_ = db.Close() // the open's error is the one to report
		return nil, fmt.Errorf("open registry %s: %w", path, err)
	}
	return &Store{db: db, path: path, maxEvents: opts.MaxEvents}, nil
}

// check reads the existing file at path: its page structure from the
// bytes (scan), then read-only through bbolt every page and bolt's
// consistency check. It runs before the read-write open because bbolt
// panics inside Open on a damaged freelist, and a panic there leaves no
// *DB to close: the file's mapping, and with it the lock, stays until the
// daemon exits. A read-only open holds a shared lock, so what it leaves
// behind blocks no one inspecting the file, and the read-write open that
// follows meets a file already read through.
func check(path string, timeout time.Duration) error {
	if fi, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return nil // bbolt creates it
	}
	if err := guard(func() error { return scan(path) }); err != nil {
		if !errors.Is(err, ErrCorrupt) && !isOSError(err) {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return err
	}
	db, err := openBolt(path, &bolt.Options{Timeout: timeout, ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		return err
	}
	err = guard(func() error { return db.View(verify) })
	if cerr := guard(db.Close); err == nil && cerr != nil {
		err = fmt.Errorf("close after check: %w", cerr)
	}
	if err != nil && !errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

// openBolt opens path with opts, turning bbolt's lock timeout into
// ErrLocked, its refusal of the content or a panic into ErrCorrupt.
func openBolt(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	var file *os.File
	opts.OpenFile = func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		file = f
		return f, err
	}
	err = guard(func() error {
		db, err = bolt.Open(path, 0o600, opts)
		return err
	})
	switch {
	case errors.Is(err, ErrCorrupt):
		if file != nil {
			_ = guard(file.Close) // what a panic left open; its mapping stays
		}
		return nil, err
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("%w (waited %s): %w", ErrLocked, opts.Timeout, err)
	case err != nil && !isOSError(err):
		// Not the OS refusing the file (permissions, a directory, no
		// memory to map it): bbolt refusing its content.
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return db, err
}

// guard runs f, turning a panic, or a fault on a bad page reference (which
// would otherwise kill the process), into an error wrapping ErrCorrupt:
// bbolt panics on damaged pages, and a page past the end of a truncated
// file faults. Only the code that reads a file not yet known good runs
// under it.
func guard(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: bbolt panicked: %v", ErrCorrupt, r)
		}
	}()
	return f()
}

// verify reads every key and value of every bucket, then runs bolt's
// consistency check. The walk comes first and on this goroutine, where a
// fault on a bad page or key reference is a recoverable panic: tx.Check
// runs on a goroutine of its own, where a fault would kill the process,
// and after the walk it only reads what the walk has read.
func verify(tx *bolt.Tx) error {
	if size, err := fileSize(tx.DB().Path()); err == nil && tx.Size() > size {
		return fmt.Errorf("file is %d bytes, its pages need %d: truncated", size, tx.Size())
	}
	if err := walk(tx.Cursor()); err != nil {
		return err
	}
	var first error
	n := 0
	for err := range tx.Check(bolt.WithKVStringer(sizeStringer{})) { // drained to the end: the check reads the tx until it closes
		if n++; first == nil {
			first = err
		}
	}
	switch {
	case n == 1:
		return fmt.Errorf("consistency check: %w", first)
	case n > 1:
		// One line for status and the event log; the file is kept for
		// `bbolt check` to list the rest.
		return fmt.Errorf("consistency check: %w (and %d more problems)", first, n-1)
	}
	return nil
}

// sizeStringer names keys and values in the check's messages by their
// size alone: bolt's default prints them whole, and a damaged size would
// read past the mapping on the check's goroutine, a fault that no recover
// catches.
type sizeStringer struct{}

func (sizeStringer) KeyToString(k []byte) string   { return fmt.Sprintf("(%d-byte key)", len(k)) }
func (sizeStringer) ValueToString(v []byte) string { return fmt.Sprintf("(%d-byte value)", len(v)) }

// walk reads every byte of every key and value under c, in order,
// descending into nested buckets. Seeking each key again reads the branch
// page keys on its path, which the consistency check compares too.
func walk(c *bolt.Cursor) error {
	var prev []byte
	var sum uint32
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			return fmt.Errorf("key %s after %s: out of order", short(k), short(prev))
		}
		prev = k
		sum = crc32.Update(sum, crc32.IEEETable, k)
		if v != nil {
			sum = crc32.Update(sum, crc32.IEEETable, v)
			continue
		}
		b := c.Bucket().Bucket(k)
		if b == nil {
			return fmt.Errorf("key %s: neither a value nor a bucket", short(k))
		}
		if err := walk(b.Cursor()); err != nil {
			return fmt.Errorf("bucket %s: %w", short(k), err)
		}
	}
	for k := prev; k != nil; {
		// Backwards, so the cursor's position is not the one Seek starts from.
		got, _ := c.Seek(k)
		if !bytes.Equal(got, k) {
			return fmt.Errorf("key %s: not found by seeking it", short(k))
		}
		k, _ = c.Prev()
	}
	_ = sum // read for the faults it may raise, not for its value
	return nil
}

// short names a key in an error by at most its first 16 bytes: a damaged
// one can be megabytes long.
func short(k []byte) string {
	if len(k) > 16 {
		return fmt.Sprintf("%q… (%d bytes)", k[:16], len(k))
	}
	return fmt.Sprintf("%q", k)
}

func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// isOSError reports whether err came from the operating system rather than
// from bbolt's reading of the file's content.
func isOSError(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}

// errIncomplete says a read-only initSchema found a bucket or the schema
// key missing: the file is new, or older than a bucket.
var errIncomplete = errors.New("registry schema incomplete")

// initSchema creates the buckets and the schema key, refusing a file written
// by a newer supervisor. In a read-only transaction it only checks, and
// returns errIncomplete when there is something to create.
func initSchema(tx *bolt.Tx) error {
	for _, name := range allBuckets {
		if !tx.Writable() {
			if tx.Bucket(name) == nil {
				return errIncomplete
			}
			continue
		}
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	meta := tx.Bucket(bucketMeta)
	raw := meta.Get(keySchema)
	if raw == nil && !tx.Writable() {
		return errIncomplete
	}
	if raw == nil {
		return meta.Put(keySchema, []byte(strconv.Itoa(SchemaVersion)))
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil {
		return fmt.Errorf("schema version %q: %w", raw, ErrSchema)
	}
	if v > SchemaVersion {
		return fmt.Errorf("schema version %d is newer than %d known to this supervisor, upgrade supervisor: %w", v, SchemaVersion, ErrSchema)
	}
	if v < SchemaVersion {
		return fmt.Errorf("schema version %d has no migration to %d: %w", v, SchemaVersion, ErrSchema)
	}
	return nil
}

// Path returns the file the store was opened on.
func (s *Store) Path() string { return s.path }

// Size returns the size of the registry file in bytes.
func (s *Store) Size() (int64, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, fmt.Errorf("stat registry %s: %w", s.path, err)
	}
	return fi.Size(), nil
}

// Close closes the file. Calling it again returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("close registry %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// PutSession commits sess, replacing any record with the same id, and
// appends evs in the same commit.
func (s *Store) PutSession(sess registry.Session, evs ...registry.Event) error {
	return s.put(bucketSessions, sess.ID, sess, evs...)
}

// PutProcess commits p, replacing any record with the same id, and
// appends evs in the same commit: a change and the event that tells of it
// cost one fsync, and are durable together or not at all.
func (s *Store) PutProcess(p registry.Process, evs ...registry.Event) error {
	return s.put(bucketProcesses, p.ID, p, evs...)
}

func (s *Store) put(bucket []byte, id string, rec any, evs ...registry.Event) error {
	if id == "" {
		return fmt.Errorf("put %s: empty id", bucket)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", bucket, id, err)
	}
	events := make([][]byte, len(evs))
	for i, ev := range evs {
		// The sequence is the key, which readers take as the truth.
		ev.Seq = 0
		if events[i], err = json.Marshal(ev); err != nil {
			return fmt.Errorf("append event %s: encode: %w", ev.Kind, err)
		}
	}
	// Put of the same key and value is idempotent, as Batch requires; a
	// retried fn runs after its failed tx rolled back, sequence included,
	// so its events are appended exactly once. An event that cannot be
	// appended (a damaged log) does not hold the record back: the record
	// commits, and the error says only the events were lost.
	var evErr error
	err = s.commit(func(tx *bolt.Tx) error {
		evErr = nil
		if err := tx.Bucket(bucket).Put([]byte(id), data); err != nil {
			return err
		}
		if len(events) > 0 {
			evErr = appendEvents(tx.Bucket(bucketEvents), s.maxEvents, events...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put %s/%s: %w", bucket, id, err)
	}
	if evErr != nil {
		return fmt.Errorf("put %s/%s: %w: %v", bucket, id, registry.ErrEventsNotLogged, evErr)
	}
	return nil
}

// commit runs fn in a durable write transaction. A commit that finds none
// other under way runs at once (db.Update); one that arrives while others
// are committing joins bolt's Batch, so a spawn storm still shares its
// fsyncs. A lone commit, such as a server's intent record before its exec,
// never waits MaxBatchDelay for company that does not come (issue 27: two
// of them were on the path of every `supervisor run`). fn must be
// idempotent: Batch may run it again.
func (s *Store) commit(fn func(*bolt.Tx) error) error {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	if n == 1 {
		return s.db.Update(fn)
	}
	return s.db.Batch(fn)
}

// DeleteSession removes the session record with id; a missing one is not an error.
func (s *Store) DeleteSession(id string) error { return s.delete(bucketSessions, id) }

// DeleteProcess removes the process record with id; a missing one is not an error.
func (s *Store) DeleteProcess(id string) error { return s.delete(bucketProcesses, id) }

func (s *Store) delete(bucket []byte, id string) error {
	err := s.commit(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Delete([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, id, err)
	}
	return nil
}

// DeleteMany removes the given session and process records in one commit;
// missing ones are not an error. Compaction deletes thousands at a time, and
// one transaction means one fsync instead of one each.
func (s *Store) DeleteMany(sessionIDs, processIDs []string) error {
	if len(sessionIDs) == 0 && len(processIDs) == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, batch := range []struct {
			bucket []byte
			ids    []string
		}{{bucketSessions, sessionIDs}, {bucketProcesses, processIDs}} {
			b := tx.Bucket(batch.bucket)
			for _, id := range batch.ids {
				if err := b.Delete([]byte(id)); err != nil {
					return fmt.Errorf("%s/%s: %w", batch.bucket, id, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete %d sessions and %d processes from %s: %w", len(sessionIDs), len(processIDs), s.path, err)
	}
	return nil
}

// AppendEvent appends ev to the event log under the next sequence number
// (ev.Seq is ignored) and trims the oldest entries beyond MaxEvents.
func (s *Store) AppendEvent(ev registry.Event) error {
	// Encoded outside the write lock; the sequence is the key, which
	// readers take as the truth (EventsAfter), so it is not in the value.
	ev.Seq = 0
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("append event %s: encode: %w", ev.Kind, err)
	}
	// A retried Batch fn runs after its failed tx rolled back, sequence
	// included, so it appends exactly once.
	err = s.commit(func(tx *bolt.Tx) error {
		return appendEvents(tx.Bucket(bucketEvents), s.maxEvents, data)
	})
	if err != nil {
		return fmt.Errorf("append event %s: %w", ev.Kind, err)
	}
	return nil
}

// appendEvents puts encoded events under the next sequence numbers and
// trims the log to limit.
func appendEvents(b *bolt.Bucket, limit int, events ...[]byte) error {
	for _, data := range events {
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		if err := b.Put(seqKey(seq), data); err != nil {
			return err
		}
	}
	return trimEvents(b, limit)
}

// trimEvents deletes from the oldest end until at most limit remain. Keys are
// contiguous sequence numbers trimmed only from the front, so last−first+1 is
// the count without a scan.
func trimEvents(b *bolt.Bucket, limit int) error {
	c := b.Cursor()
	lastK, _ := c.Last()
	if lastK == nil {
		return nil
	}
	last, ok := seqOf(lastK)
	if !ok {
		return fmt.Errorf("event key %x: not a sequence number", lastK)
	}
	for k, _ := c.First(); k != nil; k, _ = c.First() {
		first, ok := seqOf(k)
		if !ok {
			return fmt.Errorf("event key %x: not a sequence number", k)
		}
		if last-first+1 <= uint64(limit) {
			return nil
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

func seqOf(k []byte) (uint64, bool) {
	if len(k) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k), true
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

// Load returns every session and process record. A record that does not
// decode is an error naming its bucket and key.
// A damaged file is an error wrapping ErrCorrupt, never a panic.
func (s *Store) Load() (sessions []registry.Session, procs []registry.Process, err error) {
	// Open has read every page, but Load is the daemon's first real use
	// of the file: a panic here must not keep it down either.
	err = guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
				var rec registry.Session
				if err := json.Unmarshal(v, &rec); err != nil {
					return fmt.Errorf("decode %s/%s: %w: %w", bucketSessions, k, ErrCorrupt, err)
				}
				sessions = append(sessions, rec)
				return nil
			}); err != nil {
				return err
			}
			return tx.Bucket(bucketProcesses).ForEach(func(k, v []byte) error {
				var rec registry.Process
				if err := json.Unmarshal(v, &rec); err != nil {
					return fmt.Errorf("decode %s/%s: %w: %w", bucketProcesses, k, ErrCorrupt, err)
				}
				procs = append(procs, rec)
				return nil
			})
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("load registry %s: %w", s.path, err)
	}
	return sessions, procs, nil
}

// Events returns the newest n events, oldest first; n <= 0 means all.
func (s *Store) Events(n int) ([]registry.Event, error) {
	out, _, err := s.EventsAfter(0, "", n)
	return out, err
}

// EventsAfter returns the newest limit events with a sequence number above
// after that belong to session (every session when it is ""), oldest first;
// limit <= 0 means all of them. last is the newest sequence number the log
// has handed out, matching or not: a follower asks for what comes after it
// next, so events of other sessions are not scanned again.
func (s *Store) EventsAfter(after uint64, session string, limit int) (events []registry.Event, last uint64, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEvents)
		last = b.Sequence()
		// Backwards from the newest: the common asks (the last 100, what
		// is new since the last poll) stop after a few keys.
		c := b.Cursor()
		for k, v := c.Last(); k != nil && (limit <= 0 || len(events) < limit); k, v = c.Prev() {
			seq, ok := seqOf(k)
			if !ok {
				return fmt.Errorf("event key %x: not a sequence number", k)
			}
			if seq <= after {
				break
			}
			var ev registry.Event
			if err := json.Unmarshal(v, &ev); err != nil {
				return fmt.Errorf("decode %s/%x: %w", bucketEvents, k, err)
			}
			if session != "" && ev.Session != session {
				continue
			}
			// The key is the truth: events written before Seq was stored
			// carry none.
			ev.Seq = seq
			events = append(events, ev)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read events %s: %w", s.path, err)
	}
	for i, j := 0, len(events)-1; i < j; i, j = i+1, j-1 {
		events[i], events[j] = events[j], events[i]
	}
	return events, last, nil
}

// PutBreaker stores a circuit breaker's state under its key.
func (s *Store) PutBreaker(key string, state any) error { return s.put(bucketBreakers, key, state) }

// Breakers calls decode with every stored breaker state.
func (s *Store) Breakers(decode func(key string, data []byte) error) error {
	return s.each(bucketBreakers, decode)
}

// each calls decode with every key and value of bucket.
func (s *Store) each(bucket []byte, decode func(key string, data []byte) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			if err := decode(string(k), v); err != nil {
				return fmt.Errorf("decode %s/%s: %w", bucket, k, err)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("load %s from %s: %w", bucket, s.path, err)
	}
	return nil
}

// PutServer stores what the daemon learned about a server key (design
// §11: whether it speaks the stateless revision; the lazy-start cache).
func (s *Store) PutServer(key string, facts any) error { return s.put(bucketServers, key, facts) }

// DeleteServer forgets a server key.
func (s *Store) DeleteServer(key string) error { return s.delete(bucketServers, key) }

// Servers calls decode with every stored server key's facts.
func (s *Store) Servers(decode func(key string, data []byte) error) error {
	return s.each(bucketServers, decode)
}
