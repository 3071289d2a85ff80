//go:build unix

package api

import "syscall"

// CloseFds closes descriptors received with a message that will not be
// used (a refused request, a failed start).
func CloseFds(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}
