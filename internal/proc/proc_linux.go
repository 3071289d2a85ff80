package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var bootID = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
})

// BootID returns the kernel's boot id.
func BootID() (string, error) { return bootID() }

// Stat reads /proc/PID/stat (and the owner uid) for pid.
//
// Stops and recovery run it on every process of the machine, so it costs
// four system calls: one read into a buffer no stat line outgrows, and the
// owner from a stat of the directory. Not the stat file's owner: procfs
// gives the files of a process that is not dumpable (ssh-agent, a binary
// with file capabilities, one that changed credentials) to root, the
// directory always to the process's user.
func Stat(pid int) (Info, error) {
	if pid <= 0 {
		return Info{}, fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Info{}, statErr(pid, err)
	}
	var buf [statBuf]byte
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	if err != nil {
		return Info{}, statErr(pid, err)
	}
	if n == len(buf) {
		return Info{}, fmt.Errorf("read %s: longer than %d bytes", path, len(buf))
	}
	info, err := parseStat(buf[:n])
	if err != nil {
		return Info{}, fmt.Errorf("parse %s: %w", path, err)
	}
	if info.Token.BootID, err = BootID(); err != nil {
		return Info{}, err
	}
	var st unix.Stat_t
	if err := unix.Stat(path[:len(path)-len("/stat")], &st); err == nil {
		info.UID = int(st.Uid)
	} else {
		info.UID = -1
	}
	return info, nil
}

// statBuf holds any /proc/PID/stat line: 52 fields of at most 20 digits and
// a comm of at most 64 bytes come to about 1,200.
const statBuf = 4096

func statErr(pid int, err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	return fmt.Errorf("read /proc/%d/stat: %w", pid, err)
}

// parseStat parses the fields we need from a /proc/PID/stat line. comm may
// contain spaces and parentheses, so the fields after it are found from the
// last ')'.
func parseStat(b []byte) (Info, error) {
	open := bytes.IndexByte(b, '(')
	closeIdx := bytes.LastIndexByte(b, ')')
	if open < 0 || closeIdx < open {
		return Info{}, errors.New("no comm field")
	}
	var info Info
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return Info{}, fmt.Errorf("pid field: %w", err)
	}
	info.PID = pid
	info.Comm = string(b[open+1 : closeIdx])
	// Fields after comm start at field 3 (state).
	f := strings.Fields(string(b[closeIdx+1:]))
	if len(f) < 20 {
		return Info{}, fmt.Errorf("only %d fields after comm", len(f))
	}
	info.State = f[0][0]
	nums := []*int{&info.PPID, &info.PGID, &info.SID}
	for i, p := range nums {
		if *p, err = strconv.Atoi(f[1+i]); err != nil {
			return Info{}, fmt.Errorf("field %d: %w", 4+i, err)
		}
	}
	// starttime is field 22 of stat, index 19 after comm.
	if info.Token.StartTicks, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Info{}, fmt.Errorf("starttime field: %w", err)
	}
	return info, nil
}

// TokenOf returns the full creation token of the process now holding pid,
// pidfs inode included where the kernel has one.
func TokenOf(pid int) (Token, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return Token{}, fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		// No pidfd (old kernel, seccomp): stat alone.
		info, serr := Stat(pid)
		return info.Token, serr
	}
	defer unix.Close(fd)
	return tokenOfPidfd(pid, fd)
}

// tokenOfPidfd reads the token of the process fd refers to. The stat is
// read after the pidfd exists, and the pidfd is checked to still refer to
// a live process afterwards, so the two halves describe one process.
func tokenOfPidfd(pid, fd int) (Token, error) {
	info, err := Stat(pid)
	if err != nil {
		return Token{}, err
	}
	tok := info.Token
	tok.PidfsInode = PidfdInode(fd)
	if unix.PidfdSendSignal(fd, 0, nil, 0) != nil && info.State != 'Z' {
		return Token{}, fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	return tok, nil
}

// PidfdInode returns the pidfs inode of a pidfd: unique per process for the
// life of the boot on kernels with pidfs (6.9+), 0 where pidfds are
// anonymous inodes (all of them share one inode there, so it means nothing).
func PidfdInode(fd int) uint64 {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return 0
	}
	var fs unix.Statfs_t
	if unix.Fstatfs(fd, &fs) != nil || fs.Type != pidfsMagic {
		return 0
	}
	return st.Ino
}

// pidfsMagic is PID_FS_MAGIC from linux/magic.h.
const pidfsMagic = 0x50494446

// Verify returns nil when pid is alive (not a zombie) and carries tok.
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
	if info.State == 'Z' || info.State == 'X' {
		return fmt.Errorf("pid %d is a zombie: %w", pid, ErrGone)
	}
	return nil
}

// Handle is a pidfd: it refers to one process, whatever later owns its
// PID, and polls readable once that process exits.
type Handle struct {
	fd  int
	pid int
}

// OpenHandle opens a pidfd for pid and checks, after opening, that the
// process it refers to still carries tok: a pidfd binds to whoever owns the
// PID at open time, so the check must come second. The caller closes it.
func OpenHandle(pid int, tok Token) (*Handle, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	got, err := tokenOfPidfd(pid, fd)
	if err == nil && !tok.Matches(got) {
		err = fmt.Errorf("pid %d: %w", pid, ErrTokenMismatch)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Handle{fd: fd, pid: pid}, nil
}

// PID is the process's PID.
func (h *Handle) PID() int { return h.pid }

// Fd is the pidfd, for poll(2): readable once the process has exited.
func (h *Handle) Fd() int { return h.fd }

// Signal sends sig through the pidfd, so it can never reach a process that
// recycled the PID. A process already gone gives ErrGone.
func (h *Handle) Signal(sig syscall.Signal) error {
	if err := unix.PidfdSendSignal(h.fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pid %d: %w", h.pid, ErrGone)
		}
		return fmt.Errorf("signal %s to pid %d: %w", SignalName(sig), h.pid, err)
	}
	return nil
}

// Wait waits until the process exits, for at most limit (forever when
// limit < 0). It reports whether it exited.
func (h *Handle) Wait(limit time.Duration) bool { return waitReadable(h.fd, limit) }

// Close releases the pidfd.
func (h *Handle) Close() error { return unix.Close(h.fd) }

// HandlesSupported reports whether the kernel has pidfd_open.
func HandlesSupported() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// Cmdline returns the argv of pid (empty for kernel threads and zombies).
func Cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return nil, fmt.Errorf("read /proc/%d/cmdline: %w", pid, err)
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(string(b), "\x00"), nil
}

// Environ returns the environment of pid as KEY=VALUE strings.
func Environ(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return nil, fmt.Errorf("read /proc/%d/environ: %w", pid, err)
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(string(b), "\x00"), nil
}

// SetChildSubreaper makes the calling process the reaper of its orphaned
// descendants (PR_SET_CHILD_SUBREAPER is process-wide).
func SetChildSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	return nil
}

// MarkInheritedCloexec sets close-on-exec on every fd above 2 that lacks it
// and returns those fds: they were inherited (Go opens all of its own with
// O_CLOEXEC), typically leaked by a host's shell — a pipe on fd 251 was seen.
// Go's os/exec would pass them on: without this, an auto-started daemon
// would hold a host pipe open forever. A long-lived process should also
// close the returned fds itself.
func MarkInheritedCloexec() ([]int, error) {
	fds, err := ownFds("/proc/self/fd")
	if err != nil {
		// No /proc: mark everything, remember nothing.
		if cerr := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); cerr != nil {
			return nil, fmt.Errorf("close_range: %v; list /proc/self/fd: %w", cerr, err)
		}
		return nil, nil
	}
	return markCloexec(fds), nil
}

// FdKindOf is FdKind for fd of another process, through /proc: what a
// re-adopted server's stdio is, so the cascade can find the holders of its
// host's pipes again.
func FdKindOf(pid, fd int) (string, uint64, error) {
	var st unix.Stat_t
	path := fmt.Sprintf("/proc/%d/fd/%d", pid, fd)
	if err := unix.Stat(path, &st); err != nil {
		return "", 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return kindOf(&st), st.Ino, nil
}

func kindOf(st *unix.Stat_t) string {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "pipe"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFREG:
		return "file"
	case unix.S_IFCHR:
		if unix.Major(st.Rdev) == 1 && unix.Minor(st.Rdev) == 3 {
			return "null"
		}
		return "tty"
	}
	return "other"
}

// Namespaces returns the inodes of this process's PID and mount
// namespaces (0 where they cannot be read).
func Namespaces() (pidNS, mntNS uint64) {
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/pid", &st) == nil {
		pidNS = st.Ino
	}
	if unix.Stat("/proc/self/ns/mnt", &st) == nil {
		mntNS = st.Ino
	}
	return pidNS, mntNS
}

// Scan reads the status of every process in /proc. Processes that vanish
// during the scan are skipped.
func Scan() ([]Info, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("open /proc: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	out := make([]Info, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		info, err := Stat(pid)
		if err != nil {
			continue
		}
		out = append(out, info)
	}
	return out, nil
}

// FdHolders lists the fds of pids that refer to a pipe or socket whose
// inode is in want. Links are read with readlink only: stat on /proc/PID/fd
// entries hangs on a process in uninterruptible sleep.
func FdHolders(pids []int, want map[uint64]bool) []FdRef {
	var out []FdRef
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		d, err := os.Open(dir)
		if err != nil {
			continue
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, n := range names {
			link, err := os.Readlink(dir + "/" + n)
			if err != nil {
				continue
			}
			kind, ino, ok := parseFdLink(link)
			if !ok || !want[ino] {
				continue
			}
			fd, _ := strconv.Atoi(n)
			out = append(out, FdRef{PID: pid, Fd: fd, Kind: kind, Inode: ino, Access: fdAccess(pid, n)})
		}
	}
	return out
}

// parseFdLink parses "pipe:[123]" and "socket:[123]".
func parseFdLink(link string) (kind string, ino uint64, ok bool) {
	k, rest, found := strings.Cut(link, ":[")
	if !found || (k != "pipe" && k != "socket") || !strings.HasSuffix(rest, "]") {
		return "", 0, false
	}
	ino, err := strconv.ParseUint(rest[:len(rest)-1], 10, 64)
	return k, ino, err == nil
}

// fdAccess reads the access mode from /proc/PID/fdinfo/FD ("flags:" is
// octal); unknown counts as O_RDWR so a holder is never missed.
func fdAccess(pid int, fd string) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + fd)
	if err != nil {
		return unix.O_RDWR
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			if err != nil {
				return unix.O_RDWR
			}
			return int(flags) & unix.O_ACCMODE
		}
	}
	return unix.O_RDWR
}

// ZombieStatus returns the wait status (as waitpid would) of pid, carrying
// tok, while it is a zombie its parent has not reaped yet: how a process
// that is not our child ended, if we look in time (field 52 of
// /proc/PID/stat).
func ZombieStatus(pid int, tok Token) (syscall.WaitStatus, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	info, err := parseStat(b)
	if err != nil || info.State != 'Z' || info.Token.StartTicks != tok.StartTicks {
		return 0, false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 50 {
		return 0, false
	}
	ws, err := strconv.Atoi(f[49])
	if err != nil {
		return 0, false
	}
	return syscall.WaitStatus(ws), true
}

// SignalName is the signal's name as kill -l spells it ("SIGTERM").
func SignalName(sig syscall.Signal) string { return unix.SignalName(sig) }

// NoNewPrivs says whether process pid has no_new_privs set: a flag the
// kernel keeps for good once set, inherited by everything it starts.
func NoNewPrivs(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false, fmt.Errorf("pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NoNewPrivs:"); ok {
			return strings.TrimSpace(v) == "1", nil
		}
	}
	return false, fmt.Errorf("pid %d: no NoNewPrivs in its status", pid)
}

// WaitChannel is the kernel function pid sleeps in ("" when running, or
// unknown): what keeps a process alive past SIGKILL (an uninterruptible
// wait) is named there.
func WaitChannel(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/wchan")
	if err != nil || string(b) == "0" {
		return ""
	}
	return string(b)
}
