package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// ownerUID: Windows has no uids. The state directory lives under the
// user's profile, whose ACL already keeps other users out.
func ownerUID(fs.FileInfo) (int, bool) { return 0, false }

// checkSafePath has nothing to check on Windows: there are no uids or
// mode bits, the state directory is under the user's profile (whose ACL
// keeps other users out), and the daemon's named pipe carries its own DACL.
func checkSafePath(string) error { return nil }

// pipePrefix is the local named-pipe namespace.
const pipePrefix = `\\.\pipe\`

// pipeName maps the portable socket path (Paths.Socket, a file path in the
// state directory) to the daemon's named pipe. Pipe names are one flat
// namespace with no directories, so the path cannot be used as it is; a
// hash of it keeps one pipe per state directory (or explicit socket path),
// as the socket file does on unix, so two instances never share a daemon.
// The path is lowercased first because Windows paths are case-insensitive:
// two spellings of one directory must reach one daemon. A path that is a
// pipe name already is used as it is.
func pipeName(path string) (string, error) {
	if len(path) >= len(pipePrefix) && strings.EqualFold(path[:len(pipePrefix)], pipePrefix) {
		return path, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("socket path %q: %w", path, err)
	}
	sum := sha256.Sum256([]byte(strings.ToLower(abs)))
	return pipePrefix + "supervisor-" + hex.EncodeToString(sum[:])[:16], nil
}
