//go:build unix

package spawn

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// Start resolves and starts req in its own process group, with the marker
// environment, registering it with the reaper before it can be reaped.
func Start(r *Reaper, req Request) (Started, error) {
	defer func() {
		for _, f := range req.Stdio {
			if f != nil {
				f.Close()
			}
		}
	}()
	if len(req.Argv) == 0 {
		return Started{}, &StartError{Code: 125, Err: errors.New("empty argv")}
	}
	// Before Resolve: a relative command in a missing directory would
	// otherwise read as "command not found".
	if err := CheckDir(req.Dir); err != nil {
		return Started{}, &StartError{Name: req.Argv[0], Code: 125, Err: err}
	}
	pathEnv, ok := proc.EnvValue(req.Env, "PATH")
	if !ok {
		pathEnv = defaultPath // what execvp uses when PATH is unset
	}
	path, err := Resolve(req.Argv[0], pathEnv, req.Dir)
	if err != nil {
		return Started{}, err
	}
	files := make([]uintptr, 3)
	for i, f := range req.Stdio {
		if f == nil {
			return Started{}, &StartError{Name: req.Argv[0], Code: 125, Err: fmt.Errorf("stdio fd %d missing", i)}
		}
		files[i] = f.Fd()
	}
	attr := &syscall.ProcAttr{
		Dir:   req.Dir,
		Env:   markedEnv(req),
		Files: files,
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	if req.Foreground {
		attr.Sys.Foreground = true
		attr.Sys.Ctty = 0
	}
	if err := platformAttr(attr.Sys, req); err != nil {
		return Started{}, &StartError{Name: req.Argv[0], Code: 125, Err: err}
	}
	execPath, argv := path, req.Argv
	if req.Sandbox != nil {
		// On macOS its sandbox wraps the command; on Linux this changes
		// nothing, and the forking thread confines itself (confiner).
		execPath, argv = sandbox.Wrap(path, req.Argv, *req.Sandbox)
	}
	var tok proc.Token
	var tokErr, limErr error
	pid, exit, err := r.Fork(func() (int, error) {
		return forkIn(req.ThreadCgroups, req.ThreadHome, confiner(req), func() (int, error) { return syscall.ForkExec(execPath, argv, attr) })
	}, func(pid int) {
		// Still unreaped here, so the pid is ours: what is done to it by
		// pid (its limits, a kill) cannot reach a stranger on a recycled
		// pid.
		tok, tokErr = proc.TokenOf(pid)
		if tokErr == nil && req.Sandbox != nil {
			// A process's limits, not a thread's: set from here, at once.
			limErr = sandbox.LimitResources(pid, *req.Sandbox)
		}
		if tokErr != nil || limErr != nil {
			// Refuse to track a process we could not identify rather than
			// record a bad token, and never leave a sandboxed one running
			// with less than its policy.
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	if err != nil {
		var se *StartError
		if errors.As(err, &se) { // the fork's own, not the exec's errno
			se.Name = req.Argv[0]
			return Started{}, se
		}
		return Started{}, execError(req.Argv[0], req.Dir, err)
	}
	if tokErr != nil {
		return Started{}, &StartError{Name: req.Argv[0], Code: 125, Err: fmt.Errorf("read creation token of %d: %w", pid, tokErr)}
	}
	if limErr != nil {
		return Started{}, &StartError{Name: req.Argv[0], Code: 125, Err: limErr}
	}
	return Started{PID: pid, PGID: pid, Token: tok, Path: path, Exit: exit}, nil
}

// execError classifies a ForkExec failure. The child's chdir and execve
// report through one errno, so a directory that vanished (or lost its x
// bit) after CheckDir gives the ENOENT or EACCES of a broken command: the
// directory is checked again before the errno is read as the command's.
func execError(name, dir string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if errno == syscall.ENOENT || errno == syscall.EACCES || errno == syscall.ENOTDIR || errno == syscall.ELOOP {
			if derr := CheckDir(dir); derr != nil {
				return &StartError{Name: name, Code: 125, Err: derr}
			}
		}
		switch errno {
		case syscall.ENOENT:
			// The file was found (Resolve checked), so what is missing is
			// the interpreter its #! line names; a shell says 126 too.
			return &StartError{Name: name, Code: CodeNotExecutable,
				Err: fmt.Errorf("bad interpreter: the program its #! line names does not exist: %w", err)}
		case syscall.EACCES, syscall.ENOEXEC, syscall.EISDIR, syscall.EPERM:
			return &StartError{Name: name, Code: CodeNotExecutable, Err: err}
		}
	}
	return &StartError{Name: name, Code: 125, Err: err}
}

const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// PathOf is the search path a command in env is looked up in: its PATH, or
// execvp's default where it has none.
func PathOf(env []string) string {
	if p, ok := proc.EnvValue(env, "PATH"); ok {
		return p
	}
	return defaultPath
}

// Exec replaces the calling process with req's command (the shim becoming
// its server): markers set as Start sets them, in a process group of its
// own, in req.Dir. Stdio is whatever the caller has on 0, 1 and 2;
// req.Stdio, CgroupFD, Pdeathsig and Foreground are not used. It returns
// only on failure, with the *StartError Start would give.
func Exec(req Request) error {
	if len(req.Argv) == 0 {
		return &StartError{Code: 125, Err: errors.New("empty argv")}
	}
	if err := CheckDir(req.Dir); err != nil {
		return &StartError{Name: req.Argv[0], Code: 125, Err: err}
	}
	path, err := Resolve(req.Argv[0], PathOf(req.Env), req.Dir)
	if err != nil {
		return err
	}
	// A session and group of its own, with no controlling terminal, as a
	// server the daemon starts has: the cascade signals the group, and no
	// terminal stops it for reading from a background group. A session
	// leader (a host that setsid its child) has both already; a group
	// leader in its host's session could share its group with others, and
	// the shim does not offer to exec then.
	pid := syscall.Getpid()
	switch sid, _ := unix.Getsid(0); {
	case sid == pid:
	case syscall.Getpgrp() == pid:
		return &StartError{Name: req.Argv[0], Code: 125, Err: errors.New("this process leads a process group in its host's session, which others may share: it cannot have a group of its own")}
	default:
		if _, err := syscall.Setsid(); err != nil {
			return &StartError{Name: req.Argv[0], Code: 125, Err: fmt.Errorf("setsid: %w", err)}
		}
	}
	if err := syscall.Chdir(req.Dir); err != nil {
		return &StartError{Name: req.Argv[0], Code: 125, Err: fmt.Errorf("chdir %s: %w", req.Dir, err)}
	}
	if req.Sandbox != nil {
		if err := sandbox.LimitResources(0, *req.Sandbox); err != nil {
			return &StartError{Name: req.Argv[0], Code: 125, Err: err}
		}
	}
	if confine := confiner(req); confine != nil {
		// The exec is this thread's: confined, it gives the server its
		// sandbox. A failed exec leaves it confined, which costs nothing:
		// the process only reports the failure and exits.
		runtime.LockOSThread()
		if err := confine(); err != nil {
			return &StartError{Name: req.Argv[0], Code: 125, Err: err}
		}
	}
	execPath, argv := path, req.Argv
	if req.Sandbox != nil {
		execPath, argv = sandbox.Wrap(path, req.Argv, *req.Sandbox)
	}
	return execError(req.Argv[0], req.Dir, syscall.Exec(execPath, argv, markedEnv(req)))
}
