//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/api"
)

// TestIdleConnectionsCannotStarveStops: a daemon with 256 file descriptors
// faces 600 same-uid clients that say hello and then idle. It refuses what
// is over its connection caps (keeping fds for the cascade), closes the
// idle ones after SUPERVISOR_IDLE_TIMEOUT, and meanwhile a host SIGKILLed
// still gets its server stopped and recorded; afterwards new requests and
// runs are served.
func TestIdleConnectionsCannotStarveStops(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.startDaemonCmd(t, exec.Command("/bin/sh", "-c", `ulimit -n 256 && exec "$0" daemon --foreground`, bin),
		"SUPERVISOR_IDLE_TIMEOUT=3s")

	h := in.startHost(t, 1, "--", bin, "_fixture", "ignore-term")

	// The flood: each client says hello (Dial) and then holds its
	// connection without a word.
	var mu sync.Mutex
	var held []*api.Client
	refused := 0
	var unclear []string // refusals that are not the retryable connection-limit error
	var wg sync.WaitGroup
	for i := 0; i < 600; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			c, err := api.Dial(ctx, in.socket())
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				var e *api.Error
				// (A client whose 2 s ran out before its turn came is no
				// wrong answer.)
				var ne net.Error
				timedOut := errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
				if !timedOut && (!errors.As(err, &e) || !e.Retry || !strings.Contains(e.Message, "connection limit")) {
					unclear = append(unclear, err.Error())
				}
				return
			}
			held = append(held, c)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	t.Logf("%d idle clients admitted, %d refused", len(held), refused)
	if len(unclear) > 0 {
		t.Errorf("%d of %d refused clients got something else than the retryable connection-limit error, e.g. %q", len(unclear), refused, unclear[0])
	}
	if len(held) > 128 || refused == 0 {
		t.Errorf("the daemon admitted %d of 600 idle clients with 256 fds: want a cap well below its fd limit", len(held))
	}

	// The host dies while the flood holds its connections: the server
	// (which ignores SIGTERM) must still be stopped, and its record final.
	h.cmd.Process.Kill()
	waitGonePID(t, h.servers[0], h.tokens[0])
	p := waitRecord(t, in, h.servers[0], func(p api.Process) bool { return p.State.Final() && p.Stop != nil })
	if p.Stop.Result != "killed" {
		t.Errorf("stop of %s: %q, want killed (it ignores SIGTERM)", p.ID, p.Stop.Result)
	}

	// Requests are served again: the idle clients are closed after 3 s,
	// and a client refused meanwhile retries.
	if out, errOut, code := in.run("ps", "--all"); code != 0 || !strings.Contains(out, p.ID) {
		t.Errorf("ps after the flood: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := in.run("run", "--", bin, "_fixture", "exit", "0"); code != 0 {
		t.Errorf("run after the flood: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The held connections were closed by the daemon: a read sees EOF.
	closed := 0
	for _, c := range held {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, _, err := c.Recv(); err != nil {
			closed++
		}
	}
	if closed != len(held) {
		t.Errorf("%d of %d idle connections were closed by the daemon, want all", closed, len(held))
	}
}

// TestFailedStopIsRetried: a cascade that cannot scan /proc (the
// fault-injection build fails the first three scans with EMFILE, as a
// daemon out of fds sees) signals nothing and reports "stop failed"; the
// stop is retried until it goes through, so the server does not outlive
// its host and its record does not stay "stopping".
func TestFailedStopIsRetried(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.startDaemonWith(t, faultBin(t), "SUPERVISOR_FAULT=scan.fail:3")
	h := in.startHost(t, 1, "--", bin, "_fixture", "sleep")
	h.cmd.Process.Kill()
	waitGonePID(t, h.servers[0], h.tokens[0])
	p := waitRecord(t, in, h.servers[0], func(p api.Process) bool {
		return p.State.Final() && p.Stop != nil && p.Stop.Result != "stop failed"
	})
	if p.State != api.StateExited || p.Stop.Result != "exited on SIGTERM" {
		t.Errorf("record %s: %s, stop %q; want exited, exited on SIGTERM", p.ID, p.State, p.Stop.Result)
	}
	var failed, final int
	for _, ev := range in.eventsJSON("--lines", "0") {
		if ev.Process != p.ID || ev.Kind != "process.stop" {
			continue
		}
		if strings.Contains(ev.Detail, "stop failed") && strings.Contains(ev.Detail, "too many open files") {
			failed++
		} else if strings.Contains(ev.Detail, "exited on SIGTERM") {
			final++
		}
	}
	if failed == 0 || final != 1 {
		t.Errorf("stop events of %s: %d failed (want ≥ 1, naming the cause), %d final (want 1)", p.ID, failed, final)
	}
}

// TestInPlaceServersCountAgainstFdCap: servers exec'd in their shims'
// places keep no connection, yet each holds fds of the daemon's; they
// count against its cap, so that a run is refused, clearly, before the
// daemon's fds run out, and every server is still stopped.
func TestInPlaceServersCountAgainstFdCap(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	// 128 fds: a reserve of 64, and room for about (128-64)/4 = 16 servers
	// at four fds each (their pidfd and log pipe, a stop's pidfd and
	// cgroup.events).
	in.startDaemonCmd(t, exec.Command("/bin/sh", "-c", `ulimit -n 128 && exec "$0" daemon --foreground`, bin))
	var live []int
	for i := 0; ; i++ {
		if i == 30 {
			t.Fatalf("%d servers started, want runs refused past the cap of about 16", len(live))
		}
		cmd := in.command("run", "--", bin, "_fixture", "sleep")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errOut strings.Builder
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-done
		})
		line, err := readLine(bufio.NewReader(stdout), wait)
		if err == nil {
			pid, _ := strconv.Atoi(strings.TrimPrefix(line, "ready "))
			cleanupByPID(t, pid)
			live = append(live, pid)
			continue
		}
		<-done
		code := cmd.ProcessState.ExitCode()
		if code != 125 || !strings.Contains(errOut.String(), "server limit") || !strings.Contains(errOut.String(), "ulimit -n") {
			t.Fatalf("run %d ended with %d: %q; want 125 and the daemon's limit named", i+1, code, errOut.String())
		}
		break
	}
	if len(live) > 16 || len(live) < 8 {
		t.Errorf("%d servers started before a run was refused, want the cap of about 16", len(live))
	}
	// A burst at the cap: every run in flight holds its slot, so none
	// gets past it however many start at once. (Three: more than the
	// request cap (4 here) at once would find no connection and run in
	// local mode, design §2.)
	var burst []chan int
	for range 3 {
		cmd := in.command("run", "--", bin, "_fixture", "sleep")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		code := make(chan int, 1)
		go func() { cmd.Wait(); code <- cmd.ProcessState.ExitCode() }()
		t.Cleanup(func() { cmd.Process.Kill() })
		burst = append(burst, code)
	}
	for _, code := range burst {
		select {
		case c := <-code:
			if c != 125 {
				t.Errorf("a run of the burst at the cap exited %d, want 125", c)
			}
		case <-time.After(wait):
			t.Fatal("a run of the burst at the cap still runs")
		}
	}
	// Requests still get in at the cap.
	recs := in.mustProcesses(false)
	if len(recs) != len(live) {
		t.Errorf("ps lists %d servers, want the %d started", len(recs), len(live))
	}
	in.mustRun("daemon", "stop")
	for _, p := range recs {
		waitGonePID(t, p.PID, p.Token)
	}
}
