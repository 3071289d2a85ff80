package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/internal/keeper"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// The daemon and its keeper watch each other (package keeper): a keeper
// that dies while the daemon lives is replaced by one that watches the
// daemon from outside (it cannot become its parent), so a crash of the
// daemon afterwards is still recovered at once.

// watchKeepers starts watching the keeper this daemon was started by, if
// any; one already gone (it died before we looked) is replaced at once.
func (d *Daemon) watchKeepers() {
	v := os.Getenv(keeper.EnvPID)
	if v == "" {
		return // started by hand or by a service manager
	}
	pid, err := strconv.Atoi(v)
	if err != nil || pid != os.Getppid() {
		d.log.Warn("the daemon's keeper is gone already: starting one that watches this daemon", "keeper", v)
		d.tasks.Go("replace keeper", d.replaceKeeper)
		return
	}
	tok, err := proc.TokenOf(pid)
	if err != nil {
		d.log.Warn("the daemon's keeper is gone already: starting one that watches this daemon", "keeper", pid, "err", err)
		d.tasks.Go("replace keeper", d.replaceKeeper)
		return
	}
	d.watchKeeper(pid, tok, false)
}

// watchKeeper records keeper pid (its parent, or watching from outside)
// and replaces it when it dies while this daemon lives.
func (d *Daemon) watchKeeper(pid int, tok proc.Token, watching bool) {
	d.mu.Lock()
	d.keeperPID, d.keeperTok, d.keeperWatches = pid, tok, watching
	d.mu.Unlock()
	if _, err := d.watcher.Watch(pid, tok, func() {
		if d.isStopping() {
			return
		}
		d.log.Warn("the daemon's keeper is gone: starting one that watches this daemon", "keeper", pid)
		d.tasks.Go("replace keeper", d.replaceKeeper)
	}); err != nil {
		d.log.Warn("cannot watch the daemon's keeper", "keeper", pid, "err", err)
	}
}

// keeperNow is the live keeper of this daemon, if any.
func (d *Daemon) keeperNow() (pid int, watching bool) {
	d.mu.Lock()
	pid, tok, watching := d.keeperPID, d.keeperTok, d.keeperWatches
	d.mu.Unlock()
	if pid <= 0 || proc.Verify(pid, tok) != nil {
		return 0, false
	}
	return pid, watching
}

// selfWatch is what a keeper watching this daemon is told to watch, and
// what daemon.stopped says once it stopped on purpose: "PID:STARTTICKS".
func selfWatch() (string, error) {
	self, err := proc.TokenOf(os.Getpid())
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d", os.Getpid(), self.StartTicks), nil
}

// replaceKeeper starts a keeper that watches this daemon, then watches it
// in turn once it is found.
func (d *Daemon) replaceKeeper() {
	if d.isStopping() {
		return
	}
	watch, err := selfWatch()
	if err != nil {
		d.log.Error("start a new keeper", "err", err)
		return
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, keeper.EnvPID+"=") && !strings.HasPrefix(kv, keeper.EnvWatch+"=") && !strings.HasPrefix(kv, keeper.EnvRestart+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, keeper.EnvWatch+"="+watch)
	// No os/exec Wait here: the central reaper reaps the detach stage
	// (and, as the subreaper it re-parents to, the keeper if it ends).
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		d.log.Error("start a new keeper", "err", err)
		return
	}
	defer devnull.Close()
	argv := append([]string{d.exe, keeper.Command, "detach", filepath.Join(d.cfg.Paths.StateDir, keeper.LogFile), "-", "--"}, os.Args[1:]...)
	p, err := os.StartProcess(d.exe, argv, &os.ProcAttr{Dir: "/", Env: env, Files: []*os.File{devnull, devnull, devnull}, Sys: keeper.DetachedAttr()})
	if err != nil {
		d.log.Error("start a new keeper", "err", err)
		return
	}
	p.Release()
	// The keeper is the detach stage's child: find it by what it watches.
	for range 100 {
		if pid := d.findKeeper(watch); pid > 0 {
			if tok, err := proc.TokenOf(pid); err == nil {
				d.log.Info("a new keeper watches this daemon", "keeper", pid)
				d.watchKeeper(pid, tok, true)
				return
			}
		}
		if d.isStopping() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.log.Warn("the new keeper did not show up; a crash of this daemon is recovered only by the next supervisor command")
}

// findKeeper is the pid of this instance's keeper whose EnvWatch is
// watch, 0 if none.
func (d *Daemon) findKeeper(watch string) int {
	for _, pid := range keeper.Find(d.cfg.Paths.StateDir) {
		env, _ := proc.Environ(pid)
		if v, _ := proc.EnvValue(env, keeper.EnvWatch); v == watch {
			return pid
		}
	}
	return 0
}

// markStopped tells a keeper that is not this daemon's parent that it
// stopped on purpose. The pid and start time name this daemon alone: a
// later one on a recycled pid is not taken for it.
// Without it the keeper takes the stop for a crash and starts a daemon
// again: the caller logs why it could not be written.
func markStopped(stateDir string) error {
	watch, err := selfWatch()
	if err != nil {
		return fmt.Errorf("name this daemon for its keeper: %w", err)
	}
	return os.WriteFile(filepath.Join(stateDir, keeper.StoppedFile), []byte(watch+"\n"), 0o600)
}
