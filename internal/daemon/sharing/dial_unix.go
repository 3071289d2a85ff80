//go:build unix

package sharing

import (
	"fmt"
	"net"
	"time"

	"github.com/seed-86a41135/supervisor/api"
)

// DialBroker connects to a broker's socket; the peer must be this uid.
func DialBroker(socket string) (*api.Conn, error) {
	nc, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c, err := api.NewConn(nc.(*net.UnixConn))
	if err != nil {
		nc.Close()
		return nil, err
	}
	if _, err := c.CheckPeer(); err != nil {
		c.Close()
		return nil, fmt.Errorf("refusing the broker at %s: %w", socket, err)
	}
	return c, nil
}
