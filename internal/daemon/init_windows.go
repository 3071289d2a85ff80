package daemon

import (
	"context"
	"errors"
	"fmt"
)

// runInit refuses: `supervisor init` is a container's PID 1, a role that
// exists on Linux (and is tried on macOS); Windows containers have none.
func (d *Daemon) runInit(ctx context.Context, spec *InitSpec) error {
	spec.Code = 125
	return fmt.Errorf("supervisor init runs a container's main process on Linux; on Windows start servers with `supervisor run`: %w", errors.ErrUnsupported)
}
