//go:build linux

package main

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"
)

// Issue 29: Ctrl-C on `supervisor run` ends it as it ends a server started
// directly: 130 (death by SIGINT), on both paths. On the shim path the
// server runs in a process group of its own that the terminal's SIGINT
// never reaches, so the shim hands it on as SIGINT, not as the cascade's
// SIGTERM (which made it 143).
func TestCtrlCOnRunExits130(t *testing.T) {
	t.Parallel()
	for _, inPlace := range []string{"auto", "off"} {
		t.Run("in-place="+inPlace, func(t *testing.T) {
			in := newInstance(t)
			in.env = append(slices.Clone(in.env), "SUPERVISOR_IN_PLACE="+inPlace)
			cmd := in.command("run", "--session", "tty", "--name", "fg", "--", "sleep", "60")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group: the terminal's foreground
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			t.Cleanup(func() {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			})
			waitCond(t, func() error {
				ps, err := in.processes(false) // no daemon until run starts one
				if err != nil {
					return err
				}
				for _, p := range ps {
					if p.Name == "fg" && p.PID > 0 {
						return nil
					}
				}
				return fmt.Errorf("fg is not running")
			})
			syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // Ctrl-C
			select {
			case <-done:
			case <-time.After(wait):
				t.Fatalf("run still running %v after Ctrl-C", wait)
			}
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !(ws.Exited() && ws.ExitStatus() == 130) && !(ws.Signaled() && ws.Signal() == syscall.SIGINT) {
				t.Fatalf("after Ctrl-C run ended %v; want 130 or death by SIGINT, as a server started directly", cmd.ProcessState)
			}
		})
	}
}
