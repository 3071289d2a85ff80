package api

import (
	"fmt"
	"os"
	"path/filepath"
)

// maxSunPath does not bind on Windows: the socket path only names the
// state directory's named pipe, whose name is a hash of it.
const maxSunPath = 1 << 15

// defaultStateDir is %LOCALAPPDATA%\supervisor: per user and machine, never
// roamed. Hosts strip variables, so the profile directory is asked of the
// OS when LOCALAPPDATA is missing.
func defaultStateDir(getenv func(string) string) (string, error) {
	if d := getenv("LOCALAPPDATA"); d != "" {
		return filepath.Join(d, "supervisor"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the local application data directory: %w; set %s", err, EnvStateDir)
	}
	return filepath.Join(d, "supervisor"), nil
}

// FallbackDir is never needed on Windows (see maxSunPath); it names the
// temporary directory so callers that list it find nothing of ours.
func FallbackDir() string { return filepath.Join(os.TempDir(), "supervisor") }
