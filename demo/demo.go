// Package demo is `supervisor demo`: a self-contained tour for a newcomer
// (design §10).
package demo

import (
	"context"
	"io"
)

// Run runs the tour, writing it to w.
func Run(ctx context.Context, w io.Writer) error { return nil }
