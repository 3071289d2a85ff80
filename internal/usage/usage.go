// Package usage measures what a supervised server costs now: the memory
// its processes hold, the CPU time they used and how many there are. It
// reads the server's cgroup where the kernel accounts for it there (one
// file per figure, whatever the number of processes), else sums the
// server's processes from the OS process table.
//
// It only samples; CPU percentages come from two samples (Percent), so a
// caller that refreshes keeps the previous one.
package usage

import (
	"fmt"
	"time"
)

// Source says where a sample's figures come from.
const (
	SourceCgroup = "cgroup" // the cgroup's own accounting
	SourceProcs  = "procs"  // summed over the processes (resident memory)
)

// Sample is one server's use at a moment.
type Sample struct {
	At time.Time
	// Memory is in bytes: the cgroup's charge (memory.current), or the
	// summed resident memory of the processes, which counts pages they
	// share once per process.
	Memory uint64
	// CPU is the CPU time used: the cgroup's (exited processes included)
	// where its memory comes from the cgroup too, else the live processes'
	// own and that of the children they reaped.
	CPU   time.Duration
	Procs int
	// MemorySource is SourceCgroup or SourceProcs; "" when nothing could
	// be read (the server is gone, or this OS is not measured).
	MemorySource string
}

// Target is what to measure: the server's cgroup v2 directory ("" when
// it has none) and, for what the cgroup does not account, the PIDs to sum
// (the cgroup's own processes are used when it has a cgroup).
type Target struct {
	Cgroup string
	// CgroupMemory says the v2 cgroup accounts memory (memory.current):
	// the memory controller is enabled for it.
	CgroupMemory bool
	// V1Memory is the server's cgroup v1 memory directory, where it has
	// one (a memory_max on a hybrid system): memory.usage_in_bytes.
	V1Memory string
	PIDs     []int
}

// Percent is the CPU used between prev and s as a percentage of one CPU
// (200 is two CPUs busy). Without a usable prev (none, or from another
// run of the process) it is the average since started.
func Percent(prev, s Sample, started time.Time) float64 {
	if !prev.At.IsZero() && s.At.Sub(prev.At) > 0 && s.CPU >= prev.CPU {
		return 100 * float64(s.CPU-prev.CPU) / float64(s.At.Sub(prev.At))
	}
	if el := s.At.Sub(started); el > 0 {
		return 100 * float64(s.CPU) / float64(el)
	}
	return 0
}

// Bytes is a size in binary units, three significant digits at most
// ("812K", "61.4M", "2.10G").
func Bytes(n uint64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f%c", v, units[i])
	case v >= 10:
		return fmt.Sprintf("%.1f%c", v, units[i])
	}
	return fmt.Sprintf("%.2f%c", v, units[i])
}
