package spawn

import (
	"errors"
	"fmt"
	"syscall"
)

// platformAttr refuses what macOS lacks rather than dropping it silently:
// there is no cgroup to clone into. A parent-death signal does not exist
// either, and is dropped: only a local-mode shim asks for one, and on macOS
// a SIGKILLed local shim leaves its server to launchd (docs/platforms.md says so).
func platformAttr(sys *syscall.SysProcAttr, req Request) error {
	if req.CgroupFD > 0 {
		return fmt.Errorf("clone into a cgroup: %w", errors.ErrUnsupported)
	}
	return nil
}

// forkIn refuses cgroup directories: there are none on macOS. No thread
// confines itself here (confiner): a sandbox wraps the command.
func forkIn(dirs, home []string, confine func() error, fork func() (int, error)) (int, error) {
	if len(dirs) > 0 {
		return 0, fmt.Errorf("start inside cgroups: %w", errors.ErrUnsupported)
	}
	if confine != nil {
		return 0, &StartError{Code: 125, Err: fmt.Errorf("confine a thread: %w", errors.ErrUnsupported)}
	}
	return fork()
}

// confiner is nil on macOS: its sandbox wraps the command in sandbox-exec
// (sandbox.Wrap), which Start and Exec do.
func confiner(Request) func() error { return nil }
