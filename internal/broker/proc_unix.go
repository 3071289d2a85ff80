//go:build unix

package broker

import (
	"os/exec"
	"syscall"
)

// setGroup starts the upstream in a process group of its own, so a stop
// reaches the children a launcher (npx, uvx) leaves under it.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminate asks the upstream's group to stop.
func terminate(pid int) { syscall.Kill(-pid, syscall.SIGTERM) }

// kill ends the upstream's group.
func kill(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }
