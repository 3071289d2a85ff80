//go:build faultinject

package daemon

import (
	"os"
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
