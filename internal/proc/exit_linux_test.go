package proc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestKernelVersion(t *testing.T) {
	for _, tt := range []struct {
		release      string
		major, minor int
		ok           bool
	}{
		{"6.18.44-fc-v782", 6, 18, true},
		{"6.15.0", 6, 15, true},
		{"5.10.0-28-amd64", 5, 10, true},
		{"6.15-rc1", 6, 15, true},
		{"6", 0, 0, false},
		{"x.y", 0, 0, false},
	} {
		major, minor, ok := kernelVersion(tt.release)
		if major != tt.major || minor != tt.minor || ok != tt.ok {
			t.Errorf("kernelVersion(%q) = %d, %d, %v; want %d, %d, %v", tt.release, major, minor, ok, tt.major, tt.minor, tt.ok)
		}
	}
}

// startHeld starts sh -c script after a line on its stdin, so its pidfd
// and token are taken while it surely runs.
func startHeld(t *testing.T, script string) (cmd *exec.Cmd, pidfd int, tok Token, release func()) {
	t.Helper()
	cmd = exec.Command("sh", "-c", "read x; "+script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pidfd, err = unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(pidfd) })
	if tok, err = TokenOf(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	return cmd, pidfd, tok, func() { in.Close() }
}

// The status of a process we did not wait for: from the zombie before its
// parent reaps it, from the pidfd after (where the kernel keeps it).
func TestExitStatus(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script string
		code   int
		sig    syscall.Signal
		reaped bool
	}{
		{"zombie, code", "exit 7", 7, 0, false},
		{"zombie, signal", "kill -TERM $$", 0, syscall.SIGTERM, false},
		{"reaped, code", "exit 5", 5, 0, true},
		{"reaped, signal", "kill -KILL $$", 0, syscall.SIGKILL, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.reaped && !ExitInfoSupported() {
				t.Skip("no PIDFD_INFO_EXIT on this kernel (Linux 6.15): a reaped process's status is gone")
			}
			cmd, pidfd, tok, release := startHeld(t, tt.script)
			release()
			if waitReadable(pidfd, 30*time.Second) == false {
				t.Fatal("pidfd not readable within 30s")
			}
			if tt.reaped {
				cmd.Wait()
			}
			ws, ok := ExitStatus(pidfd, cmd.Process.Pid, tok)
			if !tt.reaped {
				cmd.Wait()
			}
			if !ok {
				t.Fatal("no status")
			}
			if ws.Signaled() != (tt.sig != 0) || ws.Signaled() && ws.Signal() != tt.sig || !ws.Signaled() && ws.ExitStatus() != tt.code {
				t.Errorf("status %v (code %d, signal %v), want code %d, signal %v", ws, ws.ExitStatus(), ws.Signal(), tt.code, tt.sig)
			}
		})
	}
}

// A pidfd handed over is taken only for the pid and token it claims.
func TestHandleFromFd(t *testing.T) {
	if !ExitInfoSupported() {
		t.Skip("PIDFD_GET_INFO needs a newer kernel; daemons here never take pidfds from shims")
	}
	cmd, pidfd, tok, _ := startHeld(t, "exit 0")
	pid := cmd.Process.Pid
	dup := func() int {
		fd, err := unix.FcntlInt(uintptr(pidfd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) }) // HandleFromFd leaves a refused fd to its caller
		return fd
	}
	other := tok
	other.StartTicks++
	if _, _, err := HandleFromFd(dup(), os.Getpid(), tok); err == nil {
		t.Error("a pidfd of another pid was taken")
	}
	if _, _, err := HandleFromFd(dup(), pid, other); !errors.Is(err, ErrTokenMismatch) {
		t.Errorf("a pidfd with another token: err %v, want ErrTokenMismatch", err)
	}
	devnull, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(devnull)
	if _, _, err := HandleFromFd(devnull, pid, tok); err == nil {
		t.Error("/dev/null was taken for a pidfd")
	}
	h, got, err := HandleFromFd(dup(), pid, tok)
	if err != nil {
		t.Fatalf("its own pidfd: %v", err)
	}
	_ = h // closed with the dup by the cleanup
	if !got.Matches(tok) || got.PidfsInode == 0 && PidfdInode(pidfd) != 0 {
		t.Errorf("token %+v, want %+v with the pidfs inode", got, tok)
	}
}
