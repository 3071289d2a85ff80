// Package keeper restarts an auto-started daemon that dies without
// stopping. It is the one process that outlives a daemon's SIGKILL or
// crash, as runsv or s6-supervise outlive their service: the daemon's
// parent, out of every host's tree, that starts it again at once so that
// the next daemon recovers the registry and ends the sessions whose hosts
// died meanwhile. Without it, servers that run in their shim's place (no
// shim process is left to start a daemon) would run on until some later
// `supervisor` command.
//
// A daemon that stops on purpose (`daemon stop`, SIGTERM, another daemon
// holding the lock) exits 0, and the keeper ends with it.
package keeper

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Command is the hidden subcommand the keeper runs as:
// `supervisor _keeper detach|keep LOG -- DAEMON-ARGS...`.
const Command = "_keeper"

// EnvPID names the keeper a daemon runs under (its parent's pid), so the
// daemon can tell whether a crash of its own would be recovered.
const EnvPID = "SUPERVISOR_KEEPER_PID"

// EnvRestart is set to 1 for a daemon the keeper starts again (after one
// that ended, or one it watched): such a daemon never creates its state
// directory. One removed meanwhile is an instance that is gone (a test's
// cleanup, a user's rm -r), not one to bring back.
const EnvRestart = "SUPERVISOR_KEEPER_RESTART"

// EnvWatch, "PID:STARTTICKS", makes a keeper watch a daemon that is not
// its child: one whose keeper died, started by that daemon (the keepers
// and the daemon watch each other). When it ends, the keeper starts a
// daemon again unless the one it watched stopped on purpose (Stopped).
const EnvWatch = "SUPERVISOR_KEEPER_WATCH"

// StoppedFile, in the state directory, names the last daemon that stopped
// on purpose: a keeper that is not the daemon's parent cannot see its exit
// status, and reads this instead.
const StoppedFile = "daemon.stopped"

// StartWindow is how long a daemon may take to fail its start: a daemon
// that exits 1 within it refused to start (a bad config file, a state
// directory it cannot use), and starting it again would fail the same way.
const StartWindow = 2 * time.Second

// Exit is how one daemon run ended.
type Exit struct {
	Code   int            // exit code; -1 when killed by a signal
	Signal syscall.Signal // the signal that killed it, if one did
	Ran    time.Duration  // how long it ran
}

func (e Exit) String() string {
	if e.Code < 0 {
		return fmt.Sprintf("killed by signal %d (%v) after %v", int(e.Signal), e.Signal, e.Ran.Round(time.Millisecond))
	}
	return fmt.Sprintf("exit status %d after %v", e.Code, e.Ran.Round(time.Millisecond))
}

// Policy decides, from how a daemon ended, whether to start it again and
// after what pause. A daemon killed or crashed is restarted at once the
// first times (a host may be dying right now, and its servers wait for a
// daemon to stop them); restarts that come fast in a row back off up to a
// maximum, and never stop for good: a keeper that gave up would leak every
// server, which is the one thing it is there to prevent.
type Policy struct {
	Free   int           // restarts within Window that need no pause
	Window time.Duration // the span restarts are counted over
	Max    time.Duration // the longest pause

	recent []time.Time
}

// DefaultPolicy restarts three times in a minute without a pause, then
// after 250 ms, 500 ms, ... up to 30 s.
func DefaultPolicy() *Policy { return &Policy{Free: 3, Window: time.Minute, Max: 30 * time.Second} }

// Next says whether a daemon that ended as e at now is started again, and
// after what pause; why is set when it is not. first says it was the first
// daemon this keeper started: only that one's exit 1 within StartWindow is
// taken for a refused start (a bad config file, which the launcher hears
// about). A later one that fails so (a config edited since, fds run out
// for a moment) is started again, backing off: giving up would leak the
// servers.
func (p *Policy) Next(e Exit, first bool, now time.Time) (restart bool, pause time.Duration, why string) {
	switch {
	case e.Code == 0:
		return false, 0, "the daemon stopped on purpose"
	case first && e.Code == 1 && e.Ran < StartWindow:
		return false, 0, "the daemon refused to start (its reason is in the daemon's log); starting it again would fail the same way"
	}
	kept := p.recent[:0]
	for _, t := range p.recent {
		if now.Sub(t) < p.Window {
			kept = append(kept, t)
		}
	}
	p.recent = append(kept, now)
	if n := len(p.recent); n > p.Free {
		pause = 250 * time.Millisecond
		for i := p.Free + 1; i < n && pause < p.Max; i++ {
			pause *= 2
		}
		pause = min(pause, p.Max)
	}
	return true, pause, ""
}

// Options are what Keep runs.
type Options struct {
	Exe  string
	Args []string // the daemon's arguments
	Env  []string // its environment; EnvPID is added
	// Report, if set, learns how the first daemon's start ended: one line
	// ("exit status 1 after 12ms") if it failed, nothing if it started or
	// found another daemon running. It is closed after StartWindow or the
	// first daemon's exit, whichever comes first.
	Report io.WriteCloser
	// Logf records each end and restart (the daemon's own log file, so a
	// user reads one story).
	Logf   func(format string, args ...any)
	Policy *Policy
	// Watch, when set, is a daemon to wait for before starting one: the
	// keeper is not its parent. Stopped says whether that daemon (by pid)
	// stopped on purpose.
	Watch   interface{ Wait(time.Duration) bool }
	Stopped func() bool
	// Gone, when set, says the daemon's instance is gone (its state
	// directory removed): the keeper then starts no daemon again.
	Gone func() bool
	// Signals delivers the signals the keeper handles: SIGTERM and SIGINT
	// are passed on to the daemon and end the keeping, SIGHUP (reload) is
	// passed on.
	Signals <-chan os.Signal
}

// Keep runs the daemon, and runs it again each time it ends without
// stopping, until it stops on purpose, the keeper is told to stop, or ctx
// ends (which leaves the daemon running).
func Keep(ctx context.Context, o Options) error {
	report := o.Report
	closeReport := func() {
		if report != nil {
			report.Close()
			report = nil
		}
	}
	defer closeReport()
	if o.Watch != nil {
		gone, quit := make(chan struct{}), make(chan struct{})
		defer close(quit)
		go func() {
			for !o.Watch.Wait(time.Second) {
				select {
				case <-quit:
					return
				default:
				}
			}
			close(gone)
		}()
	watching:
		for {
			select {
			case <-gone:
				break watching
			case sig := <-o.Signals:
				if sig != syscall.SIGHUP { // a reload is the daemon's own business
					return nil // told to stop: the watched daemon runs on
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if o.Stopped != nil && o.Stopped() {
			o.Logf("keeper: the daemon it watched stopped on purpose")
			return nil
		}
		o.Logf("keeper: the daemon it watched is gone without stopping; starting it again")
	}
	stopping := false
	for first := true; ; first = false {
		restarted := !first || o.Watch != nil
		if restarted && o.Gone != nil && o.Gone() {
			return nil // nothing to log to: the log was in that directory
		}
		cmd := exec.Command(o.Exe, o.Args...)
		cmd.Env = append(append([]string{}, o.Env...), fmt.Sprintf("%s=%d", EnvPID, os.Getpid()))
		if restarted {
			cmd.Env = append(cmd.Env, EnvRestart+"=1")
		}
		cmd.Dir = "/"
		started := time.Now()
		if err := StartDetached(cmd); err != nil {
			if first && report != nil {
				fmt.Fprintf(report, "start %s: %v\n", o.Exe, err)
			}
			return fmt.Errorf("start daemon %s: %w", o.Exe, err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// The launcher hears how the start went until a daemon has run
		// StartWindow (one restarted after a SIGKILL during its start
		// included: that start has not failed).
		var startOver <-chan time.Time
		if report != nil {
			startOver = time.After(StartWindow)
		}
	wait:
		for {
			select {
			case werr := <-done:
				// An exit status is an error here too: ProcessState has
				// it. Without a ProcessState the wait itself failed.
				if cmd.ProcessState == nil {
					return fmt.Errorf("wait for daemon pid %d: %w", cmd.Process.Pid, werr)
				}
				break wait
			case <-startOver:
				closeReport()
			case sig := <-o.Signals:
				if sig == syscall.SIGHUP {
					cmd.Process.Signal(sig)
					continue
				}
				stopping = true
				cmd.Process.Signal(syscall.SIGTERM)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		e := exitOf(cmd.ProcessState, time.Since(started))
		if stopping {
			o.Logf("keeper: daemon pid %d %v; the keeper was told to stop", cmd.Process.Pid, e)
			return nil
		}
		restart, pause, why := o.Policy.Next(e, first, time.Now())
		if !restart {
			if report != nil && e.Code != 0 {
				fmt.Fprintf(report, "%v\n", e)
			}
			if e.Code != 0 {
				o.Logf("keeper: daemon pid %d %v; not restarting: %s", cmd.Process.Pid, e, why)
			}
			return nil
		}
		o.Logf("keeper: daemon pid %d %v; restarting it after %v", cmd.Process.Pid, e, pause)
		if err := o.pause(ctx, pause); err != nil {
			return nil // told to stop (`daemon stop` finds a keeper between daemons)
		}
	}
}

// pause waits d before a restart. SIGHUP (a reload, with no daemon to
// reload) is ignored; SIGTERM or SIGINT, or ctx, end it with an error.
func (o Options) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case sig := <-o.Signals:
			if sig != syscall.SIGHUP {
				return fmt.Errorf("told to stop (%v)", sig)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func exitOf(ps *os.ProcessState, ran time.Duration) Exit {
	e := Exit{Code: ps.ExitCode(), Ran: ran}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Code, e.Signal = -1, ws.Signal()
	}
	return e
}
