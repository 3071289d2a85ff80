package proc

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Values of struct extern_proc's p_stat and p_flag from <sys/proc.h>,
// which x/sys/unix does not export.
const (
	darwinSStop  = 4      // SSTOP: stopped by a signal or a debugger
	darwinSZomb  = 5      // SZOMB: exited, waiting for its parent to reap it
	darwinPWExit = 0x2000 // P_WEXIT: working on exiting
)

// bootID prefers kern.bootsessionuuid, a UUID drawn afresh at every boot:
// the exact analogue of Linux's boot_id. kern.boottime is only the fallback
// for systems without it, because it is not stable within one boot: XNU
// moves it by the step whenever the calendar clock is set
// (clock_set_calendar_microtime), so tokens recorded before an NTP step
// would stop matching after a daemon restart. That fails safe (a mismatched
// token is never signalled) but loses re-adoption.
var bootID = sync.OnceValues(func() (string, error) {
	if id, err := unix.Sysctl("kern.bootsessionuuid"); err == nil && id != "" {
		return id, nil
	}
	tv, err := unix.SysctlTimeval("kern.boottime")
	if err != nil {
		return "", fmt.Errorf("read boot id: sysctl kern.boottime: %w", err)
	}
	return fmt.Sprintf("%d.%06d", tv.Sec, tv.Usec), nil
})

// BootID returns an identifier of the current boot.
func BootID() (string, error) { return bootID() }

// Stat reads the kernel's kinfo_proc for pid (sysctl kern.proc.pid).
// Zombies are listed until reaped. State is 'Z' for a zombie, 'X' for a
// process that has begun exiting (P_WEXIT: it will never run user code
// again, and its kqueue NOTE_EXIT may already have been posted), 'T' when
// stopped and 'R' otherwise: macOS keeps sleeping per thread, not per
// process, so p_stat says SRUN for nearly every live process.
func Stat(pid int) (Info, error) {
	if pid <= 0 {
		return Info{}, fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.pid", pid)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return Info{}, fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return Info{}, fmt.Errorf("sysctl kern.proc.pid.%d: %w", pid, err)
	}
	// An unknown pid gives an empty answer, not an error.
	if len(kps) == 0 || int(kps[0].Proc.P_pid) != pid {
		return Info{}, fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	return infoOf(&kps[0])
}

// infoOf converts one kinfo_proc.
func infoOf(kp *unix.KinfoProc) (Info, error) {
	boot, err := BootID()
	if err != nil {
		return Info{}, err
	}
	p := &kp.Proc
	info := Info{
		PID:   int(p.P_pid),
		PPID:  int(kp.Eproc.Ppid),
		PGID:  int(kp.Eproc.Pgid),
		State: stateOf(p),
		Comm:  cString(p.P_comm[:]),
		UID:   int(kp.Eproc.Ucred.Uid),
		Token: Token{BootID: boot, StartTicks: startMicros(p)},
	}
	// kinfo_proc carries only a kernel pointer to the session; getsid is
	// the one way to its number, and it may be refused or race an exit.
	if sid, err := unix.Getsid(info.PID); err == nil {
		info.SID = sid
	}
	return info, nil
}

func stateOf(p *unix.ExternProc) byte {
	switch {
	case p.P_stat == darwinSZomb:
		return 'Z'
	case p.P_flag&darwinPWExit != 0:
		return 'X'
	case p.P_stat == darwinSStop:
		return 'T'
	}
	return 'R'
}

// startMicros is the creation token's time: p_starttime, the wall-clock
// time of the fork in microseconds since the epoch. It is stored once at
// fork, so later clock steps do not change it.
func startMicros(p *unix.ExternProc) uint64 {
	return uint64(p.P_starttime.Sec)*1_000_000 + uint64(p.P_starttime.Usec)
}

// cString returns b up to its first NUL.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Scan reads every process in the kernel's table (sysctl kern.proc.all),
// zombies included. The kernel itself (pid 0, kernel_task) is left out, as
// Stat refuses pid 0.
func Scan() ([]Info, error) {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, fmt.Errorf("sysctl kern.proc.all: %w", err)
	}
	out := make([]Info, 0, len(kps))
	for i := range kps {
		if kps[i].Proc.P_pid <= 0 {
			continue
		}
		info, err := infoOf(&kps[i])
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// TokenOf returns the creation token of the process now holding pid. macOS
// has no pidfs inode: the token is the boot id plus the start time in
// microseconds, fine enough that a recycled PID does not collide with it.
func TokenOf(pid int) (Token, error) {
	info, err := Stat(pid)
	if err != nil {
		return Token{}, err
	}
	return info.Token, nil
}

// Verify returns nil when pid is alive (not a zombie, not exiting) and
// carries tok.
func Verify(pid int, tok Token) error {
	h, err := OpenHandle(pid, tok)
	if err != nil {
		return err
	}
	defer h.Close()
	info, err := Stat(pid)
	if err != nil {
		return err
	}
	switch info.State {
	case 'Z':
		return fmt.Errorf("pid %d is a zombie: %w", pid, ErrGone)
	case 'X':
		return fmt.Errorf("pid %d is exiting: %w", pid, ErrGone)
	}
	return nil
}

// Cmdline returns the argv of pid, from sysctl kern.procargs2 (empty for
// zombies, whose arguments are gone, as on Linux). Another user's process
// gives an error: only root may read its arguments.
func Cmdline(pid int) ([]string, error) {
	argv, _, err := procArgs(pid)
	return argv, err
}

// Environ returns the environment pid was started with, as KEY=VALUE
// strings, from sysctl kern.procargs2; see Cmdline.
func Environ(pid int) ([]string, error) {
	_, env, err := procArgs(pid)
	return env, err
}

// procArgs reads and parses kern.procargs2 for pid. The sysctl gives the
// same EINVAL for a pid that is gone, a zombie and a process of another
// user, so a failure is told apart by looking at the process.
func procArgs(pid int) (argv, env []string, err error) {
	if pid <= 0 {
		return nil, nil, fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	b, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		info, serr := Stat(pid)
		switch {
		case serr != nil:
			return nil, nil, serr
		case info.State == 'Z' || info.State == 'X':
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("sysctl kern.procargs2.%d: %w", pid, err)
	}
	argv, env, err = parseProcArgs(b)
	if err != nil {
		return nil, nil, fmt.Errorf("parse kern.procargs2.%d: %w", pid, err)
	}
	return argv, env, nil
}

// SetChildSubreaper fails on macOS: there is no child subreaper, and
// orphaned descendants are re-parented to launchd (pid 1). The daemon
// then relies on process groups and markers to find them.
func SetChildSubreaper() error {
	return fmt.Errorf("child subreaper: %w: macOS has none; orphans are re-parented to launchd", errors.ErrUnsupported)
}

// MarkInheritedCloexec sets close-on-exec on every fd above 2 that lacks it
// and returns those fds: they were inherited (Go opens all of its own with
// O_CLOEXEC), typically leaked by a host's shell. Go's os/exec would pass
// them on: without this, an auto-started daemon would hold a host pipe open
// forever. A long-lived process should also close the returned fds itself.
// The fds are listed from /dev/fd (fdesc, which lists the caller's own);
// without it every fd below the soft RLIMIT_NOFILE is tried.
func MarkInheritedCloexec() ([]int, error) {
	fds, err := ownFds("/dev/fd")
	if err != nil {
		var lim unix.Rlimit
		if rerr := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); rerr != nil {
			return nil, fmt.Errorf("getrlimit(RLIMIT_NOFILE): %v; list /dev/fd: %w", rerr, err)
		}
		// OPEN_MAX (10240) bounds what Go raises the soft limit to; a
		// larger or unlimited value is capped to keep this a short loop.
		n := min(lim.Cur, 1<<16)
		for fd := 3; uint64(fd) < n; fd++ {
			fds = append(fds, fd)
		}
	}
	return markCloexec(fds), nil
}

// devNullRdev is the device number of /dev/null, read once rather than
// hardcoded (3,2 on current macOS).
var devNullRdev = sync.OnceValues(func() (int32, bool) {
	var st unix.Stat_t
	if unix.Stat("/dev/null", &st) != nil {
		return 0, false
	}
	return st.Rdev, true
})

func kindOf(st *unix.Stat_t) string {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "pipe"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFREG:
		return "file"
	case unix.S_IFCHR:
		if rdev, ok := devNullRdev(); ok && st.Rdev == rdev {
			return "null"
		}
		return "tty"
	}
	return "other"
}

// FdKindOf would describe fd of another process. macOS has no /proc: the
// fds of another process are listed only through libproc
// (proc_pidfdinfo), which needs cgo, and this build has none. It always
// fails with an error wrapping errors.ErrUnsupported; a re-adopted
// server's stdio is then unknown, and the cascade finds its leftovers
// through process groups and markers only.
func FdKindOf(pid, fd int) (string, uint64, error) {
	return "", 0, fmt.Errorf("fd %d of pid %d: reading another process's fds needs libproc (cgo) on macOS: %w", fd, pid, errors.ErrUnsupported)
}

// FdHolders would list the fds of pids that refer to a pipe or socket
// whose inode is in want. On macOS that needs libproc (proc_pidinfo with
// PROC_PIDLISTFDS, cgo), which this build does not use: it returns nil,
// and the cascade stops what it finds through process groups and markers.
// A process outside the tree that holds a host pipe is not found.
func FdHolders(pids []int, want map[uint64]bool) []FdRef { return nil }

// Namespaces returns 0, 0: macOS has no PID or mount namespaces.
func Namespaces() (pidNS, mntNS uint64) { return 0, 0 }

// ZombieStatus returns the wait status (as waitpid would) of pid, carrying
// tok, while it is a zombie its parent has not reaped yet: how a process
// that is not our child ended, if we look in time. XNU keeps the status in
// p_xstat in wait(2) encoding.
func ZombieStatus(pid int, tok Token) (syscall.WaitStatus, bool) {
	if pid <= 0 {
		return 0, false
	}
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.pid", pid)
	if err != nil || len(kps) == 0 || int(kps[0].Proc.P_pid) != pid {
		return 0, false
	}
	p := &kps[0].Proc
	if p.P_stat != darwinSZomb || startMicros(p) != tok.StartTicks {
		return 0, false
	}
	return syscall.WaitStatus(p.P_xstat), true
}

// SignalName is the signal's name as kill -l spells it ("SIGTERM").
func SignalName(sig syscall.Signal) string { return unix.SignalName(sig) }

// PidfdInode returns 0: macOS has no pidfds, and its tokens carry no
// inode (the start time in microseconds stands in for it).
func PidfdInode(fd int) uint64 { return 0 }

// WaitChannel is where pid sleeps in the kernel: macOS does not say.
func WaitChannel(int) string { return "" }
