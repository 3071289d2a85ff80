//go:build windows

package hosts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// executable says why path is not a file hosts could execute; Windows has
// no execute bit, a file is enough.
func executable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil && os.IsNotExist(err):
		return fmt.Errorf("%s does not exist", path)
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	}
	return nil
}

// executableNames: a bare name is looked up with the usual extensions.
func executableNames(name string) []string {
	if filepath.Ext(name) != "" {
		return []string{name}
	}
	exts := strings.Split(strings.ToLower(os.Getenv("PATHEXT")), ";")
	if len(exts) == 1 && exts[0] == "" {
		exts = []string{".com", ".exe", ".bat", ".cmd"}
	}
	out := make([]string, 0, len(exts))
	for _, e := range exts {
		if e != "" {
			out = append(out, name+e)
		}
	}
	return out
}
