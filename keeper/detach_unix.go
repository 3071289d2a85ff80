//go:build unix

package keeper

import (
	"os/exec"
	"syscall"
)

// StartDetached starts a keeper or its daemon in a session of its own: no terminal or
// process group of the shim that launched it reaches it.
func StartDetached(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd.Start()
}
