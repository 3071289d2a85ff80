//go:build linux

package shutdown

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// TestForeignGroupIsNotTaken: a target that sits in a group it does not
// lead (an adopted process started from a shell) is stopped alone; the
// group's other members — the shell, its other jobs — are left alone. The
// group lives in a session of its own so a regression cannot reach the
// test runner's.
func TestForeignGroupIsNotTaken(t *testing.T) {
	sh := exec.Command("/bin/sh", "-c", "sleep 1000 & sleep 1000 & wait")
	sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { sh.Wait(); close(reaped) }()
	t.Cleanup(func() { syscall.Kill(-sh.Process.Pid, syscall.SIGKILL); <-reaped })

	var kids []int
	deadline := time.Now().Add(10 * time.Second)
	for len(kids) < 2 && time.Now().Before(deadline) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(sh.Process.Pid) + "/task/" + strconv.Itoa(sh.Process.Pid) + "/children")
		kids = kids[:0]
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			kids = append(kids, pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(kids) < 2 {
		t.Fatalf("shell children: %v, want 2", kids)
	}
	target, bystander := kids[1], kids[0]
	ttok, _ := proc.TokenOf(target)
	btok, _ := proc.TokenOf(bystander)
	stok, _ := proc.TokenOf(sh.Process.Pid)

	out := (&Cascade{}).Stop(context.Background(),
		[]Target{{ID: "adopted", PID: target, PGID: sh.Process.Pid, Token: ttok}}, Options{Grace: time.Second})
	if out[0].Result != ExitedOnSIGTERM || len(out[0].PIDs) != 1 {
		t.Fatalf("outcome %s, want the target alone, exited on SIGTERM", out[0])
	}
	if proc.Verify(bystander, btok) != nil || proc.Verify(sh.Process.Pid, stok) != nil {
		t.Fatal("the cascade took down the group the target only sat in")
	}
	if proc.Verify(target, ttok) == nil {
		t.Fatal("the target is still alive")
	}
}
