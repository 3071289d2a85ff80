//go:build unix

package client

import (
	"fmt"
	"os"
)

// reportPipe is the pipe the keeper tells a failed first start on: the
// read end, and the write end the keeper gets as fd 3.
func reportPipe() (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("pipe for the daemon's start report: %w", err)
	}
	return r, w, nil
}
