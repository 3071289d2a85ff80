package usage

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// userHZ is the unit of /proc/PID/stat's CPU times: fixed at 100 for
// user space whatever the kernel's own tick.
const userHZ = 100

// Of measures t now: two or three reads for a server with a cgroup (its
// processes, its CPU, its memory when the cgroup accounts it, else one per
// process).
func Of(t Target) Sample {
	s := Sample{At: time.Now()}
	pids := t.PIDs
	cpuDone := false
	if t.Cgroup != "" {
		// The server's own cgroup.procs: servers get no cgroups below
		// theirs (a walk of the directory would cost a read of its ~20
		// files' names per server).
		if procs, ok := readPids(filepath.Join(t.Cgroup, "cgroup.procs")); ok {
			pids = procs
		}
		if t.CgroupMemory {
			if v, ok := readUint(filepath.Join(t.Cgroup, "memory.current")); ok {
				s.Memory, s.MemorySource = v, SourceCgroup
			}
		}
		// cpu.stat's usage_usec is there without the cpu controller.
		if us, ok := cpuStat(filepath.Join(t.Cgroup, "cpu.stat")); ok {
			s.CPU, cpuDone = us, true
		}
	}
	if t.V1Memory != "" && s.MemorySource == "" {
		if v, ok := readUint(filepath.Join(t.V1Memory, "memory.usage_in_bytes")); ok {
			s.Memory, s.MemorySource = v, SourceCgroup
		}
	}
	s.Procs = len(pids)
	page := uint64(os.Getpagesize())
	measured := false
	for _, pid := range pids {
		if s.MemorySource == "" {
			if rss, ok := statmResident(pid); ok {
				s.Memory += rss * page
				measured = true
			}
		}
		if !cpuDone {
			if c, ok := procCPU(pid); ok {
				s.CPU += c
			}
		}
	}
	if measured {
		s.MemorySource = SourceProcs
	}
	return s
}

// readPids reads a cgroup.procs file.
func readPids(path string) ([]int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	var out []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, pid)
		}
	}
	return out, true
}

func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	return v, err == nil
}

// cpuStat reads usage_usec from a cgroup v2 cpu.stat.
func cpuStat(path string) (time.Duration, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("usage_usec ")); ok {
			us, err := strconv.ParseUint(string(v), 10, 64)
			return time.Duration(us) * time.Microsecond, err == nil
		}
	}
	return 0, false
}

// statmResident is a process's resident pages (/proc/PID/statm's second
// field).
func statmResident(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(f[1]), 10, 64)
	return v, err == nil
}

// procCPU is a process's user and system time (/proc/PID/stat fields 14
// and 15, counted after the command name, which may hold spaces).
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 { // state is f[0]; utime f[11], stime f[12]
		return 0, false
	}
	u, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	st, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+st) * time.Second / userHZ, true
}
