//go:build linux

package shutdown

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// populated decides whether a target's cgroup still holds a process once
// none of its known members is alive. A server that has exited (on EOF,
// say) leaves its cgroup counted as populated for a moment: its leader is
// listed as a zombie while its other threads finish exiting, then nothing
// is listed (the kernel skips a dying leader without live threads) until
// the last thread has left. Both are an ended tree: taking them for a live
// one carried a server that had exited on EOF on to SIGTERM and labelled
// its stop so (TestHostKillOutcomeIsTheTrueOne, under load: 6 of 20 runs
// failed before). The kernel's moments are too short to hit on purpose, so
// the cgroup files here are plain files with what the kernel shows then.
func TestPopulatedTakesAnEndedTreeForEnded(t *testing.T) {
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zombie.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if info, err := proc.Stat(zombie.Process.Pid); err == nil && info.State == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("true never became a zombie")
		}
		time.Sleep(5 * time.Millisecond)
	}
	self := os.Getpid()
	for _, tc := range []struct {
		name      string
		populated string // cgroup.events' line
		procs     []int
		member    bool // a member of the target is known alive
		want      bool
	}{
		{"empty cgroup", "populated 0", nil, false, false},
		{"populated, nothing listed: a leader dying without live threads", "populated 1", nil, false, false},
		{"populated, only a zombie listed", "populated 1", []int{zombie.Process.Pid}, false, false},
		{"populated, a live process listed", "populated 1", []int{self}, false, true},
		{"populated, a zombie and a live process", "populated 1", []int{zombie.Process.Pid, self}, false, true},
		{"a member alive: populated without a read", "populated 1", nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name, text string) {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("cgroup.events", tc.populated+"\nfrozen 0\n")
			procs := ""
			for _, pid := range tc.procs {
				procs += strconv.Itoa(pid) + "\n"
			}
			write("cgroup.procs", procs)
			r := newRun(&Cascade{}, []Target{{ID: "p-1", PID: self, Cgroup: dir}}, Options{}, hclog.NewNullLogger())
			defer r.closeAll()
			if r.events[0] == nil {
				t.Fatal("cgroup.events not opened")
			}
			if tc.member {
				tok, err := proc.TokenOf(self)
				if err != nil {
					t.Fatal(err)
				}
				h, err := proc.OpenHandle(self, tok)
				if err != nil {
					t.Fatal(err)
				}
				r.members[self] = &member{pid: self, h: h, target: 0, role: RoleLeader}
			}
			if got := r.populated(0); got != tc.want {
				t.Errorf("populated = %v, want %v", got, tc.want)
			}
		})
	}
}
