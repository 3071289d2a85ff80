//go:build !linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
)

// errNoCgroups is every answer off Linux: cgroups are a Linux facility, and
// the caller runs with process groups and markers (on Windows, job objects).
var errNoCgroups = fmt.Errorf("cgroups exist only on Linux: %w", errors.ErrUnsupported)

// Manager is never made off Linux: Detect always fails.
type Manager struct{ root string }

// Detect fails: there are no cgroups here.
func Detect(name string) (*Manager, error) { return nil, errNoCgroups }

// Root is empty off Linux.
func (m *Manager) Root() string { return m.root }

// Server is never made off Linux.
type Server struct {
	Path string
	Fd   int
}

// Enter fails: there are no cgroups here.
func (s Server) Enter(pid int) error { return errNoCgroups }

// CloseFd has nothing to close.
func (s Server) CloseFd() {}

// NewServer fails: there are no cgroups here.
func (m *Manager) NewServer(session, proc string) (Server, error) { return Server{}, errNoCgroups }

// RemoveRoot has nothing to remove.
func (m *Manager) RemoveRoot() {}

// Of: no cgroups here.
func (m *Manager) Of(pid int) (string, error) { return "", errNoCgroups }

// MoveTo: no cgroups here.
func MoveTo(dir string, pid int) error { return errNoCgroups }

// MayEnter: no cgroups here.
func (m *Manager) MayEnter(pid int) error { return errNoCgroups }

// Kill fails: there are no cgroups here.
func Kill(path string) error { return errNoCgroups }

// Procs fails: there are no cgroups here.
func Procs(path string) ([]int, error) { return nil, errNoCgroups }

// Events fails: there are no cgroups here.
func Events(path string) (*os.File, error) { return nil, errNoCgroups }

// IsPopulated fails: there are no cgroups here.
func IsPopulated(f *os.File) (bool, error) { return false, errNoCgroups }

// Remove has nothing to remove.
func Remove(path string) error { return nil }

// Keep fails: there are no cgroups here.
func Keep(serverCgroup string, pid int) error { return errNoCgroups }

// LimitSupport: no limit can be enforced off Linux.
func (m *Manager) LimitSupport() map[string]string {
	why := "unavailable: " + errNoCgroups.Error()
	return map[string]string{"memory_max": why, "cpu_max": why, "pids_max": why}
}

// SetLimits fails: there are no cgroups here.
func (m *Manager) SetLimits(s Server, session, proc string, l Limits) (Limited, error) {
	return Limited{}, errNoCgroups
}

// EnterV1 fails: there are no cgroups here.
func EnterV1(dirs []string, pid int) error { return errNoCgroups }

// RemoveV1 has nothing to remove.
func RemoveV1(dirs []string) {}

// Hits finds nothing: there are no cgroups here.
func Hits(v2 string, v1 []string) []string { return nil }

// AccountsMemory is false: there are no cgroups here.
func (m *Manager) AccountsMemory() bool { return false }

// V1Memory is "": there are no cgroups here.
func (m *Manager) V1Memory(dirs []string) string { return "" }

// V1Home is empty: there are no cgroups here.
func (m *Manager) V1Home(dirs []string) []string { return nil }

// Apply has nothing to write: there are no cgroups here.
func Apply(l Limited) error { return nil }

// KeepV1 has nothing to move: there are no cgroups here.
func KeepV1(dirs []string, pid int) error { return nil }
