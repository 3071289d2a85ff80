package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Cgroup returns the cgroup v2 path of pid (the "0::" line of
// /proc/PID/cgroup), "" on a machine without the unified hierarchy.
func Cgroup(pid int) (string, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return "", fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return "", fmt.Errorf("read /proc/%d/cgroup: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", sc.Err()
}
