//go:build unix

package daemon

import "syscall"

// detached starts the daemon in a session of its own: no terminal or
// process group of the shim that launched it reaches it.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
