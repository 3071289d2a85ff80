//go:build !faultinject

package daemon

// fault is a crash point for the fault-injection tests; release builds
// compile it to nothing (see fault_on.go).
func fault(string) {}

// enterFault is the cgroup move's fault hook: none in release builds.
func enterFault() error { return nil }

// enteredFault is the injected failure after the move: none in release
// builds, where only cgroup v1 limits can fail after it.
func enteredFault() error { return nil }

// faultAfterEnter says enteredFault may fail: not in release builds.
const faultAfterEnter = false

// scanFault is the cascade's scan fault hook: none in release builds.
func scanFault() func() error { return nil }
