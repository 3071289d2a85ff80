package spawn

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// platformAttr sets what only Linux has: the parent-death signal and the
// clone into a cgroup.
func platformAttr(sys *syscall.SysProcAttr, req Request) error {
	sys.Pdeathsig = req.Pdeathsig
	if req.CgroupFD > 0 {
		sys.UseCgroupFD = true
		sys.CgroupFD = req.CgroupFD
	}
	return nil
}

// forkIn runs fork on a thread moved into the cgroup v1 directories dirs
// (their tasks files take one thread), so the child it forks starts in
// them, and moves the thread back to home after. A thread that cannot go
// back stays locked to its goroutine, and Go ends it with the goroutine:
// no daemon thread lives on inside a server's limits.
func forkIn(dirs, home []string, fork func() (int, error)) (int, error) {
	if len(dirs) == 0 {
		return fork()
	}
	runtime.LockOSThread()
	tid := []byte(strconv.Itoa(unix.Gettid()))
	moveAll := func(to []string) error {
		for _, d := range to {
			if err := os.WriteFile(filepath.Join(d, "tasks"), tid, 0); err != nil {
				return fmt.Errorf("move the forking thread into cgroup %s: %w", d, err)
			}
		}
		return nil
	}
	if err := moveAll(dirs); err != nil {
		if moveAll(home) == nil {
			runtime.UnlockOSThread()
		}
		return 0, &StartError{Code: 125, Err: fmt.Errorf("start inside the limits' cgroups: %w", err)}
	}
	pid, err := fork()
	if moveAll(home) == nil {
		runtime.UnlockOSThread()
	}
	return pid, err
}
