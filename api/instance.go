package api

import (
	"crypto/sha256"
	"encoding/hex"
)

// Instance is the SUPERVISOR_INSTANCE marker of this state directory: the
// hex of the first 4 bytes of sha256(StateDir). The daemon stamps it on
// every process it spawns, so tools outside the daemon (doctor) can tell
// this instance's processes from another state directory's. It must stay
// the daemon's computation byte for byte; cmd/supervisor's doctor tests
// compare it with a live server's environment.
func (p Paths) Instance() string {
	sum := sha256.Sum256([]byte(p.StateDir))
	return hex.EncodeToString(sum[:4])
}
