package leanrun

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/spawn"
)

// InPlaceFd opens the pidfd a shim offers the daemon with a run, so that
// it may exec the server in its own place (api.RunRequest.InPlace), or
// returns -1 where it does not offer: a kernel that cannot tell the daemon
// the exit status of a process it did not fork, or a terminal on stdin or
// stdout (the server gets a process group of its own, and a background
// group that reads its terminal is stopped).
func InPlaceFd() int {
	// The server gets a group of its own (spawn.Exec): not where this
	// process already leads a group in its host's session (a shell's job,
	// a host's process_group), which others may share.
	pid := unix.Getpid()
	if sid, _ := unix.Getsid(0); unix.Getpgrp() == pid && sid != pid {
		return -1
	}
	for _, fd := range []int{0, 1} {
		if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
			return -1
		}
	}
	if !proc.ExitInfoSupported() {
		return -1
	}
	fd, err := proc.OpenSelfHandle()
	if err != nil {
		return -1
	}
	return fd
}

// cloexecAbove2 sets close-on-exec on every fd above 2: host-leaked fds
// must reach neither the server nor `supervisor run`. One close_range call
// (Linux 5.11; every kernel that execs in place has it), where listing
// /proc/self/fd took half a millisecond of each start.
func cloexecAbove2() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	_, err := proc.MarkInheritedCloexec()
	return err
}

// stderrOnto makes fd (the log writer's pipe) this process's stderr, for
// the server to inherit through its exec.
func stderrOnto(fd int) error {
	defer unix.Close(fd)
	if err := unix.Dup3(fd, 2, 0); err != nil {
		return os.NewSyscallError("dup3", err)
	}
	return nil
}

// Exec execs the server in this process's place, as the daemon ordered.
// It returns only if that fails, after telling the daemon why, with the
// status of a failed start.
//
// Stop signals are never caught before it: one that comes before the exec
// ends this process by its default action, as it would end a server
// started directly, and the daemon sees that exit.
func Exec(c *api.Client, ex *ExecOrder) (int, error) {
	err := func() error {
		if ex.Stderr >= 0 {
			if err := stderrOnto(ex.Stderr); err != nil {
				return &spawn.StartError{Name: ex.Argv[0], Code: CodeSupervisorError, Err: fmt.Errorf("stderr onto the log pipe: %w", err)}
			}
		}
		return spawn.Exec(spawn.Request{Argv: ex.Argv, Env: ex.Env, Dir: string(ex.Cwd),
			SessionID: ex.Session, ProcID: ex.ID, Instance: ex.Instance, Host: ex.Host, Sandbox: ex.Sandbox})
	}()
	code := CodeSupervisorError
	var se *spawn.StartError
	if errors.As(err, &se) {
		code = se.Code
	}
	// A daemon gone meanwhile learns no reason; it sees the process end
	// and records that.
	_ = c.Send(api.TypeExecFailed, &api.ExecFailed{Code: code, Message: err.Error()})
	c.Close()
	return code, err
}
