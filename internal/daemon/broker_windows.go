package daemon

import (
	"errors"

	"github.com/seed-86a41135/supervisor/api"
)

// dialBroker: no broker runs on Windows yet (see broker.Serve).
func dialBroker(socket string) (*api.Conn, error) {
	return nil, errors.New("shared servers are not supported on Windows yet")
}
