//go:build unix

package logwriter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
)

// Hub copies many output pipes into their logs: one process serves every
// server of a daemon, where a writer process per server cost each server
// ~2 MiB and four thread ids for its whole life.
//
// Its pipes come from the daemon as log_pipe messages (api.LogPipe) with
// their read ends. The daemon keeps a duplicate of each read end, so a hub
// that dies costs no server a SIGPIPE: the daemon hands the pipes to a new
// hub, and what the servers wrote meanwhile waits in the pipes. A daemon
// that dies costs nothing either: the hub goes on copying, and re-joins
// the next daemon on its socket to give it duplicates again (Run).
//
// A pipe is read only when it is readable, into a buffer taken from a pool
// for that one read: an idle pipe holds no buffer, only a parked goroutine.
// Pipes of the same log file (a restarted server whose old leftovers still
// hold the old pipe) share one writer, so the file's size is counted once.
type Hub struct {
	mu    sync.Mutex
	pipes map[string]*hubPipe
	files map[string]*hubFile // by path
	conn  *api.Conn           // the daemon now; nil between daemons
	empty chan struct{}       // a token whenever the last pipe ends
	wg    sync.WaitGroup
}

type hubPipe struct {
	spec api.LogPipe
	r    *os.File // the read end, non-blocking (the runtime's poller)
	tee  *os.File // nil when none; set once, closed by finish
	// teeGone is set once a write to the tee failed (its host went away).
	teeGone atomic.Bool
	file    *hubFile
	// dropped and logErr are what the log file could not take, told to
	// the daemon with the pipe's end (guarded by file.mu).
	dropped int64
	logErr  string
}

// hubFile is one log file, shared by every pipe writing it.
type hubFile struct {
	mu   sync.Mutex
	w    writer
	refs int // guarded by Hub.mu
}

// NewHub returns a hub with no pipes.
func NewHub() *Hub {
	return &Hub{pipes: map[string]*hubPipe{}, files: map[string]*hubFile{}, empty: make(chan struct{}, 1)}
}

// bufs are the read buffers, one per read in progress.
var bufs = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// Pipes is how many pipes the hub copies.
func (h *Hub) Pipes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pipes)
}

// Run serves conn, the daemon that started the hub, then, whenever its
// daemon is gone, dials the next (dial, retried with backoff) and hands it
// every pipe. It returns once no daemon is connected and no pipe is left,
// or when ctx ends (the pipes' copies go on until Wait).
func (h *Hub) Run(ctx context.Context, conn *api.Conn, dial func(context.Context) (*api.Conn, error)) error {
	delay := 100 * time.Millisecond
	for {
		if conn != nil {
			h.serve(conn)
			h.mu.Lock()
			h.conn = nil
			h.mu.Unlock()
			conn.Close()
			conn = nil
			delay = 100 * time.Millisecond
		}
		if h.Pipes() == 0 {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-h.empty:
			t.Stop()
			continue // the check above ends it, unless a pipe came since
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
		c, err := dial(ctx)
		if err != nil {
			continue
		}
		if err := h.rejoin(c); err != nil {
			c.Close()
			continue
		}
		conn = c
	}
}

// Wait waits for every pipe's copy to end.
func (h *Hub) Wait() { h.wg.Wait() }

// serve takes pipes from conn until it fails.
func (h *Hub) serve(conn *api.Conn) {
	h.mu.Lock()
	h.conn = conn
	h.mu.Unlock()
	for {
		m, fds, err := conn.Recv()
		if err != nil {
			return
		}
		if m.Type != api.TypeLogPipe {
			api.CloseFds(fds)
			continue
		}
		var spec api.LogPipe
		if err := api.Decode(m, &spec); err != nil {
			api.CloseFds(fds)
			continue
		}
		if err := h.Add(spec, fds); err != nil {
			// The daemon still holds the pipe; it learns nothing here
			// and keeps the pipe's read end until this hub is gone.
			continue
		}
	}
}

// Add starts copying a pipe: fds are its read end and, with spec.Tee,
// the tee. The hub owns fds from here, also on error.
func (h *Hub) Add(spec api.LogPipe, fds []int) error {
	want := 1
	if spec.Tee {
		want = 2
	}
	if spec.ID == "" || spec.Path == "" || len(fds) != want {
		api.CloseFds(fds)
		return fmt.Errorf("log pipe %q: want an id, a path and %d fds, got %d", spec.ID, want, len(fds))
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		api.CloseFds(fds)
		return fmt.Errorf("log pipe %q: %w", spec.ID, err)
	}
	p := &hubPipe{spec: spec, r: os.NewFile(uintptr(fds[0]), "log-pipe")}
	if spec.Tee {
		p.tee = os.NewFile(uintptr(fds[1]), "tee")
	}
	h.mu.Lock()
	if _, dup := h.pipes[spec.ID]; dup {
		h.mu.Unlock()
		p.close()
		return fmt.Errorf("log pipe %q: already copied", spec.ID)
	}
	f := h.files[spec.Path]
	if f == nil {
		f = &hubFile{w: writer{opt: Options{Path: spec.Path, MaxBytes: spec.MaxBytes, Keep: spec.Keep}}}
		h.files[spec.Path] = f
	}
	f.refs++
	p.file = f
	h.pipes[spec.ID] = p
	h.wg.Add(1)
	h.mu.Unlock()
	go h.copy(p)
	return nil
}

// copy copies p until EOF, then lets it go and tells the daemon.
func (h *Hub) copy(p *hubPipe) {
	defer h.wg.Done()
	rc, err := p.r.SyscallConn()
	for err == nil {
		var buf *[]byte
		var n int
		var rerr error
		err = rc.Read(func(fd uintptr) bool {
			buf = bufs.Get().(*[]byte)
			for {
				n, rerr = unix.Read(int(fd), *buf)
				if !errors.Is(rerr, unix.EINTR) {
					break
				}
			}
			if errors.Is(rerr, unix.EAGAIN) {
				bufs.Put(buf)
				buf = nil
				return false // parked until readable, holding no buffer
			}
			return true
		})
		if err == nil && rerr == nil && n > 0 {
			p.write((*buf)[:n])
		}
		if buf != nil {
			bufs.Put(buf)
		}
		if err == nil && (rerr != nil || n == 0) {
			err = errors.New("end of the pipe") // EOF, or a read error: the same end
		}
	}
	h.finish(p)
}

// write copies b to the log, then the tee. A failed log write drops that
// data (the pipe keeps being read, so its writer never blocks on it), and
// counts it: the daemon is told with the pipe's end. The log comes first:
// a hub killed between the two has kept what the host was shown, which
// `supervisor logs` reads back.
func (p *hubPipe) write(b []byte) {
	p.file.mu.Lock()
	if err := p.file.w.write(b); err != nil {
		if p.logErr == "" {
			p.logErr = err.Error()
		}
		p.dropped += int64(len(b))
	}
	p.file.mu.Unlock()
	if p.tee != nil && !p.teeGone.Load() {
		if _, err := p.tee.Write(b); err != nil {
			p.teeGone.Store(true) // the host went away; the log goes on
		}
	}
}

func (p *hubPipe) close() {
	p.r.Close()
	if p.tee != nil {
		p.tee.Close()
	}
}

// finish lets p go: its fds first (the tee is the host's stderr, whose
// EOF the host may be waiting for), then its file once no pipe writes it.
func (h *Hub) finish(p *hubPipe) {
	h.mu.Lock()
	// Closed under the lock: a re-join hands over every pipe in the map,
	// and a closed one's fds cannot be sent.
	p.close()
	delete(h.pipes, p.spec.ID)
	p.file.refs--
	if p.file.refs == 0 {
		delete(h.files, p.spec.Path)
		p.file.mu.Lock()
		p.file.w.close()
		p.file.mu.Unlock()
	}
	conn := h.conn
	if len(h.pipes) == 0 {
		select {
		case h.empty <- struct{}{}:
		default:
		}
	}
	// A re-join hands its inventory over under the lock, so a pipe is
	// either in it or reported done after it. The report itself is sent
	// outside the lock: the daemon may be busy sending to the hub, and
	// this hub must go on reading meanwhile.
	if conn != nil {
		p.file.mu.Lock()
		done := api.LogDone{ID: p.spec.ID, Dropped: p.dropped, LogError: p.logErr}
		p.file.mu.Unlock()
		go func() {
			// Ends when sent or the connection is closed: a daemon gone
			// meanwhile gets the pipe's inventory from a re-join instead.
			_ = conn.Send(api.TypeLogDone, &done)
		}()
	}
	h.mu.Unlock()
}

// rejoin introduces the hub to a new daemon on conn and hands it every
// pipe's read end (SCM_RIGHTS copies it: the daemon's duplicate).
func (h *Hub) rejoin(conn *api.Conn) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := conn.Send(api.TypeLogHub, &api.LogHub{PID: os.Getpid(), Pipes: len(h.pipes)}); err != nil {
		return err
	}
	for _, p := range h.pipes {
		if err := p.send(conn); err != nil {
			return err
		}
	}
	if err := conn.Send(api.TypeLogPipesEnd, nil); err != nil {
		return err
	}
	h.conn = conn
	return nil
}

// send hands p's read end to conn (not its tee: a daemon keeps none).
// The fd is reached through Control: Fd would put the read end back into
// blocking mode under the poller.
func (p *hubPipe) send(conn *api.Conn) error {
	rc, err := p.r.SyscallConn()
	if err != nil {
		return err
	}
	spec := p.spec
	spec.Tee = false
	var serr error
	if err := rc.Control(func(r uintptr) { serr = conn.Send(api.TypeLogPipe, &spec, int(r)) }); err != nil {
		return err
	}
	return serr
}
