package sandbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Learning (Watch): a seccomp filter that hands each file open, exec,
// creation or removal, and each connect, of a process tree to the
// supervisor's listener, which reads what it names from the process's
// memory, notes it, and lets the call go on unchanged (the kernel's
// SECCOMP_USER_NOTIF_FLAG_CONTINUE). Nothing is denied: it runs a server
// as it would run unconfined, and sees what a sandbox would have to
// allow. It needs no privilege: no_new_privs, which the watching thread
// sets, suffices for a filter.

// seccompNotif is struct seccomp_notif; seccompResp struct
// seccomp_notif_resp.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

type seccompResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// A watched call: where its path (or sockaddr) argument is, its dirfd,
// and what it does.
type watched struct {
	path, dirfd int // argument indexes; dirfd -1: relative to the cwd
	flags       int // the open flags' argument, -1 for none; -2: openat2's how
	write, exec bool
	second      int // a second path (rename's new name), -1 for none
	secondDir   int
	connect     bool
	mkdir       bool // a directory made: one there already is no need
}

// learnCalls are the calls watched, by number: those Landlock judges
// (opening, executing, making, removing, renaming, linking, truncating)
// that every 64-bit Linux has, this architecture's older ones
// (learnLegacy), and connect. Calls Landlock does not judge (stat,
// access, chmod) are not watched: they need no rule.
func learnCalls() map[uint32]watched {
	m := map[uint32]watched{
		unix.SYS_OPENAT:    {path: 1, dirfd: 0, flags: 2, second: -1},
		unix.SYS_OPENAT2:   {path: 1, dirfd: 0, flags: -2, second: -1},
		unix.SYS_EXECVE:    {path: 0, dirfd: -1, flags: -1, exec: true, second: -1},
		unix.SYS_EXECVEAT:  {path: 1, dirfd: 0, flags: -1, exec: true, second: -1},
		unix.SYS_MKDIRAT:   {path: 1, dirfd: 0, flags: -1, write: true, second: -1, mkdir: true},
		unix.SYS_UNLINKAT:  {path: 1, dirfd: 0, flags: -1, write: true, second: -1},
		unix.SYS_RENAMEAT2: {path: 1, dirfd: 0, flags: -1, write: true, second: 3, secondDir: 2},
		unix.SYS_CONNECT:   {path: 1, dirfd: -1, flags: -1, connect: true, second: -1},
		unix.SYS_SYMLINKAT: {path: 2, dirfd: 1, flags: -1, write: true, second: -1},
		unix.SYS_LINKAT:    {path: 3, dirfd: 2, flags: -1, write: true, second: -1},
		unix.SYS_TRUNCATE:  {path: 0, dirfd: -1, flags: -1, write: true, second: -1},
		unix.SYS_MKNODAT:   {path: 1, dirfd: 0, flags: -1, write: true, second: -1},
	}
	for nr, w := range learnLegacy() {
		m[nr] = w
	}
	return m
}

// Learner is what a watched process tree touched (Watch).
type Learner struct {
	fd      int
	done    chan error // Serve's end
	calls   map[uint32]watched
	mu      sync.Mutex
	touched map[string]Access
	hosts   map[string]bool
}

// Access is how a path was used.
type Access struct{ Read, Write, Exec bool }

// Watch runs start (which forks or execs) on a thread of its own with the
// learning filter installed, so what start makes, and everything it
// starts, is watched; the thread ends with its goroutine (never the main
// thread, as Confined). It serves the filter's listener from before start
// (the child's own exec is watched: unserved, start would never return)
// until ctx ends or the tree is done: Done says when.
func Watch(ctx context.Context, start func() error) (*Learner, error) {
	calls := learnCalls()
	prog, err := learnFilter(calls)
	if err != nil {
		return nil, err
	}
	l := &Learner{calls: calls, touched: map[string]Access{}, hosts: map[string]bool{}, done: make(chan error, 1)}
	watchOn := func() error {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("learn: no_new_privs: %w", err)
		}
		fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fp)))
		runtime.KeepAlive(prog)
		if errno != 0 {
			return fmt.Errorf("learn: a seccomp filter with a listener (Linux 5.0 and later): %w", errno)
		}
		l.fd = int(fd)
		go func() { l.done <- l.serve(ctx) }()
		return start()
	}
	if err := onSpentThread(watchOn); err != nil {
		// The listener, if made, ends by itself: its thread, the one
		// task with its filter, ends with its goroutine (serve's hang-up).
		return nil, err
	}
	return l, nil
}

// Done is closed with Serve's error, or nil, once learning has ended.
func (l *Learner) Done() <-chan error { return l.done }

// learnFilter notifies the listener of each call in calls and allows the
// rest.
func learnFilter(calls map[uint32]watched) ([]unix.SockFilter, error) {
	arch := nativeArch()
	if arch == 0 {
		return nil, fmt.Errorf("learn: no seccomp filter for %s", runtime.GOARCH)
	}
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	nrs := make([]uint32, 0, len(calls))
	for nr := range calls {
		nrs = append(nrs, nr)
	}
	n := len(nrs)
	// 0: arch; 1: another ABI goes unwatched; 2: nr; 3..3+n-1: each
	// watched number jumps to notify at 3+n+1; 3+n: allow; 3+n+1: notify.
	prog := []unix.SockFilter{stmt(ld, offArch), jump(jeq, arch, 0, uint8(n+1)), stmt(ld, offNr)}
	for i, nr := range nrs {
		prog = append(prog, jump(jeq, nr, uint8(n-i), 0))
	}
	prog = append(prog, stmt(ret, retAllow), stmt(ret, unix.SECCOMP_RET_USER_NOTIF))
	return prog, nil
}

// serve notes each watched call and lets it go on, until ctx ends or no
// watched process is left, and closes the listener.
func (l *Learner) serve(ctx context.Context) error {
	defer unix.Close(l.fd)
	for ctx.Err() == nil {
		fds := []unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 200)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("learn: poll: %w", err)
		}
		if n == 0 {
			continue
		}
		if fds[0].Revents&unix.POLLHUP != 0 && fds[0].Revents&unix.POLLIN == 0 {
			return nil // every watched process is gone
		}
		var req seccompNotif
		if err := ioctlPtr(l.fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&req)); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINTR) {
				continue // the caller died meanwhile
			}
			return fmt.Errorf("learn: receive: %w", err)
		}
		l.note(&req)
		resp := seccompResp{id: req.id, flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		if err := ioctlPtr(l.fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp)); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("learn: answer: %w", err)
		}
	}
	return nil
}

func ioctlPtr(fd int, req uint, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}

// note reads what req names from its process and notes it. What cannot
// be read (a process gone) is passed over: learning only ever adds.
func (l *Learner) note(req *seccompNotif) {
	w, ok := l.calls[uint32(req.nr)]
	if !ok {
		return
	}
	pid := int(req.pid)
	mem, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return
	}
	defer mem.Close()
	if w.connect {
		if host := readSockaddr(mem, req.args[w.path], req.args[2]); host != "" {
			l.mu.Lock()
			l.hosts[host] = true
			l.mu.Unlock()
		}
		return
	}
	acc := Access{Read: !w.write && !w.exec, Write: w.write, Exec: w.exec}
	switch {
	case w.flags >= 0:
		acc = openAccess(req.args[w.flags])
	case w.flags == -2:
		var how [8]byte
		if _, err := mem.ReadAt(how[:], int64(req.args[2])); err == nil {
			acc = openAccess(binary.LittleEndian.Uint64(how[:]))
		}
	}
	for _, at := range [][2]int{{w.path, w.dirfd}, {w.second, w.secondDir}} {
		if at[0] < 0 {
			continue
		}
		dirfd := -1
		if at[1] >= 0 {
			dirfd = int(int32(req.args[at[1]]))
		}
		if p := readPath(mem, pid, req.args[at[0]], dirfd); p != "" {
			if _, err := os.Lstat(p); err == nil && w.mkdir {
				continue // mkdir -p's walk: it fails as EEXIST
			}
			l.mu.Lock()
			old := l.touched[p]
			l.touched[p] = Access{Read: old.Read || acc.Read, Write: old.Write || acc.Write, Exec: old.Exec || acc.Exec}
			l.mu.Unlock()
		}
	}
}

// openAccess is how open flags use a file.
func openAccess(flags uint64) Access {
	switch {
	case flags&(unix.O_WRONLY|unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC) != 0:
		return Access{Write: true}
	case flags&unix.O_PATH != 0:
		return Access{}
	}
	return Access{Read: true}
}

// readPath reads the path at addr in the process's memory, absolute:
// relative to dirfd, or its cwd where dirfd is AT_FDCWD or -1.
func readPath(mem *os.File, pid int, addr uint64, dirfd int) string {
	if addr == 0 {
		return ""
	}
	buf := make([]byte, unix.PathMax)
	n, _ := mem.ReadAt(buf, int64(addr))
	buf = buf[:n]
	i := 0
	for i < len(buf) && buf[i] != 0 {
		i++
	}
	if i == 0 || i == len(buf) {
		return ""
	}
	p := string(buf[:i])
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	base := "/proc/" + strconv.Itoa(pid) + "/cwd"
	if dirfd >= 0 {
		base = "/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(dirfd)
	}
	dir, err := os.Readlink(base)
	if err != nil || !filepath.IsAbs(dir) {
		return ""
	}
	return filepath.Join(dir, p)
}

// readSockaddr is the internet address and port a connect names, "" for
// another family.
func readSockaddr(mem *os.File, addr, size uint64) string {
	if addr == 0 || size < 8 || size > 128 {
		return ""
	}
	b := make([]byte, size)
	if _, err := mem.ReadAt(b, int64(addr)); err != nil {
		return ""
	}
	port := binary.BigEndian.Uint16(b[2:4])
	switch binary.LittleEndian.Uint16(b[0:2]) {
	case unix.AF_INET:
		a := netip.AddrFrom4([4]byte(b[4:8]))
		return netip.AddrPortFrom(a, port).String()
	case unix.AF_INET6:
		if len(b) < 24 {
			return ""
		}
		a := netip.AddrFrom16([16]byte(b[8:24])).Unmap()
		return netip.AddrPortFrom(a, port).String()
	}
	return ""
}

// Touched is what the tree touched so far: each path, how, and each
// address and port it connected to.
func (l *Learner) Touched() (map[string]Access, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	paths := make(map[string]Access, len(l.touched))
	for p, a := range l.touched {
		paths[p] = a
	}
	var hosts []string
	for h := range l.hosts {
		hosts = append(hosts, h)
	}
	return paths, hosts
}
