//go:build !linux

package denials

import (
	"context"
	"errors"
)

// Reader is Linux's alone: elsewhere Open says so.
type Reader struct{}

var errNotLinux = errors.New("Landlock's audit records are Linux's")

// Open says denials cannot be read here.
func Open() (*Reader, error) { return nil, errNotLinux }

// Run ends at once: there is nothing to read.
func (*Reader) Run(context.Context, func(Denial)) error { return errNotLinux }

// On says the audit is not there.
func On() (bool, error) { return false, errNotLinux }

// SetOn cannot turn it on.
func SetOn(bool) (bool, error) { return false, errNotLinux }
