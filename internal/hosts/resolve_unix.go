//go:build !windows

package hosts

import (
	"fmt"
	"os"
)

// executable says why path is not a file this user's hosts could execute.
func executable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil && os.IsNotExist(err):
		return fmt.Errorf("%s does not exist", path)
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	case fi.Mode()&0o111 == 0:
		return fmt.Errorf("%s is not executable", path)
	}
	return nil
}

func executableNames(name string) []string { return []string{name} }
