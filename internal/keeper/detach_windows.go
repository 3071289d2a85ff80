package keeper

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// StartDetached starts a keeper or its daemon in a process group of its own (a
// CTRL_BREAK meant for a host never reaches it) with a hidden console of
// its own (CTRL_BREAK to its servers' groups needs one: DETACHED_PROCESS
// would leave it without), and outside the shim's job where the job allows
// it: a host that closes its job must not take the daemon of every other
// session along. A job that forbids breakaway makes the first try fail;
// the daemon then starts inside it, which is all such a host permits.
func StartDetached(cmd *exec.Cmd) error {
	const flags = windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_NO_WINDOW
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: flags | windows.CREATE_BREAKAWAY_FROM_JOB}
	if err := cmd.Start(); err == nil {
		return nil
	}
	retry := exec.Command(cmd.Path, cmd.Args[1:]...)
	retry.Env, retry.Dir = cmd.Env, cmd.Dir
	retry.Stdin, retry.Stdout, retry.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	retry.SysProcAttr = &syscall.SysProcAttr{CreationFlags: flags}
	*cmd = *retry
	return cmd.Start()
}

// DetachedAttr is StartDetached's for os.StartProcess, without the
// breakaway (a job that forbids it would fail the start).
func DetachedAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_NO_WINDOW}
}
