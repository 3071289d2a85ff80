package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Limits are enforced in the server's own cgroup v2 directory where the
// tree above it delegates the controllers (memory, pids, cpu), else in
// per-server directories of the cgroup v1 hierarchies of those
// controllers: hybrid systems (cgroup2 at /sys/fs/cgroup/unified, the
// controllers on v1) have no other place for them.

// v1Controllers are the v1 hierarchies limits use, by controller name.
var v1Controllers = []string{"memory", "pids", "cpu"}

// limitDirs finds where each controller can be used: "v2" when the
// chain from the daemon's own cgroup down to root delegates it, else a
// v1 base directory (the daemon's own v1 cgroup), else why not.
type limitDirs struct {
	v2    map[string]bool
	v1    map[string]string // controller → mountpoint/own-path/name
	v1own map[string]string // controller → mountpoint/own-path: the daemon's own
	why   map[string]string
}

// probeLimits looks at both trees once, at Detect.
func (m *Manager) probeLimits(name string) {
	ld := limitDirs{v2: map[string]bool{}, v1: map[string]string{}, v1own: map[string]string{}, why: map[string]string{}}
	// The top of the daemon's subtree (supervisor-UID) gets its controllers
	// from the daemon's own cgroup, which we do not touch.
	top := m.root
	for i := strings.Count(filepath.Clean(name), "/"); i > 0; i-- {
		top = filepath.Dir(top)
	}
	m.top = top
	avail := controllersOf(top)
	v1 := v1Mounts()
	for _, c := range v1Controllers {
		switch {
		case avail[c]:
			ld.v2[c] = true
		case v1[c] != "":
			base := filepath.Join(v1[c], name)
			if err := os.MkdirAll(base, 0o755); err != nil {
				ld.why[c] = fmt.Sprintf("the cgroup v1 %s hierarchy is not writable (%v)", c, err)
				continue
			}
			ld.v1[c], ld.v1own[c] = base, v1[c]
		default:
			ld.why[c] = fmt.Sprintf("the cgroup v2 tree gives the daemon's subtree %s no %s controller (the daemon's cgroup %s would need it in its cgroup.subtree_control, which the kernel allows only to a cgroup holding no process itself, and the daemon is in it) and there is no cgroup v1 %s hierarchy",
				top, c, filepath.Dir(top), c)
		}
	}
	m.limits = ld
}

// LimitSupport says, for each of memory_max, cpu_max and pids_max, how it
// is enforced ("cgroup v2", "cgroup v1") or why it cannot be.
func (m *Manager) LimitSupport() map[string]string {
	out := map[string]string{}
	for _, c := range v1Controllers {
		key := limitKey(c)
		switch {
		case m.limits.v2[c]:
			out[key] = "cgroup v2"
		case m.limits.v1[c] != "":
			out[key] = "cgroup v1"
		default:
			out[key] = "unavailable: " + m.limits.why[c]
		}
	}
	return out
}

func limitKey(controller string) string {
	switch controller {
	case "memory":
		return "memory_max"
	case "cpu":
		return "cpu_max"
	}
	return "pids_max"
}

// SetLimits enforces l on server s (of session). Each limit goes into
// s's own directory where v2 has the controller, else into a fresh v1
// directory of the same name; an unenforceable limit fails the whole call
// (and leaves nothing behind), naming why.
func (m *Manager) SetLimits(s Server, session, proc string, l Limits) (Limited, error) {
	var out Limited
	fail := func(err error) (Limited, error) {
		RemoveV1(out.V1)
		return Limited{}, err
	}
	for _, c := range v1Controllers {
		if !l.wants(c) {
			continue
		}
		var files [][2]string
		switch c {
		case "memory":
			if m.limits.v2[c] {
				files = [][2]string{{"memory.max", strconv.FormatUint(l.MemoryMax, 10)}, {"memory.swap.max", "0"}}
			} else {
				files = [][2]string{{"memory.limit_in_bytes", strconv.FormatUint(l.MemoryMax, 10)}, {"memory.memsw.limit_in_bytes", strconv.FormatUint(l.MemoryMax, 10)}}
			}
		case "pids":
			files = [][2]string{{"pids.max", strconv.FormatInt(l.PidsMax, 10)}}
		case "cpu":
			quota := strconv.FormatInt(int64(l.CPUMax*100000), 10)
			if m.limits.v2[c] {
				files = [][2]string{{"cpu.max", quota + " 100000"}}
			} else {
				files = [][2]string{{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", quota}}
			}
		}
		dir := s.Path
		switch {
		case m.limits.v2[c]:
			if err := m.delegate(session, c); err != nil {
				return fail(err)
			}
		case m.limits.v1[c] != "":
			dir = filepath.Join(m.limits.v1[c], "s-"+session, proc)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fail(fmt.Errorf("create cgroup %s: %w", dir, err))
			}
			out.V1 = append(out.V1, dir)
		default:
			return fail(fmt.Errorf("%s cannot be enforced: %s", limitKey(c), m.limits.why[c]))
		}
		for _, f := range files {
			if m.limits.v1[c] != "" && c != "memory" {
				out.Later = append(out.Later, [2]string{filepath.Join(dir, f[0]), f[1]})
				continue
			}
			err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0)
			if err != nil && !(errors.Is(err, os.ErrNotExist) && (f[0] == "memory.memsw.limit_in_bytes" || f[0] == "memory.swap.max")) {
				return fail(fmt.Errorf("set %s %s in %s: %w", limitKey(c), f[1], dir, err))
			}
		}
	}
	return out, nil
}

func (l Limits) wants(controller string) bool {
	switch controller {
	case "memory":
		return l.MemoryMax > 0
	case "cpu":
		return l.CPUMax > 0
	}
	return l.PidsMax > 0
}

// delegate enables controller c for the servers of session: in the
// subtree_control of every directory from the daemon's subtree's top down
// to the session's (none of them holds a process itself).
func (m *Manager) delegate(session, c string) error {
	var dirs []string
	for d := filepath.Join(m.root, "s-"+session); ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == m.top || d == filepath.Dir(d) {
			break
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.WriteFile(filepath.Join(dirs[i], "cgroup.subtree_control"), []byte("+"+c), 0); err != nil {
			return fmt.Errorf("enable the %s controller in %s: %w", c, dirs[i], err)
		}
	}
	return nil
}

// Apply writes l's deferred limits (Limited.Later): after the server is in
// its v1 directories, before the caller reports it started.
func Apply(l Limited) error {
	for _, f := range l.Later {
		if err := os.WriteFile(f[0], []byte(f[1]), 0); err != nil {
			return fmt.Errorf("set %s to %s: %w", f[0], f[1], err)
		}
	}
	return nil
}

// EnterV1 moves pid into each of the v1 directories of its limits: a
// shim about to exec its server in its own place, which has forked
// nothing. (A server the daemon spawns starts in them: spawn's
// ThreadCgroups.)
func EnterV1(dirs []string, pid int) error {
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("move pid %d into cgroup %s: %w", pid, d, err)
		}
	}
	return nil
}

// KeepV1 moves pid out of a server's v1 directories into their
// instance's (two levels up: INSTANCE/s-SESSION/PROC), as Keep does for
// its v2 cgroup: a kept process outlives the server and its limits.
func KeepV1(dirs []string, pid int) error {
	var errs []error
	for _, d := range dirs {
		base := filepath.Dir(filepath.Dir(d))
		if err := os.WriteFile(filepath.Join(base, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			errs = append(errs, fmt.Errorf("move %d to %s: %w", pid, base, err))
		}
	}
	return errors.Join(errs...)
}

// V1Home is, for each of a server's v1 directories, the daemon's own
// directory in that hierarchy: where a thread that forked into them goes
// back to.
func (m *Manager) V1Home(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		for c, base := range m.limits.v1 {
			if strings.HasPrefix(d, base+"/") {
				out = append(out, m.limits.v1own[c])
			}
		}
	}
	return out
}

// RemoveV1 removes a server's v1 directories (and their session's once
// empty); one with processes left stays.
func RemoveV1(dirs []string) {
	for _, d := range dirs {
		os.Remove(d)
		os.Remove(filepath.Dir(d))
	}
}

// Hits reports which limits the kernel enforced on a server so far: the
// OOM killer in its memory cgroup (v2 memory.events, v1
// memory.oom_control: oom_kill), a fork refused at pids.max (pids.events:
// max). v2 is its v2 directory, v1 its v1 ones.
func Hits(v2 string, v1 []string) []string {
	var out []string
	dirs := append([]string{v2}, v1...)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		for _, f := range [][3]string{{"memory.events", "oom_kill", HitMemory}, {"memory.oom_control", "oom_kill", HitMemory}, {"pids.events", "max", HitPids}} {
			if n := counter(filepath.Join(d, f[0]), f[1]); n > 0 && !slices.Contains(out, f[2]) {
				out = append(out, f[2])
			}
		}
	}
	return out
}

// counter reads the value of key in a flat-keyed cgroup file ("key N").
func counter(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(key+" ")); ok {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}

// controllersOf reads a v2 directory's cgroup.controllers.
func controllersOf(dir string) map[string]bool {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	out := map[string]bool{}
	for _, c := range strings.Fields(string(b)) {
		out[c] = true
	}
	return out
}

// v1Mounts maps each v1 controller limits use to this process's own
// directory in its hierarchy (mount point plus own path, minus the
// mount's root), from /proc/self/mountinfo and /proc/self/cgroup.
func v1Mounts() map[string]string {
	own := map[string]string{} // controller → own path
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.SplitN(line, ":", 3)
			if len(f) != 3 || f[1] == "" {
				continue
			}
			for _, c := range strings.Split(f[1], ",") {
				own[c] = f[2]
			}
		}
	}
	out := map[string]string{}
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	defer mi.Close()
	sc := bufio.NewScanner(mi)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup ") {
			continue
		}
		fields, pf := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(pf) < 3 {
			continue
		}
		root, point := fields[3], fields[4]
		for _, opt := range strings.Split(pf[2], ",") {
			for _, c := range v1Controllers {
				if opt == c && own[c] != "" && out[c] == "" {
					rel := strings.TrimPrefix(own[c], root)
					if root == "/" {
						rel = own[c]
					}
					out[c] = filepath.Join(point, rel)
				}
			}
		}
	}
	return out
}

// AccountsMemory says the servers' v2 cgroups account memory
// (memory.current): the memory controller is delegated to them.
func (m *Manager) AccountsMemory() bool { return m.limits.v2["memory"] }

// V1Memory is, of a server's v1 directories, its memory one ("" when it
// has none).
func (m *Manager) V1Memory(dirs []string) string {
	base := m.limits.v1["memory"]
	for _, d := range dirs {
		if base != "" && strings.HasPrefix(d, base+"/") {
			return d
		}
	}
	return ""
}
