//go:build faultinject

package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// EnvFault names the crash point at which a test build of the daemon
// SIGKILLs itself. Only binaries built with -tags faultinject read it.
const EnvFault = "SUPERVISOR_FAULT"

// fault SIGKILLs the daemon when point is the one EnvFault names: the
// recovery tests crash it exactly between two steps of a spawn or a stop.
func fault(point string) {
	if os.Getenv(EnvFault) == point {
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Kill() // SIGKILL on unix, TerminateProcess on Windows
		}
		select {} // the signal is on its way
	}
}

// enterFault fails moving a shim into its server's cgroup when EnvFault is
// "cgroup.enter", as the kernel does where the daemon may not write the
// cgroup the two share: the tests see the daemon spawn the server instead.
// enteredFault is the move's second half failing (cgroup v1 limits) once
// the shim is in the server's cgroup v2 (SUPERVISOR_FAULT=cgroup.entered).
func enteredFault() error {
	if os.Getenv(EnvFault) == "cgroup.entered" {
		return fmt.Errorf("set the cgroup v1 limits: %w (injected)", syscall.EACCES)
	}
	return nil
}

// faultAfterEnter says enteredFault may fail.
const faultAfterEnter = true

func enterFault() error {
	if os.Getenv(EnvFault) == "cgroup.enter" {
		return fmt.Errorf("write cgroup.procs: %w (injected)", syscall.EACCES)
	}
	return nil
}

// scanFault fails the cascade's first N scans of the processes with EMFILE
// when EnvFault is "scan.fail:N", as a daemon out of file descriptors
// would: the tests see a failed stop retried until it goes through.
func scanFault() func() error {
	n, ok := strings.CutPrefix(os.Getenv(EnvFault), "scan.fail:")
	if !ok {
		return nil
	}
	left, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return nil
	}
	var remaining atomic.Int64
	remaining.Store(left)
	return func() error {
		if remaining.Add(-1) >= 0 {
			return fmt.Errorf("open /proc: %w (injected)", syscall.EMFILE)
		}
		return nil
	}
}
