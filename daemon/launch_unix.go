//go:build unix

package daemon

import (
	"os/exec"
	"syscall"
)

// startDetached starts the daemon in a session of its own: no terminal or
// process group of the shim that launched it reaches it.
func startDetached(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd.Start()
}
