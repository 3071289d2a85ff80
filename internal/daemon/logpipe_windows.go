package daemon

import (
	"os"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Windows has no log hub (loghub.New returns nil).

func (d *Daemon) startHub(sock *os.File) (int, proc.Token, error) {
	sock.Close()
	return 0, proc.Token{}, errLogWriterUnsupported
}

func (d *Daemon) adoptLogHub(*api.Conn, api.Msg) {}

// startLogWriter is not available on Windows: shared servers write their
// logs themselves (rotated by copy and truncate) and stdio servers' stderr
// is not captured.
func (d *Daemon) startLogWriter(path string, tee *os.File, id string) (*os.File, error) {
	return nil, errLogWriterUnsupported
}
