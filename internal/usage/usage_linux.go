package usage

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of /proc/PID/stat's CPU times: fixed at 100 for
// user space whatever the kernel's own tick.
const userHZ = 100

// Of measures t now, in as few reads as it can (syscalls cost tens of µs
// each on a VM, and a listing samples thousands of servers): the cgroup's
// process list, then either the cgroup's memory and CPU files, or, where
// the cgroup accounts no memory, each process's /proc/PID/stat, which
// holds both its resident memory and its CPU time.
func Of(t Target) Sample {
	s := Sample{At: time.Now()}
	var buf [4096]byte
	pids := t.PIDs
	if t.Cgroup != "" {
		// The server's own cgroup.procs: servers get no cgroups below
		// theirs.
		if procs, ok := readPids(filepath.Join(t.Cgroup, "cgroup.procs"), buf[:]); ok {
			pids = procs
		}
	}
	s.Procs = len(pids)
	memFile := ""
	switch {
	case t.Cgroup != "" && t.CgroupMemory:
		memFile = filepath.Join(t.Cgroup, "memory.current")
	case t.V1Memory != "":
		memFile = filepath.Join(t.V1Memory, "memory.usage_in_bytes")
	}
	if memFile != "" {
		if b, ok := readSmall(memFile, buf[:]); ok {
			if v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64); err == nil {
				s.Memory, s.MemorySource = v, SourceCgroup
			}
		}
	}
	if s.MemorySource == SourceCgroup && t.Cgroup != "" {
		// cpu.stat's usage_usec is there without the cpu controller, and
		// counts exited processes too.
		if b, ok := readSmall(filepath.Join(t.Cgroup, "cpu.stat"), buf[:]); ok {
			if us, ok := usageUsec(b); ok {
				s.CPU = us
				return s
			}
		}
	}
	page := uint64(os.Getpagesize())
	measured := false
	for _, pid := range pids {
		b, ok := readSmall("/proc/"+strconv.Itoa(pid)+"/stat", buf[:])
		if !ok {
			continue
		}
		cpu, rss, ok := parseStat(b)
		if !ok {
			continue
		}
		s.CPU += cpu
		if s.MemorySource != SourceCgroup {
			s.Memory += rss * page
			measured = true
		}
	}
	if measured {
		s.MemorySource = SourceProcs
	}
	return s
}

// readSmall reads a small kernel file in one read into buf; false when it
// cannot be read or does not fit (the caller then has nothing from it).
func readSmall(path string, buf []byte) ([]byte, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil || n < 0 || n == len(buf) {
		return nil, false
	}
	return buf[:n], true
}

// readPids reads a cgroup.procs file: in one read where it fits buf, else
// whole (a server with hundreds of processes).
func readPids(path string, buf []byte) ([]int, bool) {
	b, ok := readSmall(path, buf)
	if !ok {
		var err error
		if b, err = os.ReadFile(path); err != nil {
			return nil, false
		}
	}
	out := make([]int, 0, 1)
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, pid)
		}
	}
	return out, true
}

// usageUsec reads usage_usec from a cgroup v2 cpu.stat.
func usageUsec(b []byte) (time.Duration, bool) {
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("usage_usec ")); ok {
			us, err := strconv.ParseUint(string(v), 10, 64)
			return time.Duration(us) * time.Microsecond, err == nil
		}
	}
	return 0, false
}

// parseStat takes from /proc/PID/stat the process's CPU time (its own
// user and system time, and that of the children it reaped: fields 14 to
// 17) and its resident pages (field 24), counted after the command name,
// which may hold spaces.
func parseStat(b []byte) (time.Duration, uint64, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 22 { // state is f[0] (field 3): utime f[11] ... rss f[21]
		return 0, 0, false
	}
	var ticks uint64
	for _, x := range f[11:15] {
		v, err := strconv.ParseUint(string(x), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		ticks += v
	}
	rss, err := strconv.ParseInt(string(f[21]), 10, 64)
	if err != nil || rss < 0 {
		return 0, 0, false
	}
	return time.Duration(ticks) * time.Second / userHZ, uint64(rss), true
}
