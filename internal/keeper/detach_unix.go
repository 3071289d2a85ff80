//go:build unix

package keeper

import (
	"os/exec"
	"syscall"
)

// StartDetached starts a keeper or its daemon in a session of its own: no terminal or
// process group of the shim that launched it reaches it.
func StartDetached(cmd *exec.Cmd) error {
	cmd.SysProcAttr = DetachedAttr()
	return cmd.Start()
}

// DetachedAttr is StartDetached's for os.StartProcess (where the caller
// must not use os/exec).
func DetachedAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
