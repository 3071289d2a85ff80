package broker

import (
	"context"
	"errors"
	"io"
	"time"
)

// ServeConfig configures the broker process.
type ServeConfig struct {
	Socket string
	Linger time.Duration
	Broker Config
	Ready  io.Writer
}

// Serve is not built for Windows yet: handing a client's pipes to the
// broker needs DuplicateHandle into it, not SCM_RIGHTS.
func Serve(ctx context.Context, cfg ServeConfig) error {
	return errors.New("shared servers (the broker) are not supported on Windows yet: run the server without --share")
}
