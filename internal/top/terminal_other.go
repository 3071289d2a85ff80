//go:build !unix

package top

import (
	"os"
	"time"
)

// Interactive is not built here: see ErrNoInteractive.
func Interactive(in, out *os.File, first Snapshot, fetch Fetch, interval time.Duration, by string) error {
	return ErrNoInteractive
}
