package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock ABI versions and what each adds (landlock(7)).
const (
	abiRefer    = 2 // LANDLOCK_ACCESS_FS_REFER
	abiTruncate = 3 // LANDLOCK_ACCESS_FS_TRUNCATE
	abiNet      = 4 // TCP bind and connect rules
	abiIoctlDev = 5 // LANDLOCK_ACCESS_FS_IOCTL_DEV
	abiScope    = 6 // scoping of abstract unix sockets and signals
	abiAudit    = 7 // audit records of denials, and restrict_self's log flags
)

// ABI is the Landlock ABI version this kernel offers, 0 where it has none
// (not built in, or not among the LSMs booted).
func ABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// Support says what this kernel can enforce of a sandbox.
func Support() Capabilities {
	abi := ABI()
	c := Capabilities{Mechanism: "landlock", ABI: abi, Filesystem: abi >= 1, Network: abi >= abiNet && nativeArch() != 0, Scoping: abi >= abiScope}
	switch {
	case abi == 0:
		c.Why = "this kernel has no Landlock (it needs Linux 5.13 with landlock among the LSMs: lsm=...,landlock)"
	case !c.Network:
		c.Why = fmt.Sprintf("Landlock ABI %d cannot deny TCP (ABI 4, Linux 6.7, can): --network none is refused here", abi)
	}
	return c
}

// fsRights are the filesystem accesses an ABI handles: all of them are
// denied but where a rule allows.
func fsRights(abi int) uint64 {
	r := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= abiRefer {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= abiTruncate {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= abiIoctlDev {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

const (
	readRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// fileRights are those a rule on a file (not a directory) may carry.
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// rulesetAttr is struct landlock_ruleset_attr as far as ABI 6: the kernel
// takes the size it is given, so a shorter struct is read as such.
type rulesetAttr struct {
	handledFS  uint64
	handledNet uint64
	scoped     uint64
}

// pathBeneath is struct landlock_path_beneath_attr, which the kernel packs:
// 12 bytes, read from the start of this one.
type pathBeneath struct {
	allowed  uint64
	parentFd int32
	_        int32
}

// Confine restricts the calling thread to r, for good, and everything it
// starts from now: the caller holds its OS thread (runtime.LockOSThread)
// and execs or forks from it, and never hands it back (Landlock confines
// a thread, which the Go runtime would otherwise give other goroutines).
// It fails, confining nothing, where the kernel cannot enforce r.
func Confine(r Rules) error {
	abi := ABI()
	if abi < 1 {
		return fmt.Errorf("cannot sandbox: %s", Support().Why)
	}
	if r.NoNetwork && abi < abiNet {
		return fmt.Errorf("cannot sandbox: %s", Support().Why)
	}
	attr := rulesetAttr{handledFS: fsRights(abi)}
	size := unsafe.Sizeof(uint64(0)) // handled_access_fs alone: ABI 1-3
	if abi >= abiNet {
		size = 2 * unsafe.Sizeof(uint64(0))
		if r.NoNetwork {
			attr.handledNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		}
	}
	if abi >= abiScope {
		// Neither signals to nor abstract sockets of processes outside
		// the sandbox: a server cannot kill its host or the daemon.
		size = unsafe.Sizeof(attr)
		attr.scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	runtime.KeepAlive(&attr)
	if errno != 0 {
		return fmt.Errorf("cannot sandbox: landlock_create_ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	for _, p := range r.Read {
		if err := addPath(int(fd), p, readRights); err != nil {
			return err
		}
	}
	for _, p := range r.Write {
		if err := addPath(int(fd), p, attr.handledFS); err != nil {
			return err
		}
	}
	if r.NoNetwork {
		for _, port := range r.BindPorts {
			if err := addPort(int(fd), port, unix.LANDLOCK_ACCESS_NET_BIND_TCP); err != nil {
				return err
			}
		}
		for _, port := range r.ConnectPorts {
			if err := addPort(int(fd), port, unix.LANDLOCK_ACCESS_NET_CONNECT_TCP); err != nil {
				return err
			}
		}
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot sandbox: no_new_privs: %w", err)
	}
	var flags uintptr
	if abi >= abiAudit {
		// The kernel's audit (where it is on) records what the server
		// denied after its exec too: the daemon makes them events
		// (internal/sandbox/denials), knowing the domain by the name
		// this thread has when it makes it.
		flags = unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
		if r.Tag != "" {
			name := append([]byte(r.Tag[:min(len(r.Tag), 15)]), 0)
			if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
				return fmt.Errorf("cannot sandbox: name the thread: %w", err)
			}
			runtime.KeepAlive(name)
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, flags, 0); errno != 0 {
		return fmt.Errorf("cannot sandbox: landlock_restrict_self: %w", errno)
	}
	if r.NoNetwork {
		// What Landlock's TCP rules miss (seccomp_linux.go).
		return filterNetwork()
	}
	return nil
}

// addPath allows rights beneath p (a file gets those a file can have).
// A path gone since the plan is skipped: there is nothing to allow.
func addPath(ruleset int, p string, rights uint64) error {
	pfd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot sandbox: open %s for a rule: %w", p, err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("cannot sandbox: stat %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= fileRights
	}
	attr := pathBeneath{allowed: rights, parentFd: int32(pfd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	runtime.KeepAlive(&attr)
	if errno != 0 {
		return fmt.Errorf("cannot sandbox: a rule for %s: %w", p, os.NewSyscallError("landlock_add_rule", errno))
	}
	return nil
}

// netPort is struct landlock_net_port_attr.
type netPort struct {
	allowed uint64
	port    uint64
}

// ruleNetPort is LANDLOCK_RULE_NET_PORT (ABI 4).
const ruleNetPort = 2

// addPort allows access (binding or connecting) on TCP port.
func addPort(ruleset, port int, access uint64) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("cannot sandbox: port %d: want 1 to 65535", port)
	}
	attr := netPort{allowed: access, port: uint64(port)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), ruleNetPort, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	runtime.KeepAlive(&attr)
	if errno != 0 {
		return fmt.Errorf("cannot sandbox: a rule for TCP port %d: %w", port, os.NewSyscallError("landlock_add_rule", errno))
	}
	return nil
}

// dropCapabilities empties this thread's capability sets, bounding set
// included, so that what it execs has none even as root: Landlock yields
// to CAP_SYS_PTRACE (a root server read its host's /proc/PID/environ
// through it), and a sandboxed server needs none. A thread without
// capabilities has nothing to drop.
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("cannot sandbox: capget: %w", err)
	}
	if data[0].Permitted == 0 && data[1].Permitted == 0 && os.Getuid() != 0 {
		return nil
	}
	last := 63 // past the last, PR_CAPBSET_DROP says EINVAL
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("cannot sandbox: drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("cannot sandbox: clear ambient capabilities: %w", err)
	}
	data = [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("cannot sandbox: capset: %w", err)
	}
	return nil
}

// LimitResources sets what a sandboxed server may not have whatever its
// rules: core dumps (a crash must not write its memory, and the secrets
// it was given, to disk), and more than r.OpenFiles open files (lowered
// only, never raised). pid 0 is the calling process. Resource limits are
// a process's, not a thread's: a forked server gets them right after its
// start, an in-place one before its exec.
func LimitResources(pid int, r Rules) error {
	none := unix.Rlimit{Cur: 0, Max: 0}
	if err := unix.Prlimit(pid, unix.RLIMIT_CORE, &none, nil); err != nil {
		return fmt.Errorf("cannot sandbox: no core dumps for %d: %w", pid, err)
	}
	if r.OpenFiles <= 0 {
		return nil
	}
	var cur unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &cur); err != nil {
		return fmt.Errorf("cannot sandbox: the open-files limit of %d: %w", pid, err)
	}
	n := uint64(r.OpenFiles)
	lim := unix.Rlimit{Cur: min(cur.Cur, n), Max: min(cur.Max, n)}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		return fmt.Errorf("cannot sandbox: at most %d open files for %d: %w", n, pid, err)
	}
	return nil
}

// Confined runs start (which forks or execs) on a thread of its own
// confined to r, and returns its error: what start forks is confined from
// its first instruction. The thread is never handed back to Go: it ends
// with its goroutine. Never the main thread: Go cannot end it, and the
// kernel sees it as the process, which must stay unconfined.
func Confined(r Rules, start func() error) error {
	return onSpentThread(func() error {
		if err := Confine(r); err != nil {
			return err
		}
		return start()
	})
}

// onSpentThread runs f on an OS thread that f may change for good
// (confine it, filter it) and returns f's error: the thread is never
// handed back to Go, which ends it with its goroutine. Never the main
// thread: Go cannot end that one, and the kernel sees it as the process.
// Where the goroutine lands on it, it is held there, unchanged, while
// another thread does the work, and then handed back.
func onSpentThread(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if unix.Gettid() != unix.Getpid() {
			done <- f()
			return
		}
		inner := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			inner <- f()
		}()
		err := <-inner
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// Wrap leaves a command as it is on Linux: its process confines itself
// (Confine).
func Wrap(path string, argv []string, _ Rules) (string, []string) { return path, argv }
