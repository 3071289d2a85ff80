package proc

import (
	"errors"
	"fmt"
	"math"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Windows notes, for the whole package:
//
//   - Token: StartTicks is the creation time from GetProcessTimes (a
//     FILETIME: 100 ns units since 1601, absolute, so unique across boots);
//     PidfsInode carries the kernel's process sequence number
//     (ProcessSequenceNumber, Windows 10+), unique per boot. The creation
//     time is only as fine as the system clock tick (about 15.6 ms), so a
//     PID recycled within one tick would collide on StartTicks alone, the
//     same hole Linux closes with the pidfs inode; the sequence number
//     closes it here. It is 0 where the query is refused, and Matches then
//     compares the creation time alone.
//   - A process object, and with it its PID, lives as long as any handle to
//     it: a PID cannot be recycled under an open Handle. An exited process
//     that a handle keeps is this OS's zombie (State 'Z').
//   - Windows has no uids: Info.UID is -1, as os.Getuid returns there. A
//     same-user check on Windows compares the token user SID, not Info.UID.
//   - Windows has no process groups in the POSIX sense (PGID is 0) and no
//     POSIX sessions; Info.SID is the Terminal Services session id.

// bootIDWindows is the BootID on Windows. Creation times are absolute
// (FILETIME), so a token needs no boot id to stay unique across reboots;
// a constant keeps Token comparisons working unchanged. The boot time is
// not used: derived from GetTickCount64 it drifts by whole ticks between
// reads, and a boot id that changes while the machine runs would make
// every recorded token look foreign.
const bootIDWindows = "windows"

// BootID returns a constant on Windows: see bootIDWindows.
func BootID() (string, error) { return bootIDWindows, nil }

// Values the Windows API reports that x/sys does not name.
const (
	stillActive = 259   // STILL_ACTIVE: GetExitCodeProcess of a running process
	waitTimeout = 0x102 // WAIT_TIMEOUT from WaitForSingleObject
)

// errNoProcess reports whether an OpenProcess failure means that no
// process has the PID: Windows answers ERROR_INVALID_PARAMETER for an
// unknown PID, not a "not found" error.
func errNoProcess(err error) bool {
	return errors.Is(err, windows.ERROR_INVALID_PARAMETER)
}

// openProcess opens pid with the first of the access sets the system
// grants, most wanted first: a process of another user or a protected one
// refuses some rights and grants others (PROCESS_QUERY_LIMITED_INFORMATION
// nearly always). A PID no process has gives ErrGone at once.
func openProcess(pid int, access ...uint32) (windows.Handle, error) {
	if pid <= 0 || uint64(pid) > math.MaxUint32 {
		return 0, fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	var err error
	for _, a := range access {
		var h windows.Handle
		h, err = windows.OpenProcess(a, false, uint32(pid))
		if err == nil {
			return h, nil
		}
		if errNoProcess(err) {
			return 0, fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		if !errors.Is(err, windows.ERROR_ACCESS_DENIED) {
			break
		}
	}
	return 0, fmt.Errorf("open process %d: %w", pid, err)
}

// queryAccess is what the probes need: the creation time and the exit
// state. SYNCHRONIZE lets hasExited wait with a zero timeout, which
// (unlike the exit code) cannot mistake a process that exited with code
// 259 for a live one.
var queryAccess = []uint32{
	windows.PROCESS_QUERY_LIMITED_INFORMATION | windows.SYNCHRONIZE,
	windows.PROCESS_QUERY_LIMITED_INFORMATION,
}

// tokenOfHandle reads the creation token of the process h refers to. It
// works on an exited process the handle still keeps.
func tokenOfHandle(h windows.Handle) (Token, error) {
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return Token{}, fmt.Errorf("GetProcessTimes: %w", err)
	}
	tok := Token{
		BootID:     bootIDWindows,
		StartTicks: uint64(created.HighDateTime)<<32 | uint64(created.LowDateTime),
	}
	var seq uint64
	if windows.NtQueryInformationProcess(h, windows.ProcessSequenceNumber,
		unsafe.Pointer(&seq), uint32(unsafe.Sizeof(seq)), nil) == nil {
		tok.PidfsInode = seq
	}
	return tok, nil
}

// hasExited reports whether the process h refers to has exited. It waits
// on the handle with a zero timeout where the handle has SYNCHRONIZE, and
// falls back to the exit code where it does not.
func hasExited(h windows.Handle) (bool, error) {
	ev, err := windows.WaitForSingleObject(h, 0)
	if err == nil {
		switch ev {
		case windows.WAIT_OBJECT_0:
			return true, nil
		case waitTimeout:
			return false, nil
		}
	}
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return false, fmt.Errorf("GetExitCodeProcess: %w", err)
	}
	return code != stillActive, nil
}

// processEntries takes one Toolhelp32 snapshot of the process table.
func processEntries() ([]windows.ProcessEntry32, error) {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return nil, fmt.Errorf("CreateToolhelp32Snapshot: %w", err)
	}
	defer windows.CloseHandle(snap)
	var out []windows.ProcessEntry32
	e := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	err = windows.Process32First(snap, &e)
	for err == nil {
		out = append(out, e)
		err = windows.Process32Next(snap, &e)
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return nil, fmt.Errorf("Process32Next: %w", err)
	}
	return out, nil
}

// infoOfEntry fills what the snapshot tells about one process.
func infoOfEntry(e *windows.ProcessEntry32) Info {
	info := Info{
		PID:   int(e.ProcessID),
		PPID:  int(e.ParentProcessID),
		Comm:  windows.UTF16ToString(e.ExeFile[:]),
		UID:   -1,
		State: 'R',
	}
	var sid uint32
	if windows.ProcessIdToSessionId(e.ProcessID, &sid) == nil {
		info.SID = int(sid)
	}
	return info
}

// probe opens pid and fills its token and state into info.
func probe(info *Info) error {
	h, err := openProcess(info.PID, queryAccess...)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	if info.Token, err = tokenOfHandle(h); err != nil {
		return fmt.Errorf("pid %d: %w", info.PID, err)
	}
	if gone, err := hasExited(h); err == nil && gone {
		info.State = 'Z'
	}
	return nil
}

// Stat reads the status of pid: PPID and Comm (the executable's file name,
// "node.exe") from a Toolhelp32 snapshot, the token and the state from a
// handle. PGID is 0 and SID is the Terminal Services session (see the
// package notes).
//
// A Windows parent PID is recorded at creation and never updated: once the
// parent exits it names nobody, and later whoever recycled it. Stat
// reports PPID 0 when the parent is no longer running or was created after
// the child (a recycled PID), so a PPID always names the real parent or
// nobody, much as an orphan on Linux points at init.
//
// A process that cannot be opened (another user's, or a protected one) gives
// the Info the snapshot holds, with a zero Token, together with an error
// wrapping the Windows error. An exited process that a handle keeps is not
// in the snapshot; Stat still finds it through a handle and reports it with
// State 'Z'.
func Stat(pid int) (Info, error) {
	if pid <= 0 {
		return Info{}, fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	entries, err := processEntries()
	if err != nil {
		return Info{}, err
	}
	var info, parent *windows.ProcessEntry32
	for i := range entries {
		if int(entries[i].ProcessID) == pid {
			info = &entries[i]
		}
	}
	if info == nil {
		return statByHandle(pid)
	}
	for i := range entries {
		if entries[i].ProcessID == info.ParentProcessID {
			parent = &entries[i]
		}
	}
	out := infoOfEntry(info)
	if err := probe(&out); err != nil {
		return out, err
	}
	if out.PPID != 0 {
		if parent == nil {
			out.PPID = 0
		} else if ptok, err := parentToken(out.PPID); err == nil && ptok.StartTicks > out.Token.StartTicks {
			out.PPID = 0
		}
	}
	return out, nil
}

// statByHandle is Stat for a PID the snapshot did not list: an exited
// process a handle keeps (the process table lists running ones only), or
// one started after the snapshot. PPID and Comm come from the handle where
// it grants them.
func statByHandle(pid int) (Info, error) {
	h, err := openProcess(pid, queryAccess...)
	if err != nil {
		return Info{}, err
	}
	defer windows.CloseHandle(h)
	info := Info{PID: pid, UID: -1, State: 'R'}
	if info.Token, err = tokenOfHandle(h); err != nil {
		return Info{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	if gone, err := hasExited(h); err == nil && gone {
		info.State = 'Z'
	}
	if pbi, err := basicInfo(h); err == nil {
		info.PPID = int(pbi.parent)
		if ptok, err := parentToken(info.PPID); err != nil || ptok.StartTicks > info.Token.StartTicks {
			info.PPID = 0
		}
	}
	info.Comm = imageName(h)
	var sid uint32
	if windows.ProcessIdToSessionId(uint32(pid), &sid) == nil {
		info.SID = int(sid)
	}
	return info, nil
}

// imageName is the file name of the executable h runs ("node.exe"), ""
// when the system will not say.
func imageName(h windows.Handle) string {
	buf := make([]uint16, windows.MAX_LONG_PATH)
	n := uint32(len(buf))
	if windows.QueryFullProcessImageName(h, 0, &buf[0], &n) != nil {
		return ""
	}
	full := windows.UTF16ToString(buf[:n])
	for i := len(full) - 1; i >= 0; i-- {
		if full[i] == '\\' || full[i] == '/' {
			return full[i+1:]
		}
	}
	return full
}

// parentToken reads the token of a live process for the PPID check.
func parentToken(pid int) (Token, error) {
	h, err := openProcess(pid, windows.PROCESS_QUERY_LIMITED_INFORMATION)
	if err != nil {
		return Token{}, err
	}
	defer windows.CloseHandle(h)
	return tokenOfHandle(h)
}

// Scan reads the status of every process from one Toolhelp32 snapshot.
// Processes that cannot be opened keep a zero Token; processes that exit
// during the scan are skipped. PPIDs are checked as in Stat: one that
// names a process created after the child, or none, becomes 0. The System
// Idle Process (PID 0) is not a process and is left out.
func Scan() ([]Info, error) {
	entries, err := processEntries()
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(entries))
	for i := range entries {
		if entries[i].ProcessID == 0 {
			continue
		}
		info := infoOfEntry(&entries[i])
		if err := probe(&info); errors.Is(err, ErrGone) {
			continue
		}
		out = append(out, info)
	}
	byPID := make(map[int]int, len(out))
	for i, info := range out {
		byPID[info.PID] = i
	}
	for i := range out {
		p := out[i].PPID
		if p == 0 {
			continue
		}
		j, ok := byPID[p]
		if !ok {
			out[i].PPID = 0
			continue
		}
		pt, ct := out[j].Token, out[i].Token
		if !pt.IsZero() && !ct.IsZero() && pt.StartTicks > ct.StartTicks {
			out[i].PPID = 0
		}
	}
	return out, nil
}

// TokenOf returns the creation token of the process now holding pid,
// read through a handle (so the creation time and the sequence number
// describe one process).
func TokenOf(pid int) (Token, error) {
	h, err := openProcess(pid, queryAccess...)
	if err != nil {
		return Token{}, err
	}
	defer windows.CloseHandle(h)
	tok, err := tokenOfHandle(h)
	if err != nil {
		return Token{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	return tok, nil
}

// Verify returns nil when pid is running and carries tok. An exited
// process a handle still keeps counts as gone.
func Verify(pid int, tok Token) error {
	h, err := OpenHandle(pid, tok)
	if err != nil {
		return err
	}
	defer h.Close()
	gone, err := hasExited(h.Sys())
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	if gone {
		return fmt.Errorf("pid %d has exited: %w", pid, ErrGone)
	}
	return nil
}

// ZombieStatus returns the exit status of pid, carrying tok, once it has
// exited while some handle (ours or anyone's) still keeps the process
// object: how a process that is not our child ended, if we look in time.
func ZombieStatus(pid int, tok Token) (syscall.WaitStatus, bool) {
	h, err := openProcess(pid, queryAccess...)
	if err != nil {
		return syscall.WaitStatus{}, false
	}
	defer windows.CloseHandle(h)
	got, err := tokenOfHandle(h)
	if err != nil || !tok.Matches(got) {
		return syscall.WaitStatus{}, false
	}
	if gone, err := hasExited(h); err != nil || !gone {
		return syscall.WaitStatus{}, false
	}
	var code uint32
	if windows.GetExitCodeProcess(h, &code) != nil {
		return syscall.WaitStatus{}, false
	}
	return syscall.WaitStatus{ExitCode: code}, true
}

// SignalName is the signal's name as kill -l spells it ("SIGTERM"); the
// Windows syscall package's own String says "terminated".
func SignalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGILL:
		return "SIGILL"
	case syscall.SIGTRAP:
		return "SIGTRAP"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGFPE:
		return "SIGFPE"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGALRM:
		return "SIGALRM"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// SetChildSubreaper fails on Windows: there is no subreaper, and orphans
// are re-parented to nobody. A Job Object (job_windows.go) holds a
// server's whole tree instead, including descendants that outlive their
// parents.
func SetChildSubreaper() error {
	return fmt.Errorf("child subreaper: Windows has none (job objects hold the tree): %w", errors.ErrUnsupported)
}

// MarkInheritedCloexec does nothing on Windows: Go creates every handle
// non-inheritable, and os/exec passes a child only the handles listed in
// its attributes (PROC_THREAD_ATTRIBUTE_HANDLE_LIST), so a handle leaked
// into us by a host never reaches a server.
func MarkInheritedCloexec() ([]int, error) { return nil, nil }

// FdKind describes the file a handle refers to: fd is a handle value (for
// example int(os.Stdin.Fd())), not a C runtime descriptor. A pipe (and a
// socket, which GetFileType also calls a pipe) is "pipe", a console "tty",
// the NUL device (a character device that is not a console) "null", a
// disk file "file", anything else "other". Windows has no inode numbers
// for these; the inode is 0.
func FdKind(fd int) (string, uint64, error) {
	h := windows.Handle(fd)
	t, err := windows.GetFileType(h)
	if err != nil && t == windows.FILE_TYPE_UNKNOWN {
		return "", 0, fmt.Errorf("GetFileType of handle %#x: %w", fd, err)
	}
	switch t {
	case windows.FILE_TYPE_PIPE:
		return "pipe", 0, nil
	case windows.FILE_TYPE_CHAR:
		var mode uint32
		if windows.GetConsoleMode(h, &mode) == nil {
			return "tty", 0, nil
		}
		return "null", 0, nil
	case windows.FILE_TYPE_DISK:
		return "file", 0, nil
	}
	return "other", 0, nil
}

// FdKindOf is unsupported on Windows: another process's handles can only
// be listed through NtQuerySystemInformation(SystemHandleInformation) and
// duplicated into us, which this package does not do.
func FdKindOf(pid, fd int) (string, uint64, error) {
	return "", 0, fmt.Errorf("handle %#x of pid %d: %w", fd, pid, errors.ErrUnsupported)
}

// FdHolders returns nil on Windows, for the reason FdKindOf gives. It
// loses little: a server's Job Object holds every descendant, escaped or
// not, so terminating the job reaches whoever holds the host's pipes.
func FdHolders(pids []int, want map[uint64]bool) []FdRef { return nil }

// Namespaces returns 0, 0: Windows has no PID or mount namespaces. (A
// container is a silo the shim and the daemon cannot tell apart this way.)
func Namespaces() (pidNS, mntNS uint64) { return 0, 0 }

// Cgroup returns "": Windows has no cgroups (Job Objects play their part).
func Cgroup(pid int) (string, error) { return "", nil }

// WaitChannel is where pid sleeps in the kernel: Windows does not say.
func WaitChannel(int) string { return "" }
