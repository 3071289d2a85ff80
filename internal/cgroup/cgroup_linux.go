package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Manager creates and removes cgroups below one root directory.
type Manager struct {
	mount  string // the cgroup2 mount root is below
	root   string
	top    string    // the daemon's subtree's top (supervisor-UID)
	limits limitDirs // where memory_max, cpu_max and pids_max go
}

// Detect finds a writable cgroup2 hierarchy and prepares root/name below the
// calling process's own cgroup. It fails (and the caller runs without
// cgroups) when there is no cgroup2 mount or it is not writable.
func Detect(name string) (*Manager, error) {
	mount, err := cgroup2Mount()
	if err != nil {
		return nil, err
	}
	own, err := ownCgroup()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(mount, own, name)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup2 at %s is not writable: %w", mount, err)
	}
	probe := filepath.Join(root, fmt.Sprintf("probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup2 at %s is not writable: %w", root, err)
	}
	os.Remove(probe)
	m := &Manager{mount: mount, root: root}
	m.probeLimits(name)
	return m, nil
}

// Root is the directory every session cgroup lives in.
func (m *Manager) Root() string { return m.root }

// Server is a fresh cgroup for one server, opened for UseCgroupFD.
type Server struct {
	Path string
	Fd   int
}

// NewServer creates root/s-SESSION/PROC and opens it. The caller closes Fd
// after the clone. Names are prefixed so no id can be "." or "..".
func (m *Manager) NewServer(session, proc string) (Server, error) {
	sdir := filepath.Join(m.root, "s-"+session)
	dir := filepath.Join(sdir, proc)
	// The session's cgroup is removed when its last server's is (Remove):
	// one emptied between the two mkdirs here is made again.
	for attempt := 0; ; attempt++ {
		err := os.Mkdir(sdir, 0o755)
		if errors.Is(err, os.ErrNotExist) { // the root went (removed from outside)
			err = os.MkdirAll(sdir, 0o755)
		}
		switch {
		case err == nil && m.limits.v2["memory"]:
			// Memory accounting for ps, where the tree delegates it, once
			// per session (not three writes per spawn): best effort, a
			// server runs without it.
			_ = m.delegate(session, "memory")
		case err != nil && !errors.Is(err, os.ErrExist):
			return Server{}, fmt.Errorf("create cgroup %s: %w", sdir, err)
		}
		err = os.Mkdir(dir, 0o755)
		if err == nil || errors.Is(err, os.ErrExist) {
			break
		}
		if !errors.Is(err, os.ErrNotExist) || attempt == 2 {
			return Server{}, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		return Server{}, fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	return Server{Path: dir, Fd: fd}, nil
}

// Enter moves the running process pid into the cgroup: for a shim about
// to exec its server in its own place, which was not cloned into it. It
// has forked nothing, so nothing is left outside. The kernel allows the
// move only to whoever may write cgroup.procs of the closest cgroup the
// two share; where that is not us (a host in a login session's scope
// owned by root), it fails with EACCES and the caller spawns instead.
func (s Server) Enter(pid int) error {
	fd, err := unix.Openat(s.Fd, "cgroup.procs", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s/cgroup.procs: %w", s.Path, err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(strconv.Itoa(pid))); err != nil {
		return fmt.Errorf("move pid %d into cgroup %s: %w", pid, s.Path, err)
	}
	return nil
}

// CloseFd closes the directory fd once the clone has used it.
func (s Server) CloseFd() {
	if s.Fd > 0 {
		unix.Close(s.Fd)
	}
}

// Kill writes cgroup.kill: every process in the cgroup and below gets
// SIGKILL, atomically, including ones forked a moment ago.
func Kill(path string) error {
	if err := os.WriteFile(filepath.Join(path, "cgroup.kill"), []byte("1"), 0); err != nil {
		return fmt.Errorf("cgroup.kill %s: %w", path, err)
	}
	return nil
}

// Procs lists the processes in the cgroup and its descendants.
func Procs(path string) ([]int, error) {
	var out []int
	err := filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil // removed during the walk
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
		return nil
	})
	return out, err
}

func populated(f *os.File) (bool, error) {
	if _, err := f.Seek(0, 0); err != nil {
		return false, err
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "populated "); ok {
			return v != "0", nil
		}
	}
	return false, sc.Err()
}

// Events opens a cgroup's cgroup.events file. The kernel signals each
// change of it with POLLPRI, so a poll on it waits for the cgroup to empty
// without a timer; IsPopulated re-reads it.
func Events(path string) (*os.File, error) {
	return os.Open(filepath.Join(path, "cgroup.events"))
}

// IsPopulated re-reads an open cgroup.events file.
func IsPopulated(f *os.File) (bool, error) { return populated(f) }

// Remove deletes a server cgroup, and its session cgroup once that is
// empty. A cgroup that still has processes is left (EBUSY) and reported.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove cgroup %s: %w", path, err)
	}
	os.Remove(filepath.Dir(path)) // the session's, when it was the last server
	return nil
}

func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var found []string
	for sc.Scan() {
		// ... mount-point ... - fstype source options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		fields := strings.Fields(pre)
		if len(fields) >= 5 {
			found = append(found, fields[4])
		}
	}
	for _, want := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		for _, m := range found {
			if m == want {
				return m, nil
			}
		}
	}
	if len(found) > 0 {
		return found[0], nil
	}
	return "", errors.New("no cgroup2 hierarchy is mounted")
}

func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("this process has no cgroup2 path")
}

// MayEnter says why process pid cannot be moved into a server cgroup by
// this process, or nil where it can. The kernel lets only a writer of
// cgroup.procs in the closest cgroup the two share move it (a host in a
// login session's scope, owned by root, shares only user-UID.slice with
// the daemon). A prediction: nil does not promise that Enter succeeds,
// but an error here promises that it fails.
func (m *Manager) MayEnter(pid int) error {
	from, err := m.Of(pid)
	if err != nil {
		return err
	}
	shared := m.root
	for shared != m.mount && !strings.HasPrefix(from+"/", shared+"/") {
		shared = filepath.Dir(shared)
	}
	procs := filepath.Join(shared, "cgroup.procs")
	if err := unix.Access(procs, unix.W_OK); err != nil {
		return fmt.Errorf("pid %d is in %s, and %s, where it and the servers' cgroups meet, is not writable by the daemon: %w", pid, from, procs, err)
	}
	return nil
}

// Of is the cgroup2 directory process pid is in.
func (m *Manager) Of(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", fmt.Errorf("read the cgroup of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(m.mount, p), nil
		}
	}
	return "", fmt.Errorf("pid %d has no cgroup2 path", pid)
}

// MoveTo moves process pid into the cgroup directory dir: back where it
// was, when what it entered for cannot go on.
func MoveTo(dir string, pid int) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("move pid %d back into cgroup %s: %w", pid, dir, err)
	}
	return nil
}

// RemoveRoot removes the manager's root and its session directories when
// they hold no server cgroups any more.
func (m *Manager) RemoveRoot() {
	removeEmpty(m.root)
	os.Remove(filepath.Dir(m.root)) // the per-uid parent, when this was the last instance
	for _, base := range m.limits.v1 {
		removeEmpty(base)
		os.Remove(filepath.Dir(base))
	}
}

// removeEmpty removes dir's empty cgroups depth first, then dir; a cgroup
// that still has processes stays (rmdir fails with EBUSY).
func removeEmpty(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeEmpty(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(dir)
}

// Keep moves pid out of a server's cgroup into a "kept" cgroup beside the
// sessions (root/kept), so cgroup.kill spares it: a process that asked to
// be kept (SUPERVISOR_KEEP=1) outlives its server.
func Keep(serverCgroup string, pid int) error {
	kept := filepath.Join(filepath.Dir(filepath.Dir(serverCgroup)), "kept")
	if err := os.MkdirAll(kept, 0o755); err != nil {
		return fmt.Errorf("create cgroup %s: %w", kept, err)
	}
	if err := os.WriteFile(filepath.Join(kept, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("move %d to %s: %w", pid, kept, err)
	}
	return nil
}
