//go:build unix

package atomicfile

import (
	"io/fs"
	"os"
	"syscall"
)

// keepOwner gives f like's owner when we may (root editing a user's file
// must not hand it to root).
func keepOwner(f *os.File, like fs.FileInfo) error {
	st, ok := like.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) == os.Getuid() && int(st.Gid) == os.Getgid()) {
		return nil
	}
	if os.Getuid() != 0 {
		return nil
	}
	return f.Chown(int(st.Uid), int(st.Gid))
}
