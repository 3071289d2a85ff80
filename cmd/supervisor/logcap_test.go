//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
)

// logSlack is what the live log may be over the cap: one write buffer.
const logSlack = 64 << 10

// keptLog reads path's backups (oldest first) and path, as one text.
func keptLog(t *testing.T, path string, keep int) []byte {
	t.Helper()
	var all []byte
	for i := keep; i >= 0; i-- {
		p := path
		if i > 0 {
			p = fmt.Sprintf("%s.%d", path, i)
		}
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// checkNumbered checks that text is a run of the fixture's numbered lines
// without a gap, ending with "numbered done N" after line N-1, and returns
// the number of its first line.
func checkNumbered(text []byte) (first int, err error) {
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	if len(lines) < 2 {
		return 0, fmt.Errorf("%d lines, want numbered lines and the done line", len(lines))
	}
	var done int
	if _, err := fmt.Sscanf(lines[len(lines)-1], "numbered done %d", &done); err != nil {
		return 0, fmt.Errorf("last line %.40q: want numbered done N", lines[len(lines)-1])
	}
	next := -1
	for i, l := range lines[:len(lines)-1] {
		var n int
		if _, err := fmt.Sscanf(l, "line %d", &n); err != nil || len(l) != 99 {
			return 0, fmt.Errorf("line %d of the kept log %.60q is not a whole numbered line", i, l)
		}
		if next >= 0 && n != next {
			return 0, fmt.Errorf("line %d follows line %d: lines lost", n, next-1)
		}
		if next < 0 {
			first = n
		}
		next = n + 1
	}
	if next != done {
		return 0, fmt.Errorf("the last numbered line is %d, want %d before 'numbered done %d'", next-1, done-1, done)
	}
	return first, nil
}

// TestLogCapHeldUnderBurst: a shared server writing 64 MiB to stderr at
// full speed into a log capped at 1 MB. The live file never passes the cap
// by more than one write buffer, every kept file is within it, and what is
// kept (the live file and 3 backups) is the newest output without a gap.
// `supervisor logs` reads across the rotated files.
func TestLogCapHeldUnderBurst(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_LOG_MAX_MB=1")
	ps := strconv.Itoa(freePort(t))
	const total = 64 << 20
	if _, errOut, code := in.ensure(t, "--session", "c", "--port", ps, "--name", "burst", "--health", "none",
		"--", bin, "_fixture", "listen", ps, "--numbered", strconv.Itoa(total)); code != 0 {
		t.Fatalf("ensure: exit %d: %s", code, errOut)
	}
	logPath := filepath.Join(in.state, "logs", "burst-"+ps+".log")
	waitCond(t, func() error { // the fixture writes its burst after each connection
		c, err := net.Dial("tcp", "127.0.0.1:"+ps)
		if err != nil {
			return err
		}
		return c.Close()
	})
	const maxBytes = 1 << 20
	samples := 0
	waitCond(t, func() error {
		samples++
		if st, err := os.Stat(logPath); err == nil && st.Size() > maxBytes+logSlack {
			t.Fatalf("sample %d: the live log is %d bytes, over the cap %d + %d", samples, st.Size(), maxBytes, logSlack)
		}
		if !bytes.Contains(keptLog(t, logPath, 3), []byte("numbered done")) {
			return fmt.Errorf("the burst has not ended in the log after %d samples", samples)
		}
		return nil
	})
	files, _ := filepath.Glob(logPath + "*")
	want := []string{logPath, logPath + ".1", logPath + ".2", logPath + ".3"}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Fatalf("log files %v, want %v", files, want)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() > maxBytes+logSlack {
			t.Fatalf("%s: %v, want at most %d bytes", f, st.Size(), maxBytes+logSlack)
		}
	}
	kept := keptLog(t, logPath, 3)
	first, err := checkNumbered(kept)
	if err != nil {
		t.Fatalf("kept log (%d bytes): %v", len(kept), err)
	}
	// 3 full backups and the live file: about 3 MB of the newest lines.
	if lines := total/100 - first; lines < 3*maxBytes/100-1000 {
		t.Fatalf("kept lines %d to the end (%d lines), want about 3 MB of them", first, lines)
	}

	// logs --lines reaches back into the backups for what the live file
	// does not hold.
	const n = 20000
	out := in.mustRun("logs", "burst", "--lines", strconv.Itoa(n))
	if got := strings.Count(out, "\n"); got != n {
		t.Fatalf("logs --lines %d printed %d lines", n, got)
	}
	if _, err := checkNumbered([]byte(out)); err != nil {
		t.Fatalf("logs --lines %d: %v", n, err)
	}
}

// TestRunServerStderrIsLoggedAndTeed: a stdio server's stderr reaches its
// host as before and is captured for `supervisor logs` too; its stdin and
// stdout are still the host's own pipes (zero-copy), only fd 2 is a pipe of
// the log writer's.
func TestRunServerStderrIsLoggedAndTeed(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	cmd := in.command("run", "--name", "loud", "--session", "b", "--", bin, "_fixture", "mcp", "--stderr")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	defer errR.Close()
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	errW.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	})
	out, errs := bufio.NewReader(outR), bufio.NewReader(errR)
	hostStderr := func(want string) {
		t.Helper()
		for {
			line, err := readLine(errs, wait)
			if err != nil {
				t.Fatalf("the host's stderr: %v before %q", err, want)
			}
			if line == want {
				return
			}
		}
	}
	exchange := []struct{ req, resp, stderr string }{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
			`{"id":1,"jsonrpc":"2.0","result":{"capabilities":{"resources":{"subscribe":true},"tools":{"listChanged":true}},"protocolVersion":"2025-11-25","serverInfo":{"name":"fixture","version":"1"}}}`,
			"mcp: initialize 1"},
		{`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"x"}}`, `{"id":2,"jsonrpc":"2.0","result":{}}`, "mcp: resources/subscribe 2"},
	}
	for _, x := range exchange {
		if _, err := io.WriteString(stdin, x.req+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := readLine(out, wait)
		if err != nil || line != x.resp {
			t.Fatalf("stdout: got %q (%v), want %q", line, err, x.resp)
		}
		hostStderr(x.stderr)
	}

	var srv api.Process
	for _, p := range in.mustProcesses(false) {
		if p.Name == "loud" {
			srv = p
		}
	}
	if srv.PID == 0 {
		t.Fatal("no running process named loud")
	}
	inode := func(path string) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	fdPath := func(fd int) string { return fmt.Sprintf("/proc/%d/fd/%d", srv.PID, fd) }
	if got, want := inode(fdPath(1)), inode(fmt.Sprintf("/proc/self/fd/%d", outR.Fd())); got != want {
		t.Errorf("the server's stdout is inode %d, want the host's pipe %d (zero-copy)", got, want)
	}
	if got, host := inode(fdPath(2)), inode(fmt.Sprintf("/proc/self/fd/%d", errR.Fd())); got == host {
		t.Errorf("the server's stderr is the host's pipe, want the log writer's")
	}

	wantLog := "mcp: initialize 1\nmcp: resources/subscribe 2\n"
	for _, args := range [][]string{{"logs", "loud"}, {"logs", "loud", "--session", "b"}, {"logs", srv.ID}} {
		waitCond(t, func() error {
			if got, errOut, code := in.run(args...); code != 0 || got != wantLog {
				return fmt.Errorf("%v: exit %d, %q (%s); want %q", args, code, got, errOut, wantLog)
			}
			return nil
		})
	}
	if _, errOut, code := in.run("logs", "loud", "--session", "other"); code == 0 || !strings.Contains(errOut, "no captured output") {
		t.Errorf("logs of another session: exit %d, %q; want no captured output", code, errOut)
	}

	// EOF: the server exits, the host's stderr closes (the writer let it
	// go), and the log is still there.
	stdin.Close()
	if _, err := io.ReadAll(errs); err != nil {
		t.Fatal(err)
	}
	<-done
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("run exited %d, want 0", code)
	}
	if got := in.mustRun("logs", "loud"); got != wantLog {
		t.Fatalf("logs after the exit: %q, want %q", got, wantLog)
	}
}

// TestRunServerLogGoesWithItsRecord: retention removes a stdio server's
// log once its record is compacted away.
func TestRunServerLogGoesWithItsRecord(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_RETENTION=1s")
	shim := in.startShim("--name", "brief", "--", bin, "_fixture", "mcp", "--stderr")
	io.WriteString(shim.stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize"}`+"\n")
	if _, err := readLine(shim.stdout, wait); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(in.state, "logs", "run", "brief@*")
	waitCond(t, func() error {
		if m, _ := filepath.Glob(logs); len(m) != 1 {
			return fmt.Errorf("logs %v, want one", m)
		}
		return nil
	})
	shim.stdin.Close()
	if code := shim.exitCode(t); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	waitCond(t, func() error {
		if m, _ := filepath.Glob(logs); len(m) != 0 {
			return fmt.Errorf("logs %v left after the record's retention", m)
		}
		return nil
	})
}

// TestRunServerStderrSurvivesDaemonCrash: the log hub is no part of the
// daemon, so a SIGKILLed daemon takes neither the server's stderr (the
// host still gets it) nor its log.
func TestRunServerStderrSurvivesDaemonCrash(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	l := startLoud(t, in, "crashy")
	l.ask(1, "initialize")
	pid := in.daemonPID()
	if pid == 0 {
		t.Fatal("no daemon")
	}
	killByToken(pid, mustToken(t, pid))
	l.ask(2, "tools/list")
	l.logged()
	l.end()
}
