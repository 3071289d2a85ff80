package shutdown

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// syncBuffer is a log sink the cascade's goroutines may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUnkillableSaysWhereItWaits: a process that outlives its SIGKILL is
// reported as not killed, and the log says where in the kernel it waits.
// A task frozen by the cgroup v1 freezer cannot die until it is thawed:
// the one uninterruptible wait a test can make at will.
func TestUnkillableSaysWhereItWaits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: freezes a process in a cgroup v1 freezer")
	}
	freezer := "/sys/fs/cgroup/freezer"
	if _, err := os.Stat(filepath.Join(freezer, "tasks")); err != nil {
		t.Skip("no cgroup v1 freezer mounted at " + freezer)
	}
	dir, err := os.MkdirTemp(freezer, "shutdown-test-")
	if err != nil {
		t.Skipf("cannot make a freezer cgroup: %v", err)
	}
	// Cleanups run last first: thawed, then killed and reaped (start's
	// cleanup), then the cgroup removed, now empty.
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove the freezer cgroup: %v", err)
		}
	})
	c := start(t, exec.Command("sleep", "60"))
	thaw := func() { os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0) }
	if err := os.WriteFile(filepath.Join(dir, "tasks"), []byte(strconv.Itoa(c.pid)), 0); err != nil {
		t.Fatalf("move pid %d into %s: %v", c.pid, dir, err)
	}
	t.Cleanup(thaw)
	if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("FROZEN"), 0); err != nil {
		t.Fatalf("freeze %s: %v", dir, err)
	}
	deadline := time.Now().Add(eventWait)
	for {
		b, _ := os.ReadFile(filepath.Join(dir, "freezer.state"))
		if strings.TrimSpace(string(b)) == "FROZEN" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("freezer state %q, want FROZEN", b)
		}
		time.Sleep(10 * time.Millisecond)
	}

	var logs syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	out := (&Cascade{Log: log}).Stop(context.Background(), []Target{c.target("frozen")},
		Options{Grace: 50 * time.Millisecond, KillWait: 300 * time.Millisecond})
	if len(out) != 1 || out[0].Result != Unkillable || len(out[0].Left) != 1 || out[0].Left[0] != c.pid {
		t.Fatalf("outcome: got %+v, want %q leaving pid %d", out, Unkillable, c.pid)
	}
	got := logs.String()
	if !strings.Contains(got, "a process outlived its SIGKILL") || !strings.Contains(got, "pid="+strconv.Itoa(c.pid)) ||
		!strings.Contains(got, "signal=SIGKILL") {
		t.Fatalf("log lacks the stuck process, its pid or the SIGKILL sent:\n%s", got)
	}
	if strings.Contains(got, "waits_in= ") || strings.HasSuffix(strings.TrimSpace(got), "waits_in=") {
		t.Errorf("log names no kernel function the process waits in:\n%s", got)
	}
	t.Logf("%s", got)

	thaw()
	select {
	case <-c.reaped: // the SIGKILL pending since lands once thawed
	case <-time.After(eventWait):
		t.Errorf("pid %d not gone within %v of its thaw", c.pid, eventWait)
	}
}
