//go:build faultinject

package daemon

import (
	"os"
	"syscall"
)

// EnvFault names the crash point at which a test build of the daemon
// SIGKILLs itself. Only binaries built with -tags faultinject read it.
const EnvFault = "SUPERVISOR_FAULT"

// fault SIGKILLs the daemon when point is the one EnvFault names: the
// recovery tests crash it exactly between two steps of a spawn or a stop.
func fault(point string) {
	if os.Getenv(EnvFault) == point {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
