//go:build !linux

package sandbox

import (
	"context"
	"errors"
)

// Learner is Linux's (a seccomp listener): elsewhere there is none.
type Learner struct{}

// Access is how a path was used.
type Access struct{ Read, Write, Exec bool }

// Watch fails here: learning needs Linux's seccomp listener.
func Watch(context.Context, func() error) (*Learner, error) {
	return nil, errors.New("learn mode needs Linux (a seccomp listener)")
}

// Done is never closed here: there is no Learner.
func (*Learner) Done() <-chan error { return nil }

// Touched is nothing here.
func (*Learner) Touched() (map[string]Access, []string) { return nil, nil }
