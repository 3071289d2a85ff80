//go:build windows

package main

import (
	"context"
	"errors"
)

// runLogHub: Windows has no log hub (internal/daemon/logpipe_windows.go).
func runLogHub(context.Context, string) error {
	return errors.New("the log hub needs fd passing, which this Windows build lacks")
}
