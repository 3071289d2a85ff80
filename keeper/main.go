package keeper

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// Main runs `supervisor _keeper STAGE LOG REPORT -- DAEMON-ARGS...` and
// returns its exit code. Stage detach starts stage keep detached and
// exits at once, so that the keeper is nobody's child (init or the
// nearest subreaper adopts it): started by a shim that then execs its
// server in its own place, it would otherwise be a descendant of a host
// for its whole life, and a host that kills its server's tree would take
// it along. Stage keep runs the daemon (Keep). REPORT is the fd the
// first start's failure is told on, "-" for none; LOG is the daemon's log.
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
		rep := "-"
		cmd := exec.Command(exe, append([]string{Command, "keep", logPath, rep, "--"}, daemonArgs...)...)
		if report != nil {
			cmd.ExtraFiles = []*os.File{report}
			cmd.Args[4] = "3"
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
	err = Keep(context.Background(), Options{
		Exe: exe, Args: daemonArgs, Env: os.Environ(), Report: report,
		Logf: func(format string, a ...any) { appendLine(logPath, format, a...) }, Policy: DefaultPolicy(), Signals: sigs,
	})
	if err != nil {
		appendLine(logPath, "keeper: %v", err)
		return 1
	}
	return 0
}

// appendLine adds one line to the daemon's log in a single write, so it
// does not tear a line the daemon writes at the same moment.
func appendLine(path, format string, a ...any) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	f.WriteString(time.Now().Format("2006-01-02T15:04:05.000Z0700") + " [WARN]  " + fmt.Sprintf(format, a...) + "\n")
}
