package shim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// localReason is why the shim supervises its server itself.
type localReason struct{ why string }

func (l *localReason) Error() string { return "local mode: " + l.why }

// runLocal is local mode (design §2): with no daemon to hand the server to
// (none can be reached or started, or it lives in other namespaces than
// this shim), the shim supervises the server itself with the same
// mechanisms: it becomes a child subreaper and the only waiter, starts the
// server in its own group with the markers, watches its host by pidfd and
// stops the whole tree through the same cascade when the host dies, a stop
// signal arrives or the server exits leaving something behind. It says so
// once on stderr, which hosts log.
func runLocal(ctx context.Context, o Options, req api.RunRequest, why string, sigs <-chan os.Signal) (int, error) {
	name := o.Name
	if name == "" {
		name = filepath.Base(o.Argv[0])
	}
	fmt.Fprintf(o.Stderr, "supervisor: local mode for %s: %s; this shim supervises it itself\n", name, why)
	// The server's parent-death signal fires when the thread that forked it
	// exits: keep this one.
	runtime.LockOSThread()
	reaperPID := 0
	if err := proc.SetChildSubreaper(); err != nil {
		fmt.Fprintf(o.Stderr, "supervisor: not a subreaper (%v): descendants that escape the server go to init\n", err)
	} else {
		reaperPID = os.Getpid() // the server is its only child: an orphan it adopts is the server's
	}
	rctx, stopReaper := context.WithCancel(context.Background())
	defer stopReaper()
	reaper := spawn.NewReaper(nil)
	go func() { _ = reaper.Run(rctx) }() // Run ends only with rctx, returning nil

	stdio, channels, err := localStdio()
	if err != nil {
		return fail(CodeSupervisorError, fmt.Errorf("local mode: %w", err))
	}
	id := localID()
	instance := fmt.Sprintf("local-%d", os.Getpid())
	started, err := spawn.Start(reaper, spawn.Request{
		Argv: o.Argv, Env: o.Env, Dir: string(req.Cwd), Stdio: stdio,
		SessionID: req.Session, ProcID: id, Instance: instance,
		// Hosts end a server by SIGKILLing what they started, this shim:
		// the server must not outlive it (its escaped descendants can).
		Pdeathsig: syscall.SIGKILL,
	})
	if err != nil {
		var se *spawn.StartError
		if errors.As(err, &se) {
			return fail(se.Code, err)
		}
		return fail(CodeSupervisorError, err)
	}
	if err := detachStdio(); err != nil {
		fmt.Fprintf(o.Stderr, "supervisor: %v\n", err)
	}

	hostGone := make(chan struct{})
	if host, err := proc.OpenHandle(req.HostPID, req.HostToken); err == nil {
		// Ends with this process: the shim exits once the server has.
		go func() {
			host.Wait(-1)
			host.Close()
			close(hostGone)
		}()
	} else {
		close(hostGone)
	}

	target := shimTarget(req, id, started.PID, started.PGID, started.Token)
	target.Stdio = channels
	cascade := &shutdown.Cascade{Excluded: []int{os.Getpid()}, Reaper: reaperPID}
	stopped := make(chan struct{})
	done := ctx.Done()
	stopping := false
	force := make(chan struct{})
	stop := func(eof time.Duration) {
		if stopping {
			return
		}
		stopping = true
		target.Force = force
		go func() {
			cascade.Stop(context.Background(), []shutdown.Target{target}, shutdown.Options{Grace: o.Grace, EOFGrace: eof, Instance: instance})
			close(stopped)
		}()
	}
	for {
		select {
		case st := <-started.Exit:
			if !stopping {
				// Exited on its own: what it left in its group, under its
				// marker or on the host's pipes goes too.
				t := target
				t.LeaderJustExited = true
				cascade.Stop(context.Background(), []shutdown.Target{t}, shutdown.Options{Grace: o.Grace, Instance: instance})
			} else {
				<-stopped
			}
			return st.ExitCode(), nil
		case <-hostGone:
			hostGone = nil
			stop(shutdown.DefaultEOFGrace)
		case <-sigs:
			if stopping {
				select {
				case <-force:
				default:
					close(force) // asked twice: do not wait out the grace
				}
			}
			stop(0)
		case <-done:
			done = nil
			stop(0)
		}
	}
}

func localID() string {
	var b [5]byte
	rand.Read(b[:])
	return "l-" + hex.EncodeToString(b[:])
}
