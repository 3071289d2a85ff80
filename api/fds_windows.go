package api

import "golang.org/x/sys/windows"

// CloseFds closes handles received with a message that will not be used
// (a refused request, a failed start). On Windows the "fds" of this
// package are HANDLE values.
func CloseFds(fds []int) {
	for _, fd := range fds {
		windows.CloseHandle(windows.Handle(fd))
	}
}
