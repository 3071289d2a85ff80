package cgroup

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Limits bound one server's tree: its memory in bytes (memory_max), the
// CPUs its processes may use together (cpu_max: 1.5 is one and a half),
// and how many processes and threads it may have (pids_max). Zero leaves
// a resource unbounded.
type Limits struct {
	MemoryMax uint64
	CPUMax    float64
	PidsMax   int64
}

// IsZero says no limit is set.
func (l Limits) IsZero() bool { return l == Limits{} }

// None values: "none" for a limit lifts one set for all servers (the
// config's top level) for this server. They are never enforced: the
// daemon turns them into unbounded before it sets anything.
const (
	MemoryNone uint64  = math.MaxUint64
	CPUNone    float64 = -1
	PidsNone   int64   = -1
)

// isNone says a limit's text lifts it.
func isNone(s string) bool {
	s = strings.TrimSpace(s)
	return strings.EqualFold(s, "none") || strings.EqualFold(s, "max")
}

// Minimums below which a server cannot do anything useful: a limit under
// them is refused as a mistake, not enforced.
const (
	MinMemoryMax = 1 << 20
	MinCPUMax    = 0.01
)

// ParseMemoryMax reads a memory limit: bytes, or a number with a binary
// unit (K, M, G, T; KiB, MiB, GiB, TiB; 1.5G is 1.5 GiB), or none.
func ParseMemoryMax(s string) (uint64, error) {
	if isNone(s) {
		return MemoryNone, nil
	}
	t := strings.TrimSpace(s)
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}} {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = v, u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("memory_max %q: want bytes, a size such as 512M or 2G, or none", s)
	}
	n := uint64(f * mult)
	if n < MinMemoryMax {
		return 0, fmt.Errorf("memory_max %q is below 1M: no server runs in that", s)
	}
	return n, nil
}

// ParseCPUMax reads a CPU limit in CPUs ("1", "0.5", "2.5").
func ParseCPUMax(s string) (float64, error) {
	if isNone(s) {
		return CPUNone, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > 1<<20 {
		return 0, fmt.Errorf("cpu_max %q: want a number of CPUs such as 1 or 0.5, or none", s)
	}
	if f < MinCPUMax {
		return 0, fmt.Errorf("cpu_max %q is below 0.01 CPU: no server runs in that", s)
	}
	return f, nil
}

// ParsePidsMax reads a limit on processes and threads.
func ParsePidsMax(s string) (int64, error) {
	if isNone(s) {
		return PidsNone, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("pids_max %q: want a whole number of processes, 1 or more, or none", s)
	}
	return n, nil
}

// FormatMemory writes a memory limit back the way ParseMemoryMax reads it.
func FormatMemory(n uint64) string {
	if n == MemoryNone {
		return "none"
	}
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatUint(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatUint(n, 10)
}

// Hit names the limit the kernel enforced on a server, for records,
// events and metrics.
const (
	HitMemory = "memory_max" // the OOM killer killed a process of it
	HitPids   = "pids_max"   // a fork or clone failed at the cap
)

// Limited is where a server's limits live besides its own cgroup: the v1
// directories its processes must also enter, which RemoveV1 removes.
// Later are the v1 pids and cpu limits, written by Apply once the server
// is in its directories: the daemon thread that forks it there would
// otherwise count against its pids.max and be throttled by its cpu_max.
type Limited struct {
	V1    []string
	Later [][2]string // file, value
}
