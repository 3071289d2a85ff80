//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// learnLegacy are the path calls x86-64 has beside the *at ones.
func learnLegacy() map[uint32]watched {
	return map[uint32]watched{
		unix.SYS_OPEN:     {path: 0, dirfd: -1, flags: 1, second: -1},
		unix.SYS_CREAT:    {path: 0, dirfd: -1, flags: -1, write: true, second: -1},
		unix.SYS_MKDIR:    {path: 0, dirfd: -1, flags: -1, write: true, second: -1, mkdir: true},
		unix.SYS_RMDIR:    {path: 0, dirfd: -1, flags: -1, write: true, second: -1},
		unix.SYS_UNLINK:   {path: 0, dirfd: -1, flags: -1, write: true, second: -1},
		unix.SYS_RENAME:   {path: 0, dirfd: -1, flags: -1, write: true, second: 1, secondDir: -1},
		unix.SYS_RENAMEAT: {path: 1, dirfd: 0, flags: -1, write: true, second: 3, secondDir: 2},
		unix.SYS_SYMLINK:  {path: 1, dirfd: -1, flags: -1, write: true, second: -1},
		unix.SYS_LINK:     {path: 1, dirfd: -1, flags: -1, write: true, second: -1},
	}
}
