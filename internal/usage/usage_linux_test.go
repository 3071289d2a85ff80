package usage

import (
	"os/exec"
	"testing"
	"time"
)

// A real process that holds memory and burns CPU is measured from /proc.
func TestOfProcs(t *testing.T) {
	// python is not everywhere; sh's arithmetic loop burns CPU and a
	// 64-MiB variable is resident.
	cmd := exec.Command("sh", "-c", `x=$(head -c 67108864 /dev/zero | tr '\0' a); i=0; while :; do i=$((i+1)); done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	var s Sample
	for time.Now().Before(deadline) {
		s = Of(Target{PIDs: []int{cmd.Process.Pid}})
		if s.Memory > 64<<20 && s.CPU > 100*time.Millisecond {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s.MemorySource != SourceProcs || s.Procs != 1 || s.Memory <= 64<<20 || s.CPU <= 100*time.Millisecond {
		t.Fatalf("sample %+v: want over 64 MiB resident and CPU used, from the process", s)
	}
	if gone := Of(Target{PIDs: []int{cmd.Process.Pid + 1<<22}}); gone.MemorySource != "" || gone.Memory != 0 {
		t.Errorf("sample of no process %+v: want nothing measured", gone)
	}
}

func TestParseStat(t *testing.T) {
	// A command name with spaces and a ')' of its own; utime 150, stime 50,
	// cutime 30, cstime 20 ticks; rss 2048 pages.
	line := "4242 (we ird) name) S 1 4242 4242 0 -1 4194560 500 0 0 0 150 50 30 20 20 0 1 0 100 10485760 2048 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	cpu, rss, ok := parseStat([]byte(line))
	if !ok || cpu != 2500*time.Millisecond || rss != 2048 {
		t.Errorf("parseStat = %v, %d, %v; want 2.5s and 2048 pages", cpu, rss, ok)
	}
	if _, _, ok := parseStat([]byte("4242 (short) S 1 2")); ok {
		t.Error("a truncated line parsed")
	}
}
