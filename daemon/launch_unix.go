//go:build unix

package daemon

import (
	"fmt"
	"os"
	"os/exec"
)

// withReport gives cmd (the keeper's first stage) the write end of a pipe
// as fd 3 and returns the read end.
func withReport(cmd *exec.Cmd) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe for the daemon's start report: %w", err)
	}
	cmd.ExtraFiles = []*os.File{w}
	cmd.Args[4] = "3"
	return r, nil
}
