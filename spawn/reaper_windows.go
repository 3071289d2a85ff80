package spawn

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Reaper is the only waiter for the daemon's children. Windows has no
// wait4(-1) and no SIGCHLD: each child's process handle is waited on by a
// goroutine of its own, which reads the exit code once the handle is
// signalled and hands the status to the channel registered for that PID.
// A Status from Windows never has a Signal: a process ended by
// TerminateProcess or TerminateJobObject shows the exit code its killer
// chose (1 for the cascade and proc's SIGKILL), a crash its NTSTATUS
// (0xC0000005 and the like, as an unsigned 32-bit number).
//
// The Reaper also owns the Job Objects of the processes it starts (design
// §5; internal/proc/job_windows.go): per session a session job created with
// JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, and per server a server job nested in
// it. A server's job is kept open after its main process exits, until the
// job is empty: the cascade that stops what the server left behind finds
// the job by name (proc.OpenJob), and a named object that nobody holds a
// handle to loses its name. The session job is released with the last of
// its server jobs. Closing it then kills whatever is still in it — by then
// normally nothing — and it is what ends a session's processes when every
// holder of the job dies: the daemon and the shims it shared the job with
// (ShareJob). This is intended: a session whose daemon and shims are all
// gone has nobody left to stop it.
//
// # Caveats
//
// Once Run has returned, no status is delivered any more (as on unix), and
// the job handles stay open until the process exits: closing them earlier
// would end every server whose session no shim holds, which the exit of
// the daemon does anyway.
type Reaper struct {
	log Logger
	// stop is a manual-reset event, set when Run ends: every waiter waits
	// on it beside its process handle, so none outlives Run.
	stop    windows.Handle
	stopErr error

	mu       sync.Mutex
	stopped  bool
	children map[int]*child
	sessions map[string]*sessionJob // by job name
	waiters  sync.WaitGroup
}

// child is one started process the reaper waits for.
type child struct {
	pid     int
	h       windows.Handle // owned by the reaper: full access from CreateProcess
	ch      chan Status
	server  *proc.Job   // its server job, nil when it has none
	session *sessionJob // nil when it has none
}

// sessionJob is a session's job, counted by the server jobs it holds.
type sessionJob struct {
	session string
	job     *proc.Job
	refs    int
}

// jobSpec names the jobs a process goes into.
type jobSpec struct {
	instance, session, procID string
}

// NewReaper returns a reaper; call Run to keep it going and to stop it.
func NewReaper(log Logger) *Reaper {
	if log == nil {
		log = nopLogger{}
	}
	r := &Reaper{
		log:      log,
		children: map[int]*child{},
		sessions: map[string]*sessionJob{},
	}
	ev, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		// Without it no waiter could be stopped: refuse to start children
		// (Fork) rather than leak goroutines.
		r.stopErr = fmt.Errorf("reaper: create stop event: %w", err)
	} else {
		r.stop = ev
	}
	return r
}

// Fork runs fork, which must start exactly one child and return its PID,
// and registers that PID before anyone can see it exit. inspect, if not
// nil, runs while the child's PID cannot have been recycled.
//
// On Windows the reaper opens the child by PID once fork returns, so fork
// must keep the child pinned until then: whatever started it holds its
// process handle (os.StartProcess's Process does) and closes it only after
// Fork returned. Start does not go through here: it hands the reaper the
// handle CreateProcess returned, and starts the child inside its jobs.
func (r *Reaper) Fork(fork func() (int, error), inspect func(pid int)) (int, <-chan Status, error) {
	create := func([]windows.Handle) (int, windows.Handle, bool, error) {
		pid, err := fork()
		if err != nil {
			return 0, 0, false, err
		}
		h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
		if err != nil {
			return 0, 0, false, fmt.Errorf("open started process %d: %w", pid, err)
		}
		return pid, h, false, nil
	}
	var check func(int, windows.Handle) error
	if inspect != nil {
		check = func(pid int, _ windows.Handle) error {
			inspect(pid)
			return nil
		}
	}
	return r.fork(nil, create, check)
}

// fork registers the child create starts, with its jobs. create gets the
// job handles to start the child in (none when jobs is nil or the jobs
// could not be made) and reports whether the child is in them. check runs
// under the lock, before the waiter may release the child's handle; an
// error from it terminates the child (and its server job, which holds
// anything it forked meanwhile).
func (r *Reaper) fork(jobs *jobSpec, create func(jobs []windows.Handle) (int, windows.Handle, bool, error),
	check func(pid int, h windows.Handle) error) (int, <-chan Status, error) {
	if r.stopErr != nil {
		return 0, nil, r.stopErr
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return 0, nil, errors.New("reaper: stopped: nobody would collect the exit status")
	}
	var sess *sessionJob
	var server *proc.Job
	var handles []windows.Handle
	if jobs != nil {
		var err error
		sess, server, err = r.makeJobs(*jobs)
		if err != nil {
			// Like a cgroup (design §5): used where it can be had, never
			// required. The cascade falls back to the markers.
			r.log.Warn("starting without job objects", "session", jobs.session, "proc", jobs.procID, "err", err)
		} else {
			handles = []windows.Handle{sess.job.Handle()}
			if server != nil {
				handles = append(handles, server.Handle())
			}
		}
	}
	pid, h, joined, err := create(handles)
	if err == nil && !joined && handles != nil {
		r.log.Warn("started outside its job objects", "pid", pid, "session", jobs.session, "proc", jobs.procID)
	}
	if err != nil || !joined {
		r.releaseJobs(sess, server)
		sess, server = nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	c := &child{pid: pid, h: h, ch: make(chan Status, 1), server: server, session: sess}
	r.children[pid] = c
	r.waiters.Add(1)
	go r.watch(c)
	if check != nil {
		if err := check(pid, h); err != nil {
			// Refuse a process we could not identify; it is still pinned
			// by our handle, so this reaches it and nobody else.
			if server != nil {
				server.Terminate(1)
			}
			windows.TerminateProcess(h, 1)
			return pid, c.ch, err
		}
	}
	return pid, c.ch, nil
}

// makeJobs returns the session's job (created on first use, kill on close)
// with one more reference, and a fresh server job. Called with r.mu held.
func (r *Reaper) makeJobs(spec jobSpec) (*sessionJob, *proc.Job, error) {
	name := proc.JobName(spec.instance, spec.session, "")
	sess := r.sessions[name]
	if sess == nil {
		job, err := proc.CreateJob(name, true)
		if err != nil {
			return nil, nil, fmt.Errorf("session job: %w", err)
		}
		sess = &sessionJob{session: spec.session, job: job}
		r.sessions[name] = sess
	}
	sess.refs++
	if spec.procID == "" {
		return sess, nil, nil // no id, no name of its own: the session job alone
	}
	server, err := proc.CreateJob(proc.JobName(spec.instance, spec.session, spec.procID), false)
	if err != nil {
		r.releaseJobs(sess, nil)
		return nil, nil, fmt.Errorf("server job: %w", err)
	}
	return sess, server, nil
}

// releaseJobs closes a server job and drops its reference on the session
// job, closing that with its last reference. Called with r.mu held.
func (r *Reaper) releaseJobs(sess *sessionJob, server *proc.Job) {
	if server != nil {
		if err := server.Close(); err != nil {
			r.log.Warn("close server job", "err", err)
		}
	}
	if sess == nil {
		return
	}
	sess.refs--
	if sess.refs > 0 {
		return
	}
	for name, s := range r.sessions {
		if s == sess {
			delete(r.sessions, name)
		}
	}
	if err := sess.job.Close(); err != nil {
		r.log.Warn("close session job", "session", sess.session, "err", err)
	}
}

// watch waits for c to exit and delivers its status; then, if c has a
// server job, waits for the job to empty before releasing it.
func (r *Reaper) watch(c *child) {
	defer r.waiters.Done()
	handles := []windows.Handle{c.h, r.stop}
	ev, err := windows.WaitForMultipleObjects(handles, false, windows.INFINITE)
	runtime.KeepAlive(handles)
	if err != nil {
		// A failed wait must not lose the child: its status would never
		// be delivered and its jobs never released. Wait on it alone.
		r.log.Error("wait for child; waiting on its handle alone", "pid", c.pid, "err", err)
		if _, werr := windows.WaitForSingleObject(c.h, windows.INFINITE); werr != nil {
			r.log.Error("wait for child", "pid", c.pid, "err", werr)
		}
		ev = windows.WAIT_OBJECT_0
	}
	if ev != windows.WAIT_OBJECT_0 {
		// Stopped: the handle goes, the jobs stay (see Reaper).
		r.mu.Lock()
		delete(r.children, c.pid)
		windows.CloseHandle(c.h)
		r.mu.Unlock()
		return
	}
	var code uint32
	if err := windows.GetExitCodeProcess(c.h, &code); err != nil {
		r.log.Warn("read exit code", "pid", c.pid, "err", err)
	}
	// Under the lock: Start's check may still be using the handle.
	r.mu.Lock()
	delete(r.children, c.pid)
	windows.CloseHandle(c.h)
	r.mu.Unlock()
	c.ch <- Status{PID: c.pid, Code: int(code)}

	if c.server != nil && !r.waitEmpty(c.server) {
		return // stopped
	}
	r.mu.Lock()
	r.releaseJobs(c.session, c.server)
	r.mu.Unlock()
}

// waitEmpty waits until job has no process left: it waits on the process
// handles of (up to 63 of) its members and lists them again whenever one
// exits. It reports false when Run ended first.
func (r *Reaper) waitEmpty(job *proc.Job) bool {
	for {
		pids, err := job.PIDs()
		if err != nil {
			r.log.Warn("list the processes of a server job; releasing it", "err", err)
			return true
		}
		if len(pids) == 0 {
			return true
		}
		handles := []windows.Handle{r.stop}
		for _, pid := range pids {
			if len(handles) == maximumWaitObjects {
				break // any exit lists the job again; the rest wait their turn
			}
			if h, ok := openJobMember(pid, job.Handle()); ok {
				handles = append(handles, h)
			}
		}
		// With no member to wait on (each exited between the listing and
		// the open, or refuses to be opened), look again after a while
		// rather than spin.
		limit := uint32(windows.INFINITE)
		if len(handles) == 1 {
			limit = uint32(time.Second / time.Millisecond)
		}
		ev, err := windows.WaitForMultipleObjects(handles, false, limit)
		runtime.KeepAlive(handles)
		for _, h := range handles[1:] {
			windows.CloseHandle(h)
		}
		if err != nil {
			r.log.Warn("wait for the processes of a server job; releasing it", "err", err)
			return true
		}
		if ev == windows.WAIT_OBJECT_0 {
			return false
		}
	}
}

// openJobMember opens pid for waiting, and only if the process is in job:
// the PID may have been recycled since the job was listed.
func openJobMember(pid int, job windows.Handle) (windows.Handle, bool) {
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return 0, false
	}
	if in, err := isProcessInJob(h, job); err != nil || !in {
		windows.CloseHandle(h)
		return 0, false
	}
	return h, true
}

// Run keeps the reaper until ctx is done, then stops every waiter and
// returns once they are gone.
func (r *Reaper) Run(ctx context.Context) error {
	if r.stopErr != nil {
		return r.stopErr
	}
	<-ctx.Done()
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	if err := windows.SetEvent(r.stop); err != nil {
		return fmt.Errorf("reaper: stop waiters: %w", err)
	}
	r.waiters.Wait()
	return nil
}

// ShareJob duplicates the handle of session's job into the process pid
// and returns the handle's value there. A shim holds it so that the
// session job, whose last handle kills its processes when it closes,
// survives the daemon: while the daemon is down (or restarting) its
// servers keep running (design §2). The duplicate carries
// JOB_OBJECT_QUERY only: holding is all it is for.
func (r *Reaper) ShareJob(session string, pid int) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sess *sessionJob
	for _, s := range r.sessions {
		if s.session == session {
			sess = s
			break
		}
	}
	if sess == nil {
		return 0, fmt.Errorf("share the job of session %q: no server of it runs", session)
	}
	target, err := windows.OpenProcess(windows.PROCESS_DUP_HANDLE, false, uint32(pid))
	if err != nil {
		return 0, fmt.Errorf("share the job of session %q: open process %d: %w", session, pid, err)
	}
	defer windows.CloseHandle(target)
	var dup windows.Handle
	if err := windows.DuplicateHandle(windows.CurrentProcess(), sess.job.Handle(), target, &dup,
		jobObjectQuery, false, 0); err != nil {
		return 0, fmt.Errorf("share the job of session %q with process %d: %w", session, pid, err)
	}
	return uint64(dup), nil
}

// Values of winnt.h that x/sys does not name.
const (
	jobObjectQuery     = 0x0004 // JOB_OBJECT_QUERY
	maximumWaitObjects = 64     // MAXIMUM_WAIT_OBJECTS
)

var (
	modkernel32        = windows.NewLazySystemDLL("kernel32.dll")
	procIsProcessInJob = modkernel32.NewProc("IsProcessInJob")
)

// isProcessInJob reports whether the process h is in job (or in a job
// nested in it).
func isProcessInJob(h, job windows.Handle) (bool, error) {
	if err := procIsProcessInJob.Find(); err != nil {
		return false, fmt.Errorf("IsProcessInJob: %w", err)
	}
	var in int32
	r, _, e := procIsProcessInJob.Call(uintptr(h), uintptr(job), uintptr(unsafe.Pointer(&in)))
	if r == 0 {
		return false, fmt.Errorf("IsProcessInJob: %w", e)
	}
	return in != 0, nil
}
