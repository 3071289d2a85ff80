package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/keeper"
	"github.com/seed-86a41135/supervisor/proc"
)

// The daemon and its keeper watch each other (package keeper): a keeper
// that dies while the daemon lives is replaced by one that watches the
// daemon from outside (it cannot become its parent), so a crash of the
// daemon afterwards is still recovered at once.

// parentKeeper is the keeper this daemon was started by, while it is still
// its parent; 0 if none.
func parentKeeper() int {
	if v := os.Getenv(keeper.EnvPID); v != "" && v == strconv.Itoa(os.Getppid()) {
		return os.Getppid()
	}
	return 0
}

// watchKeeper watches the keeper this daemon runs under, if any.
func (d *Daemon) watchKeeper(pid int) {
	if pid <= 1 {
		return
	}
	tok, err := proc.TokenOf(pid)
	if err != nil {
		d.log.Warn("cannot watch the daemon's keeper", "keeper", pid, "err", err)
		return
	}
	if _, err := d.watcher.Watch(pid, tok, func() {
		if d.isStopping() {
			return
		}
		d.log.Warn("the daemon's keeper is gone: starting one that watches this daemon", "keeper", pid)
		go d.replaceKeeper()
	}); err != nil {
		d.log.Warn("cannot watch the daemon's keeper", "keeper", pid, "err", err)
	}
}

// replaceKeeper starts a keeper that watches this daemon, then watches it
// in turn once it is found.
func (d *Daemon) replaceKeeper() {
	self, err := proc.TokenOf(os.Getpid())
	if err != nil {
		d.log.Error("start a new keeper", "err", err)
		return
	}
	watch := fmt.Sprintf("%d:%d", os.Getpid(), self.StartTicks)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, keeper.EnvPID+"=") && !strings.HasPrefix(kv, keeper.EnvWatch+"=") {
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
	argv := append([]string{d.exe, keeper.Command, "detach", d.cfg.Paths.Log(), "-", "--"}, os.Args[1:]...)
	p, err := os.StartProcess(d.exe, argv, &os.ProcAttr{Dir: "/", Env: env, Files: []*os.File{devnull, devnull, devnull}, Sys: keeper.DetachedAttr()})
	if err != nil {
		d.log.Error("start a new keeper", "err", err)
		return
	}
	p.Release()
	// The keeper is the detach stage's child: find it by what it watches.
	for range 100 {
		if pid := findKeeper(watch); pid > 0 {
			d.log.Info("a new keeper watches this daemon", "keeper", pid)
			tok, _ := proc.TokenOf(pid)
			d.mu.Lock()
			d.keeperPID, d.keeperTok = pid, tok
			d.mu.Unlock()
			d.watchKeeper(pid)
			return
		}
		if d.isStopping() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.log.Warn("the new keeper did not show up; a crash of this daemon is recovered only by the next supervisor command")
}

// findKeeper is the pid of the keeper whose EnvWatch is watch, 0 if none.
func findKeeper(watch string) int {
	infos, _ := proc.Scan()
	for _, info := range infos {
		argv, _ := proc.Cmdline(info.PID)
		if len(argv) < 3 || argv[1] != keeper.Command || argv[2] != "keep" {
			continue
		}
		env, _ := proc.Environ(info.PID)
		if v, _ := proc.EnvValue(env, keeper.EnvWatch); v == watch {
			return info.PID
		}
	}
	return 0
}

// markStopped tells a keeper that is not this daemon's parent that it
// stopped on purpose.
func markStopped(stateDir string) {
	path := filepath.Join(stateDir, keeper.StoppedFile)
	os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
}
