package daemon

import "os"

type logWriterMarkers struct {
	session, procID, host string
}

// startLogWriter is not available on Windows: shared servers write their
// logs themselves (rotated by copy and truncate) and stdio servers' stderr
// is not captured.
func (d *Daemon) startLogWriter(path string, tee *os.File, m logWriterMarkers) (*os.File, error) {
	return nil, errLogWriterUnsupported
}
