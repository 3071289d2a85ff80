//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
