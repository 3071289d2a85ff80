package keeper

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Main runs `supervisor _keeper STAGE LOG REPORT -- DAEMON-ARGS...` and
// returns its exit code. Stage detach starts stage keep detached and
// exits at once, so that the keeper is nobody's child (init or the
// nearest subreaper adopts it): started by a shim that then execs its
// server in its own place, it would otherwise be a descendant of a host
// for its whole life, and a host that kills its server's tree would take
// it along. Stage keep runs the daemon (Keep). REPORT is the fd the
// first start's failure is told on, "-" for none; LOG is the keepers' log
// (LogFile in the state directory).
func Main(args []string) int {
	if len(args) < 5 || args[3] != "--" || (args[0] != "detach" && args[0] != "keep") {
		fmt.Fprintf(os.Stderr, "supervisor: %s is internal: `%s detach|keep LOG REPORT-FD -- ARGS...`\n", Command, Command)
		return 2
	}
	stage, logPath, reportArg, daemonArgs := args[0], args[1], args[2], args[4:]
	var report *os.File
	if reportArg != "-" {
		fd, err := strconv.Atoi(reportArg)
		if err != nil || fd < 3 {
			fmt.Fprintf(os.Stderr, "supervisor: %s: report fd %q: want a number of 3 or more, or -\n", Command, reportArg)
			return 2
		}
		report = os.NewFile(uintptr(fd), "report")
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "supervisor: %s: find this binary: %v\n", Command, err)
		return 1
	}
	if stage == "detach" {
		// The report goes on as fd 3 (os/exec numbers ExtraFiles from 3).
		fdArg := "-"
		if report != nil {
			fdArg = "3"
		}
		cmd := exec.Command(exe, append([]string{Command, "keep", logPath, fdArg, "--"}, daemonArgs...)...)
		if report != nil {
			cmd.ExtraFiles = []*os.File{report}
		}
		cmd.Dir = "/"
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := StartDetached(cmd); err != nil {
			if report != nil {
				fmt.Fprintf(report, "start the keeper: %v\n", err)
			}
			return 1
		}
		cmd.Process.Release()
		return 0
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	o := Options{
		Exe: exe, Args: daemonArgs, Report: report,
		Logf: func(format string, a ...any) { appendLine(logPath, format, a...) }, Policy: DefaultPolicy(), Signals: sigs,
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvWatch+"=") && !strings.HasPrefix(kv, EnvRestart+"=") {
			o.Env = append(o.Env, kv)
		}
	}
	o.Gone = func() bool {
		_, err := os.Stat(filepath.Dir(logPath))
		return errors.Is(err, fs.ErrNotExist)
	}
	if w := os.Getenv(EnvWatch); w != "" {
		h := watched(w)
		defer h.Close()
		o.Watch = h
		stopped := filepath.Join(filepath.Dir(logPath), StoppedFile)
		o.Stopped = func() bool {
			// A state directory removed with its daemon is an instance
			// that is gone: nothing to start again.
			if _, err := os.Stat(filepath.Dir(stopped)); errors.Is(err, fs.ErrNotExist) {
				return true
			}
			b, err := os.ReadFile(stopped)
			return err == nil && strings.TrimSpace(string(b)) == w
		}
	}
	err = Keep(context.Background(), o)
	if err != nil {
		appendLine(logPath, "keeper: %v", err)
		return 1
	}
	return 0
}

// watched is the daemon named by EnvWatch ("PID:STARTTICKS"): a handle on
// it where one can be had, else (out of fds, say) one that polls it. A
// daemon already gone, or whose pid now names another process, is gone.
func watched(v string) waitCloser {
	p, ticks, _ := strings.Cut(v, ":")
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 1 {
		return goneHandle{}
	}
	poll := &pollHandle{pid: pid, ticks: ticks}
	tok, err := proc.TokenOf(pid)
	if err != nil {
		return poll
	}
	if strconv.FormatUint(tok.StartTicks, 10) != ticks {
		return goneHandle{}
	}
	if h, err := proc.OpenHandle(pid, tok); err == nil {
		return h
	}
	return poll
}

type waitCloser interface {
	Wait(time.Duration) bool
	Close() error
}

// goneHandle is a daemon already gone.
type goneHandle struct{}

func (goneHandle) Wait(time.Duration) bool { return true }
func (goneHandle) Close() error            { return nil }

// pollHandle looks at the daemon every pollEvery: gone when its pid is
// free or names another process; an error reading it (out of fds) is no
// verdict, and is looked at again.
type pollHandle struct {
	pid   int
	ticks string
}

const pollEvery = 200 * time.Millisecond

func (h *pollHandle) Wait(limit time.Duration) bool {
	end := time.Now().Add(limit)
	for {
		tok, err := proc.TokenOf(h.pid)
		switch {
		case errors.Is(err, proc.ErrGone) || errors.Is(err, fs.ErrNotExist):
			return true
		case err == nil && strconv.FormatUint(tok.StartTicks, 10) != h.ticks:
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(pollEvery)
	}
}

func (h *pollHandle) Close() error { return nil }

// LogFile, in the state directory, is the keepers' log: their own file,
// since the daemon's log is written at its own offset (not appended to)
// and would overwrite their lines.
const LogFile = "keeper.log"

// logCap is the size past which the keepers' log is renamed to .1 before
// the next line: keepers say little, a crash-looping daemon aside.
const logCap = 1 << 20

// appendLine adds one line to the keepers' log in a single write.
func appendLine(path, format string, a ...any) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > logCap {
		_ = os.Rename(path, path+".1") // best effort: a log that cannot rotate grows on
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(time.Now().Format("2006-01-02T15:04:05.000Z0700") + " [WARN]  " + fmt.Sprintf(format, a...) + "\n")
}
