package shim

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"

	"github.com/seed-86a41135/supervisor/shutdown"
)

// stdHandles names the shim's standard handles in fd order (0, 1, 2).
func stdHandles() [3]uint32 {
	return [3]uint32{windows.STD_INPUT_HANDLE, windows.STD_OUTPUT_HANDLE, windows.STD_ERROR_HANDLE}
}

// stdioFds are what the shim hands the daemon with a run request: its own
// standard handles, as ints; api's Send duplicates them into the daemon. A
// handle the host did not give, or that cannot be read, is 0 (not
// INVALID_HANDLE_VALUE, which is also the pseudo-handle of this process):
// Send refuses it, and so the run request fails naming it.
func stdioFds() []int {
	fds := make([]int, 3)
	for i, std := range stdHandles() {
		if h, err := windows.GetStdHandle(std); err == nil {
			fds[i] = int(h)
		}
	}
	return fds
}

// detachStdio points the shim's stdin and stdout at NUL and closes the
// originals, so that the server's duplicates are the last holders of the
// host's pipes and EOF semantics are those of a direct spawn. Both the
// process's standard handle (SetStdHandle, read by anything that asks
// GetStdHandle later) and os.Stdin/os.Stdout are replaced: the latter
// hold the original handle values, and a closed value can be reused by
// the next handle opened, so leaving them would let a stray write through
// os.Stdout land in an unrelated file. This is what dup2 onto fds 0 and 1
// does on unix. Stderr stays for the shim's own messages.
func detachStdio() error {
	for i, f := range []**os.File{&os.Stdin, &os.Stdout} {
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", os.DevNull, err)
		}
		if err := windows.SetStdHandle(stdHandles()[i], windows.Handle(null.Fd())); err != nil {
			null.Close()
			return fmt.Errorf("point standard handle %d at %s: %w", i, os.DevNull, err)
		}
		old := *f
		*f = null
		if old != nil {
			// Nothing to do on failure: the handle is ours to drop either
			// way, and the server's duplicate is what the host talks to.
			old.Close()
		}
	}
	return nil
}

// localStdio duplicates the standard handles for a server the shim starts
// itself. The duplicates are not inheritable: os/exec makes the child's
// inheritable copies. No host channels are described for the cascade:
// they are matched by pipe or socket inode, and a Windows pipe handle has
// none to match other holders by.
func localStdio() ([3]*os.File, []shutdown.Channel, error) {
	var stdio [3]*os.File
	self := windows.CurrentProcess()
	for i, std := range stdHandles() {
		h, err := windows.GetStdHandle(std)
		var dup windows.Handle
		if err == nil {
			err = windows.DuplicateHandle(self, h, self, &dup, 0, false, windows.DUPLICATE_SAME_ACCESS)
		}
		if err != nil {
			for _, f := range stdio[:i] {
				f.Close()
			}
			return stdio, nil, fmt.Errorf("duplicate standard handle %d (%#x): %w", i, h, err)
		}
		stdio[i] = os.NewFile(uintptr(dup), fmt.Sprintf("stdio%d", i))
	}
	return stdio, nil, nil
}
