package daemon

import (
	"syscall"

	"golang.org/x/sys/windows"
)

// detached starts the daemon without the shim's console and in a process
// group of its own, so a CTRL_BREAK meant for a host never reaches it, and
// outside the shim's job: a host that kills its job tree must not take the
// daemon of every other session along.
func detached() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.DETACHED_PROCESS | windows.CREATE_BREAKAWAY_FROM_JOB,
		HideWindow:    true,
	}
}
