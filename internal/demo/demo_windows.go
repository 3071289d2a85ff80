package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Run refuses: the tour's fake host and leaky servers are unix processes
// (setsid escapes, SIGKILL). On Windows, try `supervisor run` under a real
// host instead.
func Run(ctx context.Context, w io.Writer) error {
	return fmt.Errorf("supervisor demo runs on Linux and macOS; on Windows wrap a real server with `supervisor run -- CMD`: %w", errors.ErrUnsupported)
}
