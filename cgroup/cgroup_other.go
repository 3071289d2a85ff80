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
