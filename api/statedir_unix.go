//go:build unix

package api

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
)

// defaultStateDir is ~/.local/state/supervisor where ~ is the uid's home:
// HOME when set, else the password database, because hosts such as the MCP
// SDKs strip most variables and every shim of one user must reach the same
// daemon.
func defaultStateDir(getenv func(string) string) (string, error) {
	home := getenv("HOME")
	if home == "" {
		u, err := user.LookupId(strconv.Itoa(os.Getuid()))
		if err != nil {
			return "", fmt.Errorf("find home directory of uid %d (HOME is unset): %w; set %s", os.Getuid(), err, EnvStateDir)
		}
		home = u.HomeDir
	}
	return filepath.Join(home, ".local", "state", "supervisor"), nil
}

// FallbackDir is the per-uid directory for sockets whose default path is
// too long for sun_path. A fixed /tmp, not $TMPDIR: hosts pass different
// TMPDIRs, and every shim of one user must reach the same daemon.
func FallbackDir() string { return filepath.Join("/tmp", fmt.Sprintf("supervisor-%d", os.Getuid())) }
