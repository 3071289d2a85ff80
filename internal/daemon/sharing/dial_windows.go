package sharing

import (
	"errors"

	"github.com/seed-86a41135/supervisor/api"
)

// DialBroker: no broker runs on Windows yet (see broker.Serve).
func DialBroker(socket string) (*api.Conn, error) {
	return nil, errors.New("shared servers are not supported on Windows yet")
}
