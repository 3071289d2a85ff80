package daemon

import (
	"os"

	"github.com/seed-86a41135/supervisor/api"
)

// logHubs: Windows has no log hub.
type logHubs struct{}

func newLogHubs(any, any) *logHubs { return nil }

func (h *logHubs) close() {}

func (h *logHubs) closing() {}

func (h *logHubs) status() []api.LogHubStatus { return nil }

func (d *Daemon) startHub() (any, error) { return nil, errLogWriterUnsupported }

func (d *Daemon) adoptLogHub(*api.Conn, api.Msg) {}

// startLogWriter is not available on Windows: shared servers write their
// logs themselves (rotated by copy and truncate) and stdio servers' stderr
// is not captured.
func (d *Daemon) startLogWriter(path string, tee *os.File, id string) (*os.File, error) {
	return nil, errLogWriterUnsupported
}
