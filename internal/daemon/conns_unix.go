//go:build !windows

package daemon

import "syscall"

// fdLimit is the soft RLIMIT_NOFILE (Go raised it to the hard limit at
// start).
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1024
	}
	return int(min(rl.Cur, 1<<20))
}
