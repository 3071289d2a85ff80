//go:build !unix

package top

import (
	"errors"
	"os"
	"time"
)

// Fetch takes one snapshot from the daemon.
type Fetch func() (Snapshot, error)

// ErrNoInteractive says the interactive view is not built for this OS:
// callers print the plain table instead.
var ErrNoInteractive = errors.New("the interactive view needs a unix terminal")

// Interactive is not built here: see ErrNoInteractive.
func Interactive(in, out *os.File, fetch Fetch, interval time.Duration, by string) error {
	return ErrNoInteractive
}
