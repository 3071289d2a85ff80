//go:build windows

package main

import (
	"errors"

	"github.com/seed-86a41135/supervisor/internal/logwriter"
)

// captureStderr: Windows runs no broker (run --share is refused there).
func captureStderr(logwriter.Options) (func(), error) {
	return nil, errors.New("a broker's log capture needs fd passing, which this Windows build lacks")
}
