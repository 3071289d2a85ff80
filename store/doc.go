// Package store persists the registry in a bbolt file: buckets, encoding, schema version.
//
// Schema (version 1):
//
//	registry.db
//	├── meta
//	│   └── "schema" → "1"
//	├── sessions
//	│   └── <session id> → JSON registry.Session
//	├── processes
//	│   └── <process id> → JSON registry.Process
//	├── ports       (reserved, created empty)
//	├── breakers    (reserved, created empty)
//	└── events
//	    └── <big-endian uint64 sequence> → JSON registry.Event   (capped at Options.MaxEvents)
//
// Records never hold environment values: registry.Process carries argv only,
// because environments hold secrets and the file outlives the processes.
//
// # Caveats
//
//   - bbolt takes an exclusive flock on the file, so only one daemon can hold
//     the registry at a time; a second Open waits Options.Timeout and then
//     fails with ErrLocked.
//   - Writes go through DB.Batch: concurrent puts coalesce into one commit,
//     and a put returns only after its commit is durable (unless NoSync).
//     A batched function may run more than once, so every one is idempotent.
//   - Event keys are contiguous sequence numbers and are trimmed only from the
//     oldest end, so the count is last−first+1 and the cap costs two cursor
//     seeks, not a scan.
//   - A file with a newer schema than this code knows is refused, never
//     rewritten; an older one would need a migration (there is none yet).
//   - A damaged file is an error wrapping ErrCorrupt, never a panic, a
//     crash or an endless loop. Open first scans the page structure from
//     the file's bytes (scan.go: bbolt trusts it, and a page that is its own
//     child runs its cursor out of memory), then reads it read-only through
//     bbolt, every key and value and then tx.Check, under recover and
//     debug.SetPanicOnFault (bbolt panics on bad pages; a page past a
//     truncated end faults). A panic inside bolt.Open would leave no handle
//     to close, so its read-only mapping (and shared lock) would stay until
//     the process exits. Open costs a full read of the file: tens of
//     milliseconds for an 8 MiB registry.
//   - bbolt never shrinks the file: deleted records leave free pages that are
//     reused, so Size reports the high-water mark, not the live data. The
//     daemon's compaction (DeleteMany, one commit per run) is what keeps that
//     mark level under churn.
//   - An event's sequence number is its key (and Event.Seq): the bucket's
//     sequence is never reset, so a follower's "after N" stays meaningful
//     across trimming and daemon restarts.
package store
