//go:build unix

package api

import (
	"io/fs"
	"syscall"
)

func ownerUID(st fs.FileInfo) (int, bool) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid), true
	}
	return 0, false
}
