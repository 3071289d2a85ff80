//go:build unix

package spawn

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Reaper is the only waiter for the daemon's children. It reaps with
// wait4(-1, WNOHANG) whenever SIGCHLD arrives and hands each status to the
// channel registered for that PID; statuses of unregistered children
// (orphans re-parented to a subreaper) are reaped and dropped.
type Reaper struct {
	log Logger

	mu      sync.Mutex
	waiters map[int]chan Status
}

// NewReaper returns a reaper; call Run to start reaping.
func NewReaper(log Logger) *Reaper {
	if log == nil {
		log = nopLogger{}
	}
	return &Reaper{
		log:     log,
		waiters: map[int]chan Status{},
	}
}

// Fork runs fork, which must start exactly one child and return its PID,
// and registers that PID before the reaper can collect it: the lock is held
// across both, so a child that exits at once still gets its status
// delivered. inspect, if not nil, runs under the same lock while the child
// cannot have been reaped yet (its /proc entry is guaranteed to exist).
func (r *Reaper) Fork(fork func() (int, error), inspect func(pid int)) (int, <-chan Status, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := fork()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan Status, 1)
	r.waiters[pid] = ch
	if inspect != nil {
		inspect(pid)
	}
	return pid, ch, nil
}

// ShareJob has nothing to share on unix: processes outlive the daemon
// without help (Windows job objects do not; see reaper_windows.go).
func (r *Reaper) ShareJob(session string, pid int) (uint64, error) { return 0, nil }

// Run reaps until ctx is done.
func (r *Reaper) Run(ctx context.Context) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	for {
		r.reapAll()
		select {
		case <-ctx.Done():
			return nil
		case <-sigs:
		}
	}
}

func (r *Reaper) reapAll() {
	for {
		var ws unix.WaitStatus
		// wait4 runs under the lock Fork holds across fork and register:
		// otherwise a child that exits at once could be reaped here before
		// its waiter exists, and its status would be lost.
		r.mu.Lock()
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		var ch chan Status
		var ok bool
		if err == nil && pid > 0 && (ws.Exited() || ws.Signaled()) {
			ch, ok = r.waiters[pid]
			delete(r.waiters, pid)
		}
		r.mu.Unlock()
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			break
		}
		if !ws.Exited() && !ws.Signaled() {
			continue // stopped or continued: not an exit
		}
		st := Status{PID: pid}
		if ws.Signaled() {
			st.Signal = syscall.Signal(ws.Signal())
		} else {
			st.Code = ws.ExitStatus()
		}
		if ok {
			ch <- st
		} else {
			r.log.Debug("reaped orphan", "pid", pid, "code", st.Code, "signal", st.Signal)
		}
	}
}
