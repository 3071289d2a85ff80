package proc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Job Objects are how Windows keeps a process tree (design §5, §6): a
// process in a job stays in it, and so do the children it creates, even
// after their parent exits; Windows keeps no parent links worth trusting
// and has no subreaper, so the job is the tree. The daemon keeps a job per
// session, created with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, and a job per
// server nested in it (Windows 8+). The stop cascade sends CTRL_BREAK to
// the server's console group where it has one, then calls Terminate.
//
// Caveats:
//
//   - A process must be in its job before it creates children: a child
//     created before the assignment is not in the job. Either name the
//     jobs at creation (PROC_THREAD_ATTRIBUTE_JOB_LIST, Windows 10+: atomic,
//     as cloning into a cgroup is), or start the process suspended
//     (CREATE_SUSPENDED), assign it, then resume it.
//   - Kill-on-close fires when the last handle to the job closes, whoever
//     holds it; processes in the job hold none. A daemon that dies with the
//     only handle takes the job's processes with it: whoever must outlive
//     the daemon (a shim) keeps a handle too, through OpenJob.
//   - Jobs nest through assignment (Windows 8+): a process already in a job
//     can be assigned to a job with no processes yet, which then nests
//     under the first, or to a job below it in its hierarchy; anything else
//     fails. So a server goes to its session's job first and to its own
//     fresh server job second; the other order fails once the session job
//     holds processes. Terminating or closing the session job reaches
//     every server job nested in it.

// Job access rights (winnt.h); x/sys names none of them.
const (
	jobAssignProcess = 0x0001 // JOB_OBJECT_ASSIGN_PROCESS
	jobSetAttributes = 0x0002 // JOB_OBJECT_SET_ATTRIBUTES
	jobQuery         = 0x0004 // JOB_OBJECT_QUERY
	jobTerminate     = 0x0008 // JOB_OBJECT_TERMINATE

	// jobAccess is everything Job's methods need.
	jobAccess = jobAssignProcess | jobSetAttributes | jobQuery | jobTerminate | windows.SYNCHRONIZE
)

var (
	modkernel32        = windows.NewLazySystemDLL("kernel32.dll")
	procOpenJobObjectW = modkernel32.NewProc("OpenJobObjectW")
)

// maxJobName keeps names under MAX_PATH, the limit of job object names.
const maxJobName = 250

// JobName names a job in the Local\ namespace (this logon session's
// objects): `Local\supervisor/<instance>/<session>` for a session's job and
// `Local\supervisor/<instance>/<session>/<procID>` for a server's, procID
// empty meaning the session's. instance keeps the names of daemons with
// different state directories apart. In each part the characters of
// session ids ([A-Za-z0-9._-]) stay as they are and every other byte is
// written %XX, so the '/' separators are unambiguous and distinct inputs
// give distinct names (and no backslash, which would be a namespace
// separator). A name that would exceed MAX_PATH is cut and ends in a hash
// of the whole.
//
// A name is no security boundary: any process of this logon session can
// open or squat it.
func JobName(instance, session, procID string) string {
	parts := []string{instance, session}
	if procID != "" {
		parts = append(parts, procID)
	}
	var b strings.Builder
	b.WriteString(`Local\supervisor`)
	for _, p := range parts {
		b.WriteByte('/')
		for i := 0; i < len(p); i++ {
			c := p[i]
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
	}
	name := b.String()
	if len(name) <= maxJobName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	tail := "#" + hex.EncodeToString(sum[:16])
	return name[:maxJobName-len(tail)] + tail
}

// Job is a Job Object handle.
type Job struct {
	h    atomic.Uintptr // windows.Handle; 0 once closed
	name string
}

// CreateJob creates the job called name (from JobName; "" for an anonymous
// job). If a job of that name already exists it is opened and returned
// instead: the name stands for one job, and whoever comes second joins it.
// killOnClose sets JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, keeping the job's
// other limits (on an existing job too); false leaves the job's limits as
// they are, it does not clear a kill-on-close set by the creator.
func CreateJob(name string, killOnClose bool) (*Job, error) {
	var pname *uint16
	if name != "" {
		var err error
		if pname, err = windows.UTF16PtrFromString(name); err != nil {
			return nil, fmt.Errorf("job name %q: %w", name, err)
		}
	}
	h, err := windows.CreateJobObject(nil, pname)
	if err != nil {
		return nil, fmt.Errorf("CreateJobObject %q: %w", name, err)
	}
	j := &Job{name: name}
	j.h.Store(uintptr(h))
	if killOnClose {
		if err := j.setKillOnClose(); err != nil {
			j.Close()
			return nil, err
		}
	}
	return j, nil
}

// setKillOnClose adds JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE to the job's
// limits, read first so that no other limit is lost.
func (j *Job) setKillOnClose() error {
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if err := windows.QueryInformationJobObject(j.Handle(), windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil); err != nil {
		return fmt.Errorf("query limits of job %q: %w", j.name, err)
	}
	info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(j.Handle(), windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		return fmt.Errorf("set kill-on-close on job %q: %w", j.name, err)
	}
	return nil
}

// OpenJob opens the existing job called name, with the rights Job's
// methods need. A job nobody holds a handle to any more is gone: its
// absence gives an error matching fs.ErrNotExist (ERROR_FILE_NOT_FOUND).
func OpenJob(name string) (*Job, error) {
	if err := procOpenJobObjectW.Find(); err != nil {
		return nil, fmt.Errorf("OpenJobObjectW: %w", err)
	}
	pname, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, fmt.Errorf("job name %q: %w", name, err)
	}
	r, _, e := procOpenJobObjectW.Call(jobAccess, 0, uintptr(unsafe.Pointer(pname)))
	if r == 0 {
		return nil, fmt.Errorf("OpenJobObject %q: %w", name, e)
	}
	j := &Job{name: name}
	j.h.Store(r)
	return j, nil
}

// Handle is the job's HANDLE. It stays owned by j.
func (j *Job) Handle() windows.Handle { return windows.Handle(j.h.Load()) }

// Assign puts the process h refers to in the job (see the caveats above
// for nesting). The handle must have been opened with PROCESS_SET_QUOTA
// and PROCESS_TERMINATE, which OpenHandle asks for first; a process that
// has exited gives ErrGone.
func (j *Job) Assign(h *Handle) error {
	if err := windows.AssignProcessToJobObject(j.Handle(), h.Sys()); err != nil {
		if gone, gerr := hasExited(h.Sys()); gerr == nil && gone {
			return fmt.Errorf("pid %d: %w", h.PID(), ErrGone)
		}
		return fmt.Errorf("assign pid %d to job %q: %w", h.PID(), j.name, err)
	}
	return nil
}

// AssignPID puts pid in the job once it is proven to carry tok: the token
// is checked on the very handle the assignment uses.
func (j *Job) AssignPID(pid int, tok Token) error {
	h, err := openProcess(pid, windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|
		windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.SYNCHRONIZE)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	got, err := tokenOfHandle(h)
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	if !tok.Matches(got) {
		return fmt.Errorf("pid %d: %w", pid, ErrTokenMismatch)
	}
	if err := windows.AssignProcessToJobObject(j.Handle(), h); err != nil {
		if gone, gerr := hasExited(h); gerr == nil && gone {
			return fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return fmt.Errorf("assign pid %d to job %q: %w", pid, j.name, err)
	}
	return nil
}

// jobPIDList mirrors JOBOBJECT_BASIC_PROCESS_ID_LIST; its ids field gives
// the offset of the variable-length list.
type jobPIDList struct {
	assigned uint32
	inList   uint32
	ids      [1]uintptr
}

// PIDs lists the processes in the job, those of nested jobs included. The
// list is a snapshot: its processes may exit, and their PIDs be recycled,
// once it is taken; act on a PID only through OpenHandle with a token.
func (j *Job) PIDs() ([]int, error) {
	const off = unsafe.Offsetof(jobPIDList{}.ids)
	n := 64
	for range 16 {
		// uintptr words: aligned for the list, and holding no Go pointers.
		buf := make([]uintptr, int(off/ptrSize)+n)
		err := windows.QueryInformationJobObject(j.Handle(), windows.JobObjectBasicProcessIdList,
			uintptr(unsafe.Pointer(&buf[0])), uint32(len(buf))*uint32(ptrSize), nil)
		hdr := (*jobPIDList)(unsafe.Pointer(&buf[0]))
		if errors.Is(err, windows.ERROR_MORE_DATA) {
			// Processes joined while we asked: grow with room to spare.
			n = max(2*n, int(hdr.assigned)+16)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list processes of job %q: %w", j.name, err)
		}
		ids := buf[off/ptrSize:][:min(int(hdr.inList), n)]
		out := make([]int, len(ids))
		for i, id := range ids {
			out[i] = int(id)
		}
		return out, nil
	}
	return nil, fmt.Errorf("list processes of job %q: the job kept growing", j.name)
}

// Terminate ends every process in the job, and in the jobs nested in it,
// with exit code code.
func (j *Job) Terminate(code uint32) error {
	if err := windows.TerminateJobObject(j.Handle(), code); err != nil {
		return fmt.Errorf("terminate job %q: %w", j.name, err)
	}
	return nil
}

// Close releases the handle; with kill-on-close set and no other handle
// left, this ends the job's processes. Safe to call twice.
func (j *Job) Close() error {
	h := windows.Handle(j.h.Swap(0))
	if h == 0 {
		return nil
	}
	if err := windows.CloseHandle(h); err != nil {
		return fmt.Errorf("close job %q: %w", j.name, err)
	}
	return nil
}
