//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/lockfile"
)

// rawConn opens a plain connection to the daemon's socket.
func rawConn(t *testing.T, socket string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(wait))
	return c
}

func frame(payload []byte) []byte {
	b := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(b, uint32(len(payload)))
	copy(b[4:], payload)
	return b
}

const hello = `{"type":"hello","body":{"protocol":1,"version":"test","pid":1}}`

// readReply reads one frame and returns its type, then checks the daemon
// closed the connection after it.
func expectErrorThenClose(t *testing.T, c net.Conn) {
	t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("want an error reply, got %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	var m api.Msg
	if err := json.Unmarshal(body, &m); err != nil || m.Type != api.TypeError {
		t.Fatalf("got reply %s, want an error message", body)
	}
	if _, err := c.Read(hdr[:]); !closedByPeer(err) {
		t.Fatalf("after the error reply: got %v, want the daemon to close the connection", err)
	}
}

// closedByPeer: a close with our unread bytes in its buffer arrives as a
// reset rather than EOF; both mean the daemon hung up.
func closedByPeer(err error) bool {
	return err == io.EOF || errors.Is(err, syscall.ECONNRESET)
}

func readHello(t *testing.T, c net.Conn) {
	t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	io.ReadFull(c, body)
	if !strings.Contains(string(body), `"hello"`) {
		t.Fatalf("got %s, want hello", body)
	}
}

func TestSocketRefusesBadMessages(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.mustRun("run", "--name", "keeper", "--", bin, "_fixture", "exit", "0")
	// The run returns when its server exits; the daemon records the exit
	// a moment later, and only the bad messages may change nothing.
	var before []api.Process
	waitCond(t, func() error {
		before = in.mustProcesses(true)
		if len(before) != 1 || before[0].State != api.StateExited {
			return fmt.Errorf("want the one run recorded as exited, have %v", ids(before))
		}
		return nil
	})

	tests := []struct {
		name      string
		afterHelo bool
		send      []byte
	}{
		{"garbage before hello", false, frame([]byte("this is not json"))},
		{"no hello first", false, frame([]byte(`{"type":"ps","body":{}}`))},
		{"oversized frame", false, []byte{0xff, 0xff, 0xff, 0xff, 'x'}},
		{"empty frame", false, []byte{0, 0, 0, 0}},
		{"garbage after hello", true, frame([]byte("{{{{"))},
		{"unknown type", true, frame([]byte(`{"type":"reboot-the-machine"}`))},
		{"wrong body", true, frame([]byte(`{"type":"ps","body":"a string"}`))},
		{"run without fds", true, frame([]byte(`{"type":"run","body":{"argv":["true"],"session":"x"}}`))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := rawConn(t, in.socket())
			if tt.afterHelo {
				c.Write(frame([]byte(hello)))
				readHello(t, c)
			}
			c.Write(tt.send)
			expectErrorThenClose(t, c)
		})
	}
	// The daemon and its registry carry on.
	if _, _, code := in.run("status"); code != 0 {
		t.Fatalf("status exit %d after bad messages, want 0", code)
	}
	if after := in.mustProcesses(true); !reflect.DeepEqual(ids(before), ids(after)) {
		t.Fatalf("registry changed: before %v, after %v", ids(before), ids(after))
	}
}

func ids(ps []api.Process) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ID+":"+string(p.State))
	}
	return out
}

// TestSocketRefusesForeignUID runs a daemon as another uid and connects as
// root: the daemon must close the connection without answering.
func TestSocketRefusesForeignUID(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a daemon as another uid (SO_PEERCRED check)")
	}
	const nobody = 65534
	dir, err := os.MkdirTemp("", "svf")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chown(dir, nobody, nobody)
	socket := filepath.Join(dir, "s.sock")
	cmd := exec.Command(bin, "daemon", "--foreground")
	cmd.Env = append(os.Environ(), api.EnvStateDir+"="+dir, api.EnvSocket+"="+socket, "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(wait):
			cmd.Process.Kill()
			<-exited
		}
	}()
	logs := bufio.NewReader(stderr)
	// Wait for the daemon's start line.
	for {
		line, err := readLine(logs, wait)
		if err != nil {
			t.Fatalf("daemon as uid %d did not start: %v", nobody, err)
		}
		if strings.Contains(line, "daemon started") {
			break
		}
	}
	c := rawConn(t, socket)
	c.Write(frame([]byte(hello)))
	var b [1]byte
	if n, err := c.Read(b[:]); !closedByPeer(err) {
		t.Fatalf("foreign uid got %d bytes, err %v; want the connection closed unanswered", n, err)
	}
	for {
		line, err := readLine(logs, wait)
		if err != nil {
			t.Fatalf("no log line about the refused uid: %v", err)
		}
		if strings.Contains(line, "refusing connection") && strings.Contains(line, "runs as uid 0,") {
			break
		}
	}
	// The daemon is still there for its own user.
	select {
	case <-exited:
		t.Fatal("daemon exited after refusing a foreign connection")
	default:
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"missing --", []string{"run", bin, "_fixture", "exit", "0"}, nil, "must follow --"},
		{"nothing after --", []string{"run", "--"}, nil, "must follow --"},
		{"invalid session id", []string{"run", "--session", "bad/id", "--", "true"}, nil, "invalid session id"},
		{"invalid session env", []string{"run", "--", "true"}, []string{"SUPERVISOR_SESSION=has space"}, "invalid session id"},
		{"unknown flag", []string{"run", "--frobnicate", "--", "true"}, nil, "unknown flag"},
		{"grace banana", []string{"run", "--grace", "banana", "--", "true"}, nil, "banana"},
		{"negative grace", []string{"run", "--grace", "-1s", "--", "true"}, nil, "negative"},
		{"unknown command", []string{"frobnicate"}, nil, "unknown command"},
		{"stop needs a target", []string{"stop"}, nil, "stop needs a process id or name"},
		{"session end bad id", []string{"session", "end", "../x"}, nil, "invalid session id"},
		{"ensure without port", []string{"ensure", "--", "true"}, nil, "--port is required"},
		{"ensure port range", []string{"ensure", "--port", "70000", "--", "true"}, nil, "1 to 65535"},
		{"ensure bad health", []string{"ensure", "--port", "80", "--health", "udp", "--", "true"}, nil, "want none, tcp or an http:// URL"},
		{"ensure missing --", []string{"ensure", "--port", "80", "true"}, nil, "must follow --"},
		{"max-instances negative", []string{"run", "--name", "x", "--max-instances", "-1", "--", "true"}, nil, "0 (no cap) or more"},
		{"logs negative lines", []string{"logs", "x", "--lines", "-3"}, nil, "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := in.command(tt.args...)
			cmd.Env = append(cmd.Env, tt.env...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil {
				t.Fatalf("exit 0, want non-zero")
			}
			if !strings.HasPrefix(stderr.String(), "supervisor: ") || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("stderr %q, want a \"supervisor: \" error mentioning %q", stderr.String(), tt.want)
			}
		})
	}
	// Nothing was recorded and no daemon was started by bad input.
	if pid := in.daemonPID(); pid != 0 {
		t.Fatalf("bad input started a daemon (pid %d)", pid)
	}
	if _, err := os.Stat(filepath.Join(in.state, "registry.db")); err == nil {
		t.Fatal("bad input created a registry")
	}
}

func TestListingCommandsNeedADaemon(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"status"}, 3},
		{[]string{"ps"}, 1},
		{[]string{"sessions", "--json"}, 1},
		{[]string{"stop", "x"}, 1},
		{[]string{"daemon", "stop"}, 1},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, errOut, code := in.run(tt.args...)
			if code != tt.code || !strings.Contains(errOut, "not running") {
				t.Fatalf("exit %d stderr %q, want exit %d saying the daemon is not running", code, errOut, tt.code)
			}
		})
	}
	if pid := in.daemonPID(); pid != 0 {
		t.Fatalf("a listing command started a daemon (pid %d)", pid)
	}
}

func TestRegistrySurvivesRestart(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.mustRun("run", "--name", "one", "--", bin, "_fixture", "exit", "0")
	in.mustRun("run", "--name", "two", "--", bin, "_fixture", "exit", "0")
	in.run("run", "--name", "three", "--", "no-such-command")
	// A server exec'd in its shim's place is its host's child: the host
	// may see its exit before the daemon has recorded it.
	waitCond(t, func() error {
		for _, p := range in.mustProcesses(true) {
			if p.State == api.StateRunning || p.State == api.StateStarting {
				return fmt.Errorf("%s is still %s", p.Name, p.State)
			}
		}
		return nil
	})
	before := in.mustRun("ps", "--all", "--json")
	in.mustRun("daemon", "stop")
	if pid := in.daemonPID(); pid != 0 {
		t.Fatalf("daemon %d still answers after daemon stop", pid)
	}
	in.mustRun("daemon")
	after := in.mustRun("ps", "--all", "--json")
	if before != after {
		t.Fatalf("ps --all --json changed across a restart:\nbefore: %s\nafter:  %s", before, after)
	}
	var ps []api.Process
	json.Unmarshal([]byte(after), &ps)
	if len(ps) != 3 {
		t.Fatalf("got %d records, want 3", len(ps))
	}
}

func TestSecondDaemonSaysWhoHoldsTheLock(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.mustRun("daemon")
	pid := in.daemonPID()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "daemon", "--foreground")
	cmd.Env = in.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("second daemon: %v, want exit 0: %s", err, out)
	}
	if !strings.Contains(string(out), "already running") || !strings.Contains(string(out), strconv.Itoa(pid)) {
		t.Fatalf("second daemon said %q, want it to name pid %d", out, pid)
	}
	if _, _, code := in.run("status", "--json"); code != 0 {
		t.Fatalf("status exit %d", code)
	}
}

// TestJSONContract checks the field names of design §8 that scripts rely
// on are all present in ps --json and sessions --json.
func TestJSONContract(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	if _, _, code := in.run("run", "--session", "contract", "--", bin, "_fixture", "exit", "4"); code != 4 {
		t.Fatalf("run exit %d, want 4", code)
	}
	tests := []struct {
		args []string
		keys []string
	}{
		{[]string{"ps", "--all", "--json"}, []string{"id", "session", "name", "pid", "pgid", "state", "started_at",
			"exited_at", "exit_code", "signal", "port", "shared", "health", "restarts", "argv"}},
		{[]string{"sessions", "--all", "--json"}, []string{"id", "host_pid", "host_command", "state", "started_at",
			"ended_at", "processes"}},
	}
	for _, tt := range tests {
		t.Run(tt.args[0], func(t *testing.T) {
			var recs []map[string]any
			out := in.mustRun(tt.args...)
			if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 1 {
				t.Fatalf("got %v records (%v) from %s, want 1", len(recs), err, out)
			}
			for _, k := range tt.keys {
				if _, ok := recs[0][k]; !ok {
					t.Errorf("%s: no %q field in %v", strings.Join(tt.args, " "), k, recs[0])
				}
			}
			if ts, ok := recs[0]["started_at"].(string); !ok || !strings.HasSuffix(ts, "Z") {
				t.Errorf("started_at %v, want an RFC 3339 UTC time", recs[0]["started_at"])
			}
		})
	}
	var ps []api.Process
	json.Unmarshal([]byte(in.mustRun("ps", "--all", "--json")), &ps)
	if ps[0].ExitCode == nil || *ps[0].ExitCode != 4 || ps[0].State != "exited" {
		t.Fatalf("got state %s exit_code %v, want exited with 4", ps[0].State, ps[0].ExitCode)
	}
}

// TestStartOutlastsAnExitingLockHolder: a daemon started while another
// process holds the singleton lock steps aside for it; when that holder
// then goes away without ever answering (a daemon on its way out, seen in
// CI after `daemon stop --keep-processes`), `supervisor daemon` starts one
// again once the lock is free, instead of dialing out its 10 s.
func TestStartOutlastsAnExitingLockHolder(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	if err := os.MkdirAll(in.state, 0o700); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockfile.Hold(filepath.Join(in.state, "daemon.lock"))
	if err != nil {
		t.Fatal(err)
	}
	start := in.command("daemon")
	var out strings.Builder
	start.Stdout, start.Stderr = &out, &out
	if err := start.Start(); err != nil {
		unlock()
		t.Fatal(err)
	}
	// Once the first daemon has met the held lock and stepped aside, the
	// holder goes, as an exiting daemon's last thread does.
	in.waitLog(t, "this one steps aside", 1)
	unlock()
	if err := start.Wait(); err != nil {
		t.Fatalf("supervisor daemon: %v: %s", err, out.String())
	}
	if !strings.Contains(out.String(), "daemon running, pid") || in.daemonPID() == 0 {
		t.Fatalf("supervisor daemon said %q; want a daemon running", out.String())
	}
}
