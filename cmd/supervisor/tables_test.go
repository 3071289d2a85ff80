//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"

	"github.com/seed-86a41135/supervisor/spawn"
)

// colAt is the terminal column at which sub starts in line (-1: absent):
// the display width of what precedes it, wide characters counting two.
func colAt(line, sub string) int {
	i := strings.Index(line, sub)
	if i < 0 {
		return -1
	}
	return runewidth.StringWidth(line[:i])
}

// lineWith returns the first line of out containing sub.
func lineWith(t *testing.T, out, sub string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	t.Fatalf("no line with %q in:\n%s", sub, out)
	return ""
}

// TestTablesAlignByDisplayWidthAndEscape covers issue 13 item 11: tables are aligned by display
// width (CJK and emoji take two cells) with user strings escaped, long
// commands and names are cut unless --wide/--no-trunc, and times are
// relative ("3s ago").
func TestTablesAlignByDisplayWidthAndEscape(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	const wideName = "名前😀\x1b[31mx"
	const shown = `名前😀\x1b[31mx`
	wpid := in.startShim("--name", wideName, "--", bin, "_fixture", "sleep").readyPID(t)
	// Both cut past 32 and 60 columns: a cut in bytes would split a character.
	longName := "n" + strings.Repeat("長", 20)
	pad := strings.Repeat("日", 40)
	lpid := in.startShim("--name", longName, "--", bin, "_fixture", "sleep", pad).readyPID(t)

	t.Run("ps", func(t *testing.T) {
		out := in.mustRun("ps")
		if strings.Contains(out, "\x1b") || !strings.Contains(out, shown) {
			t.Fatalf("ps must show the name escaped:\n%q", out)
		}
		head := lineWith(t, out, "COMMAND")
		for _, pid := range []int{wpid, lpid} {
			row := lineWith(t, out, " "+strconv.Itoa(pid)+" ")
			for _, col := range []struct{ head, cell string }{{"PID", " " + strconv.Itoa(pid) + " "}, {"STATE", "running"}, {"COMMAND", bin}} {
				off := 0
				if col.head == "PID" {
					off = 1
				}
				if got, want := colAt(row, col.cell)+off, colAt(head, col.head); got != want {
					t.Errorf("ps: %s of pid %d starts at column %d, its header at %d:\n%s", col.head, pid, got, want, out)
				}
			}
			if !strings.Contains(row, "s ago") {
				t.Errorf("ps: STARTED of pid %d is not relative (\"Ns ago\"):\n%s", pid, out)
			}
		}
		if strings.Contains(out, pad) || strings.Contains(out, longName) || !strings.Contains(out, "...") || !utf8.ValidString(out) {
			t.Errorf("ps: the long command and name are not cut on a character:\n%q", out)
		}
		for _, flag := range []string{"--wide", "--no-trunc"} {
			out := in.mustRun("ps", flag)
			if !strings.Contains(out, pad) || !strings.Contains(out, longName) {
				t.Errorf("ps %s cut the long command or name:\n%s", flag, out)
			}
		}
	})

	t.Run("events", func(t *testing.T) {
		out := in.mustRun("events")
		head := lineWith(t, out, "DETAIL")
		row := lineWith(t, out, "process.start")
		if colAt(row, "process.start") != colAt(head, "KIND") {
			t.Errorf("events: KIND is not aligned:\n%s", out)
		}
		if !strings.Contains(row, "s ago") {
			t.Errorf("events: TIME is not relative:\n%s", out)
		}
		if strings.Contains(out, "\x1b") {
			t.Errorf("events printed an escape:\n%q", out)
		}
		if wide := in.mustRun("events", "--wide"); !strings.Contains(lineWith(t, wide, "process.start"), "T") {
			t.Errorf("events --wide shows no absolute time:\n%s", wide)
		}
	})

	t.Run("sessions", func(t *testing.T) {
		out := in.mustRun("sessions", "--no-trunc")
		if !strings.Contains(out, "ago") {
			t.Errorf("sessions: STARTED is not relative:\n%s", out)
		}
	})

	t.Run("stop", func(t *testing.T) {
		out := in.mustRun("stop", wideName)
		if strings.Contains(out, "\x1b") || !strings.Contains(out, shown+": ") {
			t.Errorf("stop's summary must show the name escaped:\n%q", out)
		}
	})
}

// TestPathsArePrintedEscaped covers item 8c beyond the tables: a state directory
// whose name holds an escape sequence and a newline is printed escaped by
// status, doctor and logs, and a host config path by hosts.
func TestPathsArePrintedEscaped(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	evil := filepath.Join(in.state, "e\x1b[31m\nd")
	if err := os.MkdirAll(evil, 0o700); err != nil {
		t.Fatal(err)
	}
	shownEvil := filepath.Join(in.state, `e\x1b[31m\nd`)
	in.env = append(in.env, "SUPERVISOR_STATE_DIR="+evil)
	check := func(what, out string) {
		t.Helper()
		if strings.Contains(out, "\x1b") || !strings.Contains(out, shownEvil) {
			t.Errorf("%s must show the path escaped:\n%q", what, out)
		}
	}

	// A lock file nobody holds is a doctor finding that names its path.
	writeFile(t, filepath.Join(evil, "daemon.lock"), "")
	out, _, _ := in.run("doctor", "--only-pid", strconv.Itoa(os.Getpid()))
	check("doctor", out)
	os.Remove(filepath.Join(evil, "daemon.lock"))

	in.mustRun("daemon")
	check("status", in.mustRun("status"))
	_, errOut, _ := in.run("logs", "nosuch")
	check("logs", errOut)

	_, env := in.homeEnv(t)
	project := filepath.Join(t.TempDir(), "p\x1b[2J")
	writeFile(t, filepath.Join(project, ".mcp.json"), `{"mcpServers": {"x": {"command": "/bin/true"}}}`)
	out, errOut, code := runEnv(t, env, "", "hosts", "--project", project)
	if code != 0 || strings.Contains(out, "\x1b") || !strings.Contains(out, `p\x1b[2J`) {
		t.Errorf("hosts: exit %d, must show the file's path escaped:\n%q\n%s", code, out, errOut)
	}
}

// TestEveryHelpShowsExamplesAndItsFlags walks every command from `supervisor --help` down: each
// --help shows examples, and its usage line names every flag it lists.
func TestEveryHelpShowsExamplesAndItsFlags(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	flagLine := regexp.MustCompile(`^\s+(?:-([a-zA-Z]), )?--([a-z0-9-]+)`)
	seen := 0
	var walk func(path []string)
	walk = func(path []string) {
		out := in.mustRun(append(append([]string{}, path...), "--help")...)
		seen++
		name := strings.Join(append([]string{"supervisor"}, path...), " ")
		if !strings.Contains(out, "\nExamples:\n") {
			t.Errorf("%s --help has no examples:\n%s", name, out)
		}
		usage := ""
		section := ""
		for _, l := range strings.Split(out, "\n") {
			switch {
			case strings.HasSuffix(l, ":") && !strings.HasPrefix(l, " "):
				section = l
				continue
			case section == "Usage:" && usage == "":
				usage = strings.TrimSpace(l)
			case section == "Available Commands:" && strings.TrimSpace(l) != "":
				walk(append(append([]string{}, path...), strings.Fields(l)[0]))
			case section == "Flags:":
				m := flagLine.FindStringSubmatch(l)
				// A group without a command of its own (the root and
				// its --version) has no usage line of its own to name them.
				if m == nil || m[2] == "help" || strings.HasSuffix(usage, " [command]") {
					continue
				}
				if !strings.Contains(usage, "--"+m[2]) && (m[1] == "" || !strings.Contains(usage, "-"+m[1])) {
					t.Errorf("%s: the usage line %q does not name --%s", name, usage, m[2])
				}
			}
		}
		if strings.Contains(usage, "[flags]") {
			t.Errorf("%s: usage line %q says [flags] instead of naming them", name, usage)
		}
	}
	walk(nil)
	if seen < 30 {
		t.Errorf("walked %d commands, want every command (30 or more)", seen)
	}
}

// TestStatusNamesTheDefaultInstance: status names the default instance when it
// runs but the one SUPERVISOR_STATE_DIR/SUPERVISOR_SOCKET select does not.
func TestStatusNamesTheDefaultInstance(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	home, env := in.homeEnv(t)
	// The default instance of this HOME: no selection variables.
	defEnv := append(append([]string{}, env...), "SUPERVISOR_STATE_DIR=", "SUPERVISOR_SOCKET=")
	if out, errOut, code := runEnv(t, defEnv, "", "daemon"); code != 0 {
		t.Fatalf("start the default daemon: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() {
		out, _, _ := runEnv(t, defEnv, "", "status", "--json")
		var st struct{ PID int }
		json.Unmarshal([]byte(out), &st)
		runEnv(t, defEnv, "", "daemon", "stop")
		if st.PID > 0 {
			killByPID(st.PID)
		}
	})
	out, _, _ := runEnv(t, defEnv, "", "status")
	if !strings.Contains(out, filepath.Join(home, ".local", "state", "supervisor")) {
		t.Fatalf("the default daemon is not HOME's:\n%s", out)
	}

	_, errOut, code := runEnv(t, env, "", "status")
	if code != 3 || !strings.Contains(errOut, "the default instance does run (pid ") ||
		!strings.Contains(errOut, "SUPERVISOR_STATE_DIR and SUPERVISOR_SOCKET select") || !strings.Contains(errOut, "hint: unset") {
		t.Errorf("status of a stopped selected instance: exit %d, stderr %q; want 3 and the default instance named", code, errOut)
	}
}

// TestBreakerAndRestartAnswerJSON: a start refused by an open breaker says how to reset it,
// and `breaker reset` and `daemon restart` answer --json.
func TestBreakerAndRestartAnswerJSON(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	failing := []string{"run", "--name", "crashy", "--", "/bin/sh", "-c", "exit 3"}
	for i := 1; i <= 3; i++ {
		if _, errOut, code := in.run(failing...); code != 3 {
			t.Fatalf("call %d: exit %d, want the server's 3: %s", i, code, errOut)
		}
	}
	in.waitBreakerOpen(t)
	_, errOut, code := in.run(failing...)
	if code != 125 || !strings.Contains(errOut, "retry in ") || !strings.Contains(errOut, "supervisor breaker reset crashy") {
		t.Fatalf("refused start: exit %d, stderr %q; want 125, the retry time and the reset command", code, errOut)
	}

	var closed []spawn.Breaker
	out := in.mustRun("breaker", "reset", "crashy", "--json")
	if err := json.Unmarshal([]byte(out), &closed); err != nil || len(closed) != 1 || closed[0].State != spawn.BreakerClosed || closed[0].Name != "crashy" {
		t.Errorf("breaker reset --json: %v, %+v:\n%s", err, closed, out)
	}

	old := in.daemonPID()
	var res restartResult
	out = in.mustRun("daemon", "restart", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.OldPID != old || res.PID <= 0 || res.PID == old || res.Version == "" {
		t.Errorf("daemon restart --json: %v, %+v (old pid %d):\n%s", err, res, old, out)
	}
	killByPID(old)
}

// TestTableHelpers pins the helpers behind the tables: relative times, cuts
// on cells, and columns padded by display width.
func TestTableHelpers(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{time.Time{}, "-"},
		{now, "0s ago"},
		{now.Add(-3 * time.Second), "3s ago"},
		{now.Add(-90 * time.Second), "1m ago"},
		{now.Add(-2 * time.Hour), "2h ago"},
		{now.Add(-47 * time.Hour), "47h ago"},
		{now.Add(-72 * time.Hour), "3d ago"},
		{now.Add(25 * time.Second), "in 25s"},
	} {
		if got := ago(tc.t, now); got != tc.want {
			t.Errorf("ago(%v) = %q, want %q", now.Sub(tc.t), got, tc.want)
		}
	}
	for _, tc := range []struct {
		s    string
		n    int
		wide bool
		want string
	}{
		{"short", 10, false, "short"},
		{"日本語テキスト", 7, false, "日本..."},
		{"日本語テキスト", 7, true, "日本語テキスト"},
		{"ab😀cd", 5, false, "ab..."},
	} {
		if got := fit(tc.s, tc.n, tc.wide); got != tc.want || runewidth.StringWidth(got) > tc.n && !tc.wide {
			t.Errorf("fit(%q, %d, %v) = %q, want %q", tc.s, tc.n, tc.wide, got, tc.want)
		}
	}
	var b strings.Builder
	tw := newTable(&b)
	fmt.Fprint(tw, "A\tB\tC\n日本\tx\tlast\nz😀z\ty\t\n")
	tw.Flush()
	want := "A     B  C\n日本  x  last\nz😀z  y\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}
