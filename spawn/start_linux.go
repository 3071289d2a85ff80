package spawn

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// platformAttr sets what only Linux has: the parent-death signal and the
// clone into a cgroup.
func platformAttr(sys *syscall.SysProcAttr, req Request) error {
	sys.Pdeathsig = req.Pdeathsig
	if req.CgroupFD > 0 {
		sys.UseCgroupFD = true
		sys.CgroupFD = req.CgroupFD
	}
	return nil
}

// forkIn runs fork on a thread moved into the cgroup v1 directories dirs
// (their tasks files take one thread), so the child it forks starts in
// them, and moves the thread back to home after. With confine, the thread
// confines itself first (a sandbox), so the child is confined from its
// first instruction. The thread is a fresh goroutine's, locked to it: one
// that cannot go back (or is confined) stays locked, and Go ends it with
// the goroutine at once, so no daemon thread lives on inside a server's
// cgroups or sandbox.
//
// Never the main thread: Go cannot end it, and it is the process as
// /proc and the kernel's checks see it. Confined, it would be in the
// server's own sandbox, which lets the server read the daemon's
// environment and memory and signal it (seen in CI: a sandboxed server
// read its daemon's /proc/PID/environ).
func forkIn(dirs, home []string, confine func() error, fork func() (int, error)) (int, error) {
	if len(dirs) == 0 && confine == nil {
		return fork()
	}
	done := make(chan forkResult, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Held here, the main thread runs nothing else: the work goes
			// to another thread, and this one is handed back after.
			inner := make(chan forkResult, 1)
			go forkOnThread(dirs, home, confine, fork, inner)
			r := <-inner
			runtime.UnlockOSThread()
			done <- r
			return
		}
		forkOnThread(dirs, home, confine, fork, done)
	}()
	r := <-done
	return r.pid, r.err
}

type forkResult struct {
	pid int
	err error
}

// forkOnThread is forkIn's work on a thread of its own, never the main
// one: forkIn holds that one, locked and waiting, while this runs.
func forkOnThread(dirs, home []string, confine func() error, fork func() (int, error), done chan<- forkResult) {
	runtime.LockOSThread()
	tid := unix.Gettid()
	moveAll := func(to []string) error {
		for _, d := range to {
			if err := os.WriteFile(filepath.Join(d, "tasks"), []byte(strconv.Itoa(tid)), 0); err != nil {
				return fmt.Errorf("move the forking thread into cgroup %s: %w", d, err)
			}
		}
		return nil
	}
	var r forkResult
	if err := moveAll(dirs); err != nil {
		r.err = &StartError{Code: 125, Err: fmt.Errorf("start inside the limits' cgroups: %w", err)}
	} else if confine != nil {
		if err := confine(); err != nil {
			r.err = &StartError{Code: 125, Err: err}
		}
	}
	if r.err == nil {
		r.pid, r.err = fork()
	}
	if confine == nil && moveAll(home) == nil {
		runtime.UnlockOSThread()
	}
	done <- r
}

// confiner is what confines req's process to its sandbox and network
// namespace, nil for neither: the thread that forks or execs it confines
// itself (Landlock).
func confiner(req Request) func() error {
	if req.Sandbox == nil && req.Netns == nil {
		return nil
	}
	rules, ns := req.Sandbox, req.Netns
	return func() error {
		// Before Confine, which drops the capability setns needs.
		if ns != nil {
			if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("cannot sandbox: enter the server's network namespace: %w", err)
			}
		}
		if rules == nil {
			return nil
		}
		return sandbox.Confine(*rules)
	}
}
