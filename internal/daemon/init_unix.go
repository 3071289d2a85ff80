//go:build unix

package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// isTerminal reports whether fd is a terminal.
func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, termiosRequest)
	return err == nil
}

// forwarded are the signals init passes on to its command, as tini does.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

// runInit is the init actor: start the command through the daemon's reaper
// (so the daemon stays the only waiter, and zombies re-parented to PID 1 or
// to this subreaper are reaped), forward signals, and when the command
// exits stop every session and every process left, then end the daemon.
func (d *Daemon) runInit(ctx context.Context, spec *InitSpec) error {
	// The command and all its descendants carry this run's own session
	// marker: the final sweep finds escaped ones by it, and never those of
	// another init beside it.
	d.initSession = "init-" + newID()[2:]
	stdio := [3]*os.File{}
	for i, f := range []*os.File{os.Stdin, os.Stdout, os.Stderr} {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			return fmt.Errorf("init: duplicate stdio %d: %w", i, err)
		}
		stdio[i] = os.NewFile(uintptr(fd), f.Name())
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	started, err := spawn.Start(d.reaper, spawn.Request{
		Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir, Stdio: stdio,
		SessionID: d.initSession, ProcID: d.initSession + "-command", Instance: d.instance,
		Foreground: isTerminal(0),
	})
	if err != nil {
		spec.Code = 125
		var se *spawn.StartError
		if errors.As(err, &se) {
			spec.Code = se.Code
		}
		d.log.Error("init: command did not start", "argv", spec.Argv, "err", err)
		fmt.Fprintf(os.Stderr, "supervisor: init: %v\n", err)
		d.finishInit(ctx, proc.Token{}, 0)
		return errInitDone
	}
	d.log.Info("init: command started", "pid", started.PID, "argv", spec.Argv)
	cmd, err := proc.OpenHandle(started.PID, started.Token)
	if err == nil {
		defer cmd.Close()
	}
	for {
		select {
		case s := <-sigs:
			if cmd != nil {
				cmd.Signal(s.(syscall.Signal))
			}
		case r := <-d.stopReq:
			if r.keep {
				// An init cannot hand its processes to another daemon:
				// everything is cascaded when the command ends.
				r.reply <- nil
				continue
			}
			// `daemon stop` in init mode: ask the command to end; the rest
			// follows from its exit.
			if cmd != nil {
				cmd.Signal(syscall.SIGTERM)
			}
			r.reply <- []shutdown.Outcome{}
		case st := <-started.Exit:
			spec.Code = st.ExitCode()
			d.log.Info("init: command exited", "code", st.Code, "signal", st.Signal)
			d.finishInit(ctx, started.Token, started.PID)
			return errInitDone
		case <-ctx.Done():
			return nil
		}
	}
}

// finishInit stops every session, then every process still left: in a
// PID namespace every process is ours; elsewhere the descendants that were
// re-parented to this subreaper, and everything carrying the command's
// markers.
func (d *Daemon) finishInit(ctx context.Context, cmdTok proc.Token, cmdPID int) {
	d.stopAll(ctx)
	infos, err := proc.Scan()
	if err != nil {
		d.log.Warn("init: scan for leftovers", "err", err)
		return
	}
	self := os.Getpid()
	targets := []shutdown.Target{{ID: d.initSession + "-command", PID: cmdPID, Token: cmdTok, Session: d.initSession,
		LeaderJustExited: true}}
	for _, info := range infos {
		if info.PID == self || (self != 1 && info.PPID != self) {
			continue
		}
		targets = append(targets, shutdown.Target{ID: fmt.Sprintf("leftover-%d", info.PID), PID: info.PID, Token: info.Token})
	}
	outs := d.cascade.Stop(ctx, targets, shutdown.Options{Grace: d.defaultGrace(), WholeSession: true,
		KillWait: 5 * time.Second, Instance: d.instance})
	n := 0
	for _, o := range outs {
		n += len(o.PIDs)
	}
	if n > 0 {
		d.log.Info("init: stopped processes left after the command exited", "count", n)
		fmt.Fprintf(os.Stderr, "supervisor: init: stopped %d process(es) left after the command exited\n", n)
	}
}
