package shutdown

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/windows"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

type member struct {
	pid    int
	h      *proc.Handle // nil once exited
	target int
	role   Role
	result Result // the phase in which it exited
	asked  bool   // CTRL_BREAK tried
	killed bool   // terminated
}

// Completion keys on the run's port.
const (
	keyWake uintptr = iota + 1 // a force, or ctx is done
	keyExit                    // a watched member handle was signalled
	keyJob                     // keyJob+i: a message of target i's job
)

// The Windows run keeps Stop's semantics (stop.go); what differs is how
// Windows holds a tree and asks it to stop:
//
//   - A target's tree is its server job (proc.JobName(instance, session,
//     ID), opened by name; spawn starts every server inside one and keeps
//     it until it is empty), which holds every descendant, escaped or not.
//     Where there is no job (started outside one, or its name is gone) the
//     tree is the leader plus, from one process scan, the holders of its
//     markers and their descendants by parent PID. With WholeSession the
//     holders of the session's marker join too, as on unix. The instance
//     is Options.Instance, else the leader's SUPERVISOR_INSTANCE.
//   - SIGTERM is CTRL_BREAK to the console process group of each member
//     that leads one (the leader, started with CREATE_NEW_PROCESS_GROUP),
//     and to the group of a leader that just exited (LeaderJustExited)
//     while its number cannot have been reused; it reaches the group only
//     when it shares our console. A target no CTRL_BREAK could reach (no
//     console in common, or its leader is gone for longer) is terminated
//     at once: waiting out a grace nobody was told about would only delay
//     the host's EOF.
//   - SIGKILL is TerminateJobObject (exit code 1) plus TerminateProcess for
//     members outside the job. A job holding a process spared for
//     SUPERVISOR_KEEP=1 is never terminated whole: its other members are
//     terminated one by one (a process cannot leave a job, so this is the
//     only way to spare it).
//   - Waiting is event-driven: one I/O completion port receives the jobs'
//     messages (new process, exit, active count zero), the exits of member
//     handles (watched with WaitForMultipleObjects, 63 to a goroutine) and
//     the wakes of Force and ctx. Job messages may be lost (Windows does
//     not guarantee them) and a job already has a port when an earlier
//     cascade left one behind; the member handles alone still end every
//     wait, since each exit lists the job again.
//
// Never signalled: PID 0 and 4, the caller, Excluded PIDs, the Spared
// processes, and any process whose creation token cannot be read and
// verified through a handle. There are no pipe holders on Windows
// (proc.FdHolders is empty there): the job holds whoever got the server's
// handles from its tree.
type run struct {
	state

	members map[int]*member
	asked   []bool // per target: a CTRL_BREAK went to one of its groups
	// orphanAsked: the group of an exited leader was considered once.
	orphanAsked []bool
	jobs        []*proc.Job // per target: its server job, if found
	ported      []bool      // per target: its job posts to port
	spared      [][]int     // per target: kept for SUPERVISOR_KEEP=1
	kept        map[int]proc.Token
	touch       map[int]bool // job members judged by mayTouch
	checked     bool         // leaders and jobs looked at
	scanning    bool         // some target needs the process scan

	// port receives every wake of wait; 0 when it could not be made (wait
	// then sleeps to its deadline or a wake on pokeCh). stopWatch stops the
	// member watchers of one wait round.
	port      windows.Handle
	stopWatch windows.Handle
	pokeCh    chan struct{}
}

func newRun(c *Cascade, targets []Target, opt Options, log hclog.Logger) *run {
	r := &run{members: map[int]*member{},
		asked: make([]bool, len(targets)), orphanAsked: make([]bool, len(targets)),
		jobs: make([]*proc.Job, len(targets)), ported: make([]bool, len(targets)),
		spared: make([][]int, len(targets)), kept: map[int]proc.Token{}, touch: map[int]bool{},
		pokeCh: make(chan struct{}, 1)}
	r.state.init(c, targets, opt, log, os.Getpid())
	port, err := windows.CreateIoCompletionPort(windows.InvalidHandle, 0, 0, 1)
	if err == nil {
		ev, err2 := windows.CreateEvent(nil, 1, 0, nil)
		if err2 == nil {
			r.port, r.stopWatch = port, ev
		} else {
			windows.CloseHandle(port)
			err = err2
		}
	}
	if err != nil {
		log.Warn("no completion port: waits end only at their deadlines", "err", err)
	}
	return r
}

// collect adds every process that belongs to a target's tree and is not a
// member yet, and returns how many it added. The first call is the
// snapshot taken before any signal; later calls find what was started
// since.
func (r *run) collect() int {
	added := 0
	if !r.checked {
		r.checked = true
		for i, t := range r.targets {
			if r.addLeader(i, t) {
				added++
			}
			r.openJob(i)
			if r.jobs[i] == nil {
				r.scanning = true
			}
		}
		if r.opt.WholeSession {
			r.scanning = true
		}
	}
	added += r.collectJobs()
	if r.scanning {
		added += r.collectScan()
	}
	return added
}

// addLeader makes target i's leader a member when it still runs and
// carries the recorded token.
func (r *run) addLeader(i int, t Target) bool {
	if r.members[t.PID] != nil || !r.allowed(t.PID, t.Token) {
		return false
	}
	h, err := proc.OpenHandle(t.PID, t.Token)
	if err != nil {
		return false // gone, or the PID is someone else's now
	}
	if h.Wait(0) {
		h.Close() // exited; some handle keeps its process object
		return false
	}
	r.members[t.PID] = &member{pid: t.PID, h: h, target: i, role: RoleLeader}
	return true
}

// openJob opens target i's server job and ties it to the port.
func (r *run) openJob(i int) {
	t := r.targets[i]
	instance := r.opt.Instance
	leader := r.members[t.PID]
	if leader != nil && leader.target != i {
		leader = nil
	}
	if instance == "" && leader != nil {
		// A caller that does not know the instance (a local-mode shim, the
		// doctor): the leader carries it.
		if env, err := proc.Environ(t.PID); err == nil {
			instance, _ = proc.EnvValue(env, EnvInstance)
		}
	}
	job, err := proc.OpenJob(proc.JobName(instance, t.Session, t.ID))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("open server job; falling back to markers", "id", t.ID, "err", err)
		}
		return
	}
	if leader != nil {
		// A name is no proof: any process of the logon session could have
		// made it. A live leader must be in the job that bears its name.
		if in, err := isProcessInJob(leader.h.Sys(), job.Handle()); err != nil || !in {
			r.log.Warn("a job bears the server's name but does not hold it; falling back to markers", "id", t.ID, "pid", t.PID)
			job.Close()
			return
		}
	}
	r.jobs[i] = job
	if r.port == 0 {
		return
	}
	assoc := jobCompletionPort{key: keyJob + uintptr(i), port: r.port}
	if _, err := windows.SetInformationJobObject(job.Handle(), windows.JobObjectAssociateCompletionPortInformation,
		uintptr(unsafe.Pointer(&assoc)), uint32(unsafe.Sizeof(assoc))); err != nil {
		// One port per job: an earlier cascade that died keeps it. The
		// member handles carry the waits alone then.
		r.log.Debug("job messages unavailable", "id", t.ID, "err", err)
		return
	}
	r.ported[i] = true
}

// jobCompletionPort mirrors JOBOBJECT_ASSOCIATE_COMPLETION_PORT.
type jobCompletionPort struct {
	key  uintptr
	port windows.Handle
}

// collectJobs adds the processes of the targets' jobs that are not
// members yet.
func (r *run) collectJobs() int {
	added := 0
	for i, job := range r.jobs {
		if job == nil || r.result[i] != "" {
			continue
		}
		pids, err := job.PIDs()
		if err != nil {
			r.log.Warn("list the processes of a server job", "id", r.targets[i].ID, "err", err)
			continue
		}
		for _, pid := range pids {
			if r.members[pid] != nil {
				continue
			}
			tok, err := proc.TokenOf(pid)
			if err != nil || !r.allowed(pid, tok) || r.isKept(pid, tok) {
				continue
			}
			h, err := proc.OpenHandle(pid, tok)
			if err != nil {
				continue
			}
			// The PID was listed by the job but opened afterwards: only a
			// process in the job is the one listed.
			if in, err := isProcessInJob(h.Sys(), job.Handle()); err != nil || !in || h.Wait(0) {
				h.Close()
				continue
			}
			if env, err := proc.Environ(pid); err == nil && pid != r.targets[i].PID && r.keep(i, pid, tok, env) {
				h.Close()
				continue
			}
			r.members[pid] = &member{pid: pid, h: h, target: i, role: RoleTree}
			added++
		}
	}
	return added
}

// collectScan adds, from one process scan, the holders of the targets'
// markers and the descendants (by parent PID) of the members of targets
// without a job: with a job, every descendant is in it.
func (r *run) collectScan() int {
	infos, err := proc.Scan()
	if err != nil {
		r.log.Warn("scan processes", "err", err)
		return 0
	}
	added := 0
	children := map[int][]proc.Info{}
	for _, info := range infos {
		children[info.PPID] = append(children[info.PPID], info)
	}
	for _, info := range infos {
		if r.members[info.PID] != nil || !r.allowed(info.PID, info.Token) || r.isKept(info.PID, info.Token) {
			continue
		}
		env, err := proc.Environ(info.PID)
		if err != nil {
			continue
		}
		i, ok := r.markerTarget(env)
		if !ok || r.keep(i, info.PID, info.Token, env) {
			continue
		}
		if r.add(i, info, RoleMarker) {
			added++
		}
	}
	queue := make([]*member, 0, len(r.members))
	for _, m := range r.members {
		if r.jobs[m.target] == nil {
			queue = append(queue, m)
		}
	}
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		for _, info := range children[m.pid] {
			if r.members[info.PID] != nil || !r.allowed(info.PID, info.Token) || r.isKept(info.PID, info.Token) {
				continue
			}
			if env, err := proc.Environ(info.PID); err == nil && r.keep(m.target, info.PID, info.Token, env) {
				continue
			}
			if r.add(m.target, info, RoleTree) {
				added++
				queue = append(queue, r.members[info.PID])
			}
		}
	}
	return added
}

// add makes info a member of target i, through a handle verified against
// its token. It reports whether it added one.
func (r *run) add(i int, info proc.Info, role Role) bool {
	if r.members[info.PID] != nil {
		return false
	}
	h, err := proc.OpenHandle(info.PID, info.Token)
	if err != nil {
		return false // exited (or recycled) between scan and open
	}
	if h.Wait(0) {
		h.Close()
		return false
	}
	r.members[info.PID] = &member{pid: info.PID, h: h, target: i, role: role}
	return true
}

// allowed says whether a process may be signalled at all.
func (r *run) allowed(pid int, tok proc.Token) bool {
	if pid <= 4 || pid == r.self || tok.IsZero() {
		return false // the idle process, System, us, or unverifiable
	}
	for _, p := range r.c.Excluded {
		if p == pid {
			return false
		}
	}
	for _, t := range r.targets {
		for _, s := range t.Spared {
			if s.PID == pid && s.Token.Matches(tok) {
				return false
			}
		}
	}
	return true
}

// markerTarget finds the target an environment's markers point at.
func (r *run) markerTarget(env []string) (int, bool) {
	return markerTarget(env, r.byID, r.targets, r.opt)
}

// keep reports (and logs once) a process spared by SUPERVISOR_KEEP=1.
func (r *run) keep(i, pid int, tok proc.Token, env []string) bool {
	if v, _ := proc.EnvValue(env, EnvKeep); v != "1" {
		return false
	}
	if _, seen := r.kept[pid]; !seen {
		r.kept[pid] = tok
		r.spared[i] = append(r.spared[i], pid)
		r.log.Info("sparing a process that asked to be kept", "pid", pid, "target", r.targets[i].ID, "env", EnvKeep+"=1")
	}
	return true
}

func (r *run) isKept(pid int, tok proc.Token) bool {
	k, ok := r.kept[pid]
	return ok && k.Matches(tok)
}

// populated reports whether target i's job still holds a process other
// than the ones spared.
func (r *run) populated(i int) bool {
	job := r.jobs[i]
	if job == nil {
		return false
	}
	pids, err := job.PIDs()
	if err != nil {
		return false
	}
	for _, pid := range pids {
		if _, kept := r.kept[pid]; !kept && r.mayTouch(pid) {
			return true
		}
	}
	return false
}

// mayTouch reports whether pid is a process the cascade may signal (see
// allowed): one it may not is no reason to wait for the job. Each job
// member is judged once, when first seen: populated asks on every wait.
func (r *run) mayTouch(pid int) bool {
	ok, seen := r.touch[pid]
	if !seen {
		tok, err := proc.TokenOf(pid)
		ok = err == nil && r.allowed(pid, tok)
		r.touch[pid] = ok
	}
	return ok
}

// holdsProtected reports whether job holds a process the cascade must
// never touch (this process, an Excluded or Spared one, one it cannot
// verify): TerminateJobObject would end it too, so the members are then
// terminated one by one instead.
func (r *run) holdsProtected(job *proc.Job) bool {
	pids, err := job.PIDs()
	if err != nil {
		return true
	}
	for _, pid := range pids {
		if !r.mayTouch(pid) {
			r.log.Info("server job holds a process the cascade must not touch; terminating its members one by one", "pid", pid)
			return true
		}
	}
	return false
}

func (r *run) watchForces(ctx context.Context) {
	for i, t := range r.targets {
		if t.Force == nil {
			continue
		}
		r.goroutines.Add(1)
		go func(i int, force <-chan struct{}) {
			defer r.goroutines.Done()
			select {
			case <-force:
				r.forced[i].Store(true)
				r.wake()
			case <-ctx.Done():
			}
		}(i, t.Force)
	}
}

// anyAlive reports whether some target still has a process to wait for.
func (r *run) anyAlive() bool {
	for _, m := range r.members {
		if m.h != nil {
			return true
		}
	}
	for i := range r.targets {
		if r.result[i] == "" && r.populated(i) {
			return true
		}
	}
	return false
}

// escalate moves target i to terminating: its job, then every member.
func (r *run) escalate(i int) {
	r.tphase[i] = Killed
	r.terminateJob(i)
	for _, m := range r.members {
		if m.target == i {
			r.kill(m)
		}
	}
}

// terminateJob ends target i's job as a whole, unless it holds a process
// spared for SUPERVISOR_KEEP=1 (whose siblings are then terminated one by
// one, as members).
func (r *run) terminateJob(i int) {
	if job := r.jobs[i]; job != nil && len(r.spared[i]) == 0 && !r.holdsProtected(job) {
		if err := job.Terminate(1); err != nil {
			r.log.Warn("terminate server job", "id", r.targets[i].ID, "err", err)
		}
	}
}

// signalNew signals members that have not had their target's current
// signal yet: CTRL_BREAK in the grace, termination after it.
func (r *run) signalNew() {
	for _, m := range r.members {
		if m.h == nil {
			continue
		}
		switch r.tphase[m.target] {
		case ExitedOnSIGTERM:
			if !m.asked {
				r.ask(m)
			}
		case Killed:
			if !m.killed {
				r.kill(m)
			}
		}
	}
	for i := range r.targets {
		if r.result[i] != "" {
			continue
		}
		switch r.tphase[i] {
		case ExitedOnSIGTERM:
			if !r.orphanAsked[i] {
				r.orphanAsked[i] = true
				r.askOrphanGroup(i)
			}
		case Killed:
			if r.populated(i) {
				r.terminateJob(i) // a process started into it meanwhile
			}
		}
	}
}

// askOrphanGroup sends CTRL_BREAK to the console group of target i's
// leader when the leader exited just now and left processes behind: they
// are still in the group its PID named, and proc will not signal a group
// through a handle to a process that no longer runs. As on unix
// (groupIsOurs), the number is the target's only while no live process
// holds that PID (a group id is its creator's PID, so a new group by that
// number needs a new process with it), and never when it is our own group.
func (r *run) askOrphanGroup(i int) {
	t := r.targets[i]
	if !t.LeaderJustExited || t.PGID != t.PID || t.PGID <= 4 || r.members[t.PID] != nil {
		return
	}
	alive := false
	for _, m := range r.members {
		if m.target == i && m.h != nil {
			alive = true
			break
		}
	}
	if !alive {
		return
	}
	if _, err := proc.TokenOf(t.PGID); !errors.Is(err, proc.ErrGone) {
		return // the PID is taken again (or we cannot tell)
	}
	if own, ok := ownConsoleGroup(); !ok || own == uint32(t.PGID) {
		return
	}
	if err := windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(t.PGID)); err != nil {
		r.log.Debug("no CTRL_BREAK to the group of an exited leader", "id", t.ID, "group", t.PGID, "err", err)
		return
	}
	r.asked[i] = true
}

// ownConsoleGroup returns this process's console process group, from its
// own process parameters block.
func ownConsoleGroup() (uint32, bool) {
	peb := windows.RtlGetCurrentPeb()
	if peb == nil || peb.ProcessParameters == nil {
		return 0, false
	}
	pp := peb.ProcessParameters
	if uintptr(pp.Length) < unsafe.Offsetof(pp.ProcessGroupId)+unsafe.Sizeof(pp.ProcessGroupId) {
		return 0, false
	}
	return pp.ProcessGroupId, true
}

// ask sends CTRL_BREAK to the console group m leads. proc refuses a
// process that leads no group of its own (the break to its leader's group
// reaches it) and one in our own group: those refusals are expected.
func (r *run) ask(m *member) {
	m.asked = true
	err := m.h.Signal(syscall.SIGTERM)
	switch {
	case err == nil:
		r.asked[m.target] = true
	case errors.Is(err, proc.ErrGone):
	default:
		r.log.Debug("no CTRL_BREAK", "pid", m.pid, "err", err)
	}
}

func (r *run) kill(m *member) {
	if m.h == nil {
		return
	}
	m.killed = true
	if err := m.h.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, proc.ErrGone) {
		r.log.Warn("terminate", "pid", m.pid, "err", err)
	}
}

// reap closes the handles of members that have exited, recording the
// phase they exited in.
func (r *run) reap() {
	for _, m := range r.members {
		if m.h != nil && m.h.Wait(0) {
			m.h.Close()
			m.h = nil
			m.result = r.tphase[m.target]
		}
	}
}

// finish marks every target whose processes are all gone as ended in its
// current phase.
func (r *run) finish() {
	for i := range r.targets {
		if r.result[i] != "" {
			continue
		}
		done := true
		for _, m := range r.members {
			if m.target == i && m.h != nil {
				done = false
				break
			}
		}
		if done && !r.populated(i) {
			r.result[i] = r.tphase[i]
		}
	}
}

// outcomes assembles the per-target reports.
func (r *run) outcomes(left Result) []Outcome {
	out := make([]Outcome, len(r.targets))
	for i, t := range r.targets {
		o := Outcome{ID: t.ID, PID: t.PID, Result: r.result[i], Spared: r.spared[i]}
		for _, m := range r.members {
			if m.target != i {
				continue
			}
			res := m.result
			if m.h != nil {
				o.Left = append(o.Left, m.pid)
				res = left
			}
			o.PIDs = append(o.PIDs, m.pid)
			o.Procs = append(o.Procs, ProcOutcome{PID: m.pid, Role: m.role, Result: res})
		}
		if len(o.Left) > 0 || o.Result == "" || r.result[i] == "" && r.populated(i) {
			o.Result = left
		}
		sort.Ints(o.PIDs)
		sort.Ints(o.Left)
		sort.Slice(o.Procs, func(a, b int) bool { return o.Procs[a].PID < o.Procs[b].PID })
		out[i] = o
	}
	return out
}

// wait waits until every member has exited and every job is empty, until
// deadline, or until ctx is done or a target is forced. Members started
// meanwhile into a job are added (and signalled as their target's phase
// asks) on the way.
func (r *run) wait(ctx context.Context, deadline time.Time) {
	if r.port == 0 {
		r.waitBlind(ctx, deadline)
		return
	}
	defer r.wakeOn(ctx)()
	for {
		var handles []windows.Handle
		for _, m := range r.members {
			if m.h != nil {
				handles = append(handles, m.h.Sys())
			}
		}
		pending := len(handles) > 0
		for i := range r.targets {
			if !pending && r.result[i] == "" && r.populated(i) {
				pending = true
			}
		}
		remaining := time.Until(deadline)
		if !pending || remaining <= 0 || ctx.Err() != nil {
			return
		}
		stop := r.watch(handles)
		key, ok := r.dequeue(remaining)
		stop()
		poked := ok && key == keyWake
		for {
			// Take what else arrived: one re-evaluation serves them all.
			k, ok := r.dequeue(0)
			if !ok {
				break
			}
			poked = poked || k == keyWake
		}
		r.reap()
		if r.collectJobs() > 0 {
			r.signalNew()
		}
		if poked {
			return // forced or cancelled: re-evaluate
		}
		if r.untilLeaders {
			r.eofEarly()
			if !r.eofPending() {
				return
			}
		}
	}
}

// waitBlind is wait without a port: it ends at deadline, or earlier on a
// wake, without seeing exits.
func (r *run) waitBlind(ctx context.Context, deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-r.pokeCh:
	}
	r.reap()
}

// wake ends the current (or next) wait.
func (r *run) wake() {
	if r.port != 0 {
		windows.PostQueuedCompletionStatus(r.port, 0, keyWake, nil)
		return
	}
	select {
	case r.pokeCh <- struct{}{}:
	default:
	}
}

// wakeOn wakes the wait when ctx is done. The returned stop waits for a
// wake under way, so nothing posts to the port once it may be closed.
func (r *run) wakeOn(ctx context.Context) func() {
	if ctx.Done() == nil {
		return func() {}
	}
	woke := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		r.wake()
		close(woke)
	})
	return func() {
		if !stopAfter() {
			<-woke
		}
	}
}

// maximumWaitObjects is MAXIMUM_WAIT_OBJECTS (winnt.h).
const maximumWaitObjects = 64

// watch waits on handles, 63 to a goroutine beside the stop event, and
// posts keyExit to the port when one of them is signalled. The returned
// stop ends the watchers and returns once they are gone: the handles stay
// open until then.
func (r *run) watch(handles []windows.Handle) func() {
	if len(handles) == 0 {
		return func() {}
	}
	windows.ResetEvent(r.stopWatch)
	var wg sync.WaitGroup
	for start := 0; start < len(handles); start += maximumWaitObjects - 1 {
		chunk := append([]windows.Handle{r.stopWatch}, handles[start:min(len(handles), start+maximumWaitObjects-1)]...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev, err := windows.WaitForMultipleObjects(chunk, false, windows.INFINITE)
			runtime.KeepAlive(chunk)
			if err != nil {
				r.log.Warn("wait for member processes", "err", err)
				return
			}
			if ev > windows.WAIT_OBJECT_0 && ev < windows.WAIT_OBJECT_0+uint32(len(chunk)) {
				windows.PostQueuedCompletionStatus(r.port, 0, keyExit, nil)
			}
		}()
	}
	return func() {
		windows.SetEvent(r.stopWatch)
		wg.Wait()
	}
}

var (
	modkernel32                   = windows.NewLazySystemDLL("kernel32.dll")
	procGetQueuedCompletionStatus = modkernel32.NewProc("GetQueuedCompletionStatus")
	procIsProcessInJob            = modkernel32.NewProc("IsProcessInJob")
)

// dequeue takes one packet from the port, waiting up to d, and returns its
// completion key. It is GetQueuedCompletionStatus with the OVERLAPPED
// pointer taken as a number: a job's messages put a PID there, which must
// never sit in a Go pointer.
func (r *run) dequeue(d time.Duration) (uintptr, bool) {
	ms := uint32(min((d+time.Millisecond-1)/time.Millisecond, windows.INFINITE-1))
	var qty uint32
	var key, ov uintptr
	ok, _, _ := procGetQueuedCompletionStatus.Call(uintptr(r.port), uintptr(unsafe.Pointer(&qty)),
		uintptr(unsafe.Pointer(&key)), uintptr(unsafe.Pointer(&ov)), uintptr(ms))
	// FALSE with no OVERLAPPED: nothing was dequeued (timeout).
	if ok == 0 && ov == 0 {
		return 0, false
	}
	return key, true
}

// isProcessInJob reports whether the process h is in job (or in a job
// nested in it).
func isProcessInJob(h, job windows.Handle) (bool, error) {
	if err := procIsProcessInJob.Find(); err != nil {
		return false, err
	}
	var in int32
	ok, _, e := procIsProcessInJob.Call(uintptr(h), uintptr(job), uintptr(unsafe.Pointer(&in)))
	if ok == 0 {
		return false, e
	}
	return in != 0, nil
}

func (r *run) closeAll() {
	// The force watchers may still post to the port: wait for them (their
	// context is cancelled by now) before it is closed.
	r.goroutines.Wait()
	for _, m := range r.members {
		if m.h != nil {
			m.h.Close()
			m.h = nil
		}
	}
	for i, job := range r.jobs {
		if job == nil {
			continue
		}
		if r.ported[i] {
			// Leave the job free for the next cascade's port (Windows 8+
			// accepts a NULL port to undo the association).
			none := jobCompletionPort{}
			windows.SetInformationJobObject(job.Handle(), windows.JobObjectAssociateCompletionPortInformation,
				uintptr(unsafe.Pointer(&none)), uint32(unsafe.Sizeof(none)))
		}
		job.Close()
	}
	if r.port != 0 {
		windows.CloseHandle(r.port)
		windows.CloseHandle(r.stopWatch)
	}
}

// escalateEarly: no CTRL_BREAK could reach the target (no console group
// of its own), so its grace would only be waited out.
func (r *run) escalateEarly(i int) bool { return !r.asked[i] }
