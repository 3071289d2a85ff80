//go:build !linux

package proc

// ExitInfoSupported: only Linux (6.15+) keeps a process's exit status on
// its pidfd for a watcher that is not its parent.
func ExitInfoSupported() bool { return false }
