package broker

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// upstream is one run of the upstream process.
type upstream struct {
	pid    int
	cmd    *exec.Cmd
	stdin  *os.File // our end
	stdout *os.File // our end
	q      *queue
	// exited is closed once the process has exited and its output has
	// been read (or abandoned: a grandchild may hold the pipe open).
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

// outputGrace is how long output is still read after the upstream exits:
// answers it wrote just before dying reach their clients, but a grandchild
// holding its stdout cannot hold up the restart.
const outputGrace = 500 * time.Millisecond

// startUpstream starts the process and its relay goroutines, and installs
// it as the current upstream.
func (b *Broker) startUpstream() (*upstream, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("broker: start %q: stdin pipe: %w", b.cfg.Argv[0], err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("broker: start %q: stdout pipe: %w", b.cfg.Argv[0], err)
	}
	cmd := exec.Command(b.cfg.Argv[0], b.cfg.Argv[1:]...)
	cmd.Dir, cmd.Env = b.cfg.Dir, b.cfg.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	setGroup(cmd)
	err = b.start(cmd)
	// The child has its copies; ours would keep its stdin from reaching EOF
	// and our reader from seeing its exit.
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("broker: start upstream %q: %w; check the server's command", b.cfg.Argv[0], err)
	}
	u := &upstream{pid: cmd.Process.Pid, cmd: cmd, stdin: inW, stdout: outR, q: newQueue(inW, nil), exited: make(chan struct{})}
	// Installed before its reader starts, so nothing it says early (a log
	// notification) is taken for a dead run's.
	b.mu.Lock()
	b.up = u
	b.initialized = false
	b.discoverAsked = false
	b.renewed = false
	b.idleSince = time.Now()
	b.emit("upstream.start", "pid "+strconv.Itoa(u.pid))
	b.log.Info("upstream started", "pid", u.pid, "argv", b.cfg.Argv)
	if b.init.result != nil {
		// A restart: replay the first client's initialize before anything
		// else; clients' messages wait in held until its answer.
		b.ready = false
		id := b.newID()
		b.pending[id] = &pending{kind: kindReinit, sent: true}
		b.enqueue(u.q, b.init.replay(id), 0)
	} else {
		b.markReady()
		if b.cfg.Lazy && b.cache != nil && len(b.cache.Discover) > 0 {
			// A server of the stateless revision has no handshake to
			// fill the cache after: its lists are asked now.
			b.fillDiscover()
		}
	}
	b.unlock()

	readerDone := make(chan struct{})
	b.wg.Add(3)
	go func() {
		defer b.wg.Done()
		defer close(readerDone)
		b.readUpstream(u)
	}()
	go func() {
		defer b.wg.Done()
		b.writeUpstream(u)
	}()
	go func() {
		defer b.wg.Done()
		u.err = cmd.Wait()
		t := time.NewTimer(outputGrace)
		select {
		case <-readerDone:
		case <-t.C:
		}
		t.Stop()
		u.stdout.Close()
		<-readerDone
		close(u.exited)
	}()

	return u, nil
}

// writeUpstream writes the queue to the upstream's stdin until the queue
// is closed (stop) or the process exits, then closes stdin.
func (b *Broker) writeUpstream(u *upstream) {
	defer u.stdin.Close()
	w := bufio.NewWriterSize(u.stdin, 64<<10)
	for {
		batch, ok := u.q.take(u.exited)
		if !ok {
			return
		}
		if err := writeBatch(w, batch, nil); err != nil {
			b.log.Warn("write to upstream", "pid", u.pid, "err", err)
			return // it died: Run notices through exited
		}
		u.q.done()
	}
}

// readUpstream routes the upstream's messages until its stdout closes.
func (b *Broker) readUpstream(u *upstream) {
	lr := newLineReader(u.stdout, b.cfg.MaxLine)
	for {
		line, err := lr.next()
		if errors.Is(err, errLineTooLong) {
			b.log.Error("upstream wrote a message over the line limit; dropping it", "pid", u.pid, "limit", b.cfg.MaxLine)
			continue
		}
		if err != nil {
			return
		}
		b.fromUpstream(u, line)
	}
}

// stopUpstream is the orderly stop: clients are detached, the upstream's
// stdin closed; then SIGTERM and SIGKILL to its group if it lingers.
func (b *Broker) stopUpstream(u *upstream) {
	b.shutdown()
	b.endUpstream(u)
	b.upstreamGone(u, "stopped")
}

// endUpstream closes u's stdin (the MCP stdio stop), then sends SIGTERM
// and SIGKILL to its group if it lingers, and waits for it.
func (b *Broker) endUpstream(u *upstream) {
	u.q.close() // the writer flushes and closes stdin
	steps := []struct {
		signal func(int)
		name   string
	}{{terminate, "SIGTERM"}, {kill, "SIGKILL"}}
	for _, s := range steps {
		t := time.NewTimer(b.cfg.StopTimeout)
		select {
		case <-u.exited:
			t.Stop()
			return
		case <-t.C:
		}
		b.log.Warn("upstream did not exit; signalling it", "pid", u.pid, "signal", s.name)
		s.signal(u.pid)
	}
	<-u.exited
}

// upstreamGone forgets u and reports its exit.
func (b *Broker) upstreamGone(u *upstream, how string) {
	b.mu.Lock()
	defer b.unlock()
	if b.up == u {
		b.up, b.ready = nil, false
	}
	status := "exit status 0"
	if u.err != nil {
		status = u.err.Error()
	}
	b.emit("upstream.exit", fmt.Sprintf("pid %d %s: %s", u.pid, how, status))
	b.log.Info("upstream exited", "pid", u.pid, "how", how, "status", status)
}

// upstreamExited is the crash path: every request in flight is answered
// with an error and the restart's replay is prepared.
func (b *Broker) upstreamExited(u *upstream) {
	b.upstreamGone(u, "crashed")
	b.mu.Lock()
	defer b.unlock()
	b.initialized = false
	msg := fmt.Sprintf("supervisor broker: the MCP server %q crashed (pid %d: %v) and is being restarted; retry the request", b.cfg.Argv[0], u.pid, u.err)
	for id, p := range b.pending {
		if !p.sent {
			continue // waits in held for the next upstream
		}
		b.failPending(id, p, CodeInternal, msg)
	}
	for id, r := range b.srvReqs {
		// The server that asked is gone: tell the client to stop working on it.
		b.deliver(r.c, notification("notifications/cancelled", fmt.Sprintf(`{"requestId":%d,"reason":"the server restarted"}`, id)))
		delete(b.srvReqs, id)
	}
}

// start starts cmd, confined to the broker's sandbox where it has one:
// from a thread that confines itself first (sandbox.Confined), so no
// other thread of the broker is confined, then its limits, set while the
// process is still this one's unwaited child (its pid cannot be another's).
func (b *Broker) start(cmd *exec.Cmd) error {
	rules := b.cfg.Sandbox
	if rules == nil {
		return cmd.Start()
	}
	if err := sandbox.Confined(*rules, cmd.Start); err != nil {
		return err
	}
	if err := sandbox.LimitResources(cmd.Process.Pid, *rules); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	return nil
}
