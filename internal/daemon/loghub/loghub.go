// Package loghub is the daemon's side of the log hubs, the
// `supervisor _log-writer` processes that copy servers' output to their
// logs (the hub itself is internal/logwriter; why hubs exist:
// docs/design.md §2, "Output"). It owns the set of hubs and a duplicate of
// every log pipe's read end: it opens a pipe and hands it to the hub new
// pipes go to, starts another hub when that one is full, hands the pipes
// of a hub that died to a new one, takes back the hubs of an earlier
// daemon that re-join, and lists them all for status.
//
// It reaches the daemon only through what it is given: a logger, a Spawn
// that starts a hub process, and, for a re-joining hub, the connection the
// daemon accepted. It must not import internal/daemon, and must not start
// a process itself: a hub is spawned through the daemon's reaper and
// carries its markers, by which stops, recovery and doctor never take it
// for a server. Where logs go and how large they grow is the daemon's to
// say (each pipe's api.LogPipe), not this package's. It keeps no copy of a
// pipe's tee (a host's stderr): that would hold a host's stderr open in
// the daemon, and cost one fd per server more.
package loghub

import (
	"os"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Spawn starts a hub process with sock, its end of the connection to the
// daemon, as its stdin, and says which process it is (by its token a hub
// given up on is killed). It owns sock, and closes it whatever happens.
type Spawn func(sock *os.File) (pid int, tok proc.Token, err error)
