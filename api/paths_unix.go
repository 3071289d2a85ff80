//go:build unix

package api

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

func ownerUID(st fs.FileInfo) (int, bool) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid), true
	}
	return 0, false
}

// checkSafePath applies ssh's StrictModes rule to dir and every directory
// above it (symlinks resolved, as the kernel walks them): each must be
// owned by this uid or root, and not writable by group or others unless
// sticky. Whoever can write to one of them can rename what lies below and
// put their own socket, or state, in its place; a sticky directory such
// as /tmp lets nobody move what another user owns. A missing dir gives an
// error wrapping fs.ErrNotExist, a file one wrapping syscall.ENOTDIR.
// The fix offered for dir itself is chmod 700 (it holds the socket and
// needs no one else); for the directories above, chmod go-w.
func checkSafePath(dir string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("check %s: %w", dir, err)
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return fmt.Errorf("check %s: %w", dir, err)
	}
	me := os.Getuid()
	for d, first := real, true; ; d, first = filepath.Dir(d), false {
		st, err := os.Lstat(d)
		if err != nil {
			return fmt.Errorf("check %s: %w", d, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory: %w", d, syscall.ENOTDIR)
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		uid, mode := int(sys.Uid), uint32(sys.Mode)&0o7777
		fix := "chmod go-w " + d
		if first {
			fix = "chmod 700 " + d
		}
		named := d
		if d != dir && first {
			named = fmt.Sprintf("%s (%s)", dir, d)
		}
		switch {
		case uid != me && uid != 0:
			return fmt.Errorf("%w: %s is owned by uid %d, not by you (uid %d) or root: that user could replace the daemon's socket; use a directory you own (set %s or %s)",
				errUnsafeDir, named, uid, me, EnvSocket, EnvStateDir)
		case mode&0o022 != 0 && mode&0o1000 == 0:
			return fmt.Errorf("%w: %s is writable by group or others (owner uid %d, mode %04o) and not sticky: they could replace the daemon's socket; %s, or use a directory you own",
				errUnsafeDir, named, uid, mode, fix)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// checkSocketOwner refuses a socket file of another uid before dialing it:
// it is another user's daemon or a squatter's, and the run request carries
// the caller's environment. (CheckPeer checks the listener's uid again
// once connected.) A missing socket is left for the dial to report.
func checkSocketOwner(socket string) error {
	st, err := os.Lstat(socket)
	if err != nil {
		return nil
	}
	if uid, ok := ownerUID(st); ok && uid != os.Getuid() {
		return fmt.Errorf("%w: socket %s is owned by uid %d, not by you (uid %d): it is another user's; set %s to a path in a directory you own",
			errUnsafeDir, socket, uid, os.Getuid(), EnvSocket)
	}
	return nil
}

// isMissingDir: the socket's directory does not exist (no daemon there) or
// is no directory (the connect reports that).
func isMissingDir(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
