//go:build unix

package logwriter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
)

// connPair is a connected pair of api.Conns over a real socket pair.
func connPair(t *testing.T) (daemon, hub *api.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *api.Conn {
		f := os.NewFile(uintptr(fd), "sock")
		defer f.Close()
		fc, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := api.NewConn(fc.(*net.UnixConn))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

// recvDone waits for a log_done and returns its id.
func recvDone(t *testing.T, c *api.Conn) string {
	t.Helper()
	return recvDoneMsg(t, c).ID
}

// recvDoneMsg waits for a log_done and returns it.
func recvDoneMsg(t *testing.T, c *api.Conn) api.LogDone {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	m, fds, err := c.Recv()
	api.CloseFds(fds)
	if err != nil || m.Type != api.TypeLogDone {
		t.Fatalf("want log_done, got %q (%v)", m.Type, err)
	}
	var d api.LogDone
	if err := api.Decode(m, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestHubSharesOneFileAmongItsPipes: two pipes of one log (an old
// incarnation's leftovers and the new one) count one size, so the live
// file never passes the cap; a tee gets its pipe's bytes; each pipe's EOF
// is reported; the hub ends once no daemon and no pipe is left.
func TestHubSharesOneFileAmongItsPipes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.log")
	daemon, hubSide := connPair(t)
	h := NewHub()
	ran := make(chan error, 1)
	go func() {
		ran <- h.Run(context.Background(), hubSide, func(context.Context) (*api.Conn, error) {
			return nil, errors.New("no next daemon in this test")
		})
	}()

	var w [2]*os.File
	var teeR *os.File
	for i := range w {
		r, wr, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w[i] = wr
		spec := api.LogPipe{ID: fmt.Sprint("p", i), Path: path, MaxBytes: 100, Keep: 5}
		fds := []int{int(r.Fd())}
		if i == 0 {
			tr, tw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			teeR = tr
			spec.Tee = true
			fds = append(fds, int(tw.Fd()))
			defer tw.Close()
		}
		if err := daemon.Send(api.TypeLogPipe, &spec, fds...); err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	line := strings.Repeat("x", 9) + "\n"
	for range 20 {
		for _, wr := range w {
			if _, err := wr.WriteString(line); err != nil {
				t.Fatal(err)
			}
		}
	}
	w[0].Close()
	if id := recvDone(t, daemon); id != "p0" {
		t.Fatalf("done %q, want p0", id)
	}
	tee := make([]byte, 400)
	if n, err := teeR.Read(tee); err != nil || n != 200 {
		t.Fatalf("tee read %d bytes (%v), want p0's 200", n, err)
	}
	w[1].Close()
	if id := recvDone(t, daemon); id != "p1" {
		t.Fatalf("done %q, want p1", id)
	}
	total := 0
	for i := 0; i <= 5; i++ {
		name := path
		if i > 0 {
			name = Backup(path, i)
		}
		b, err := os.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) && i > 0 {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(b) > 100 {
			t.Errorf("%s has %d bytes, over the cap of 100", name, len(b))
		}
		total += len(b)
	}
	if total != 400 {
		t.Errorf("the live log and its 5 backups hold %d bytes, want all 400", total)
	}
	daemon.Close()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the hub did not end with no daemon and no pipe")
	}
}

// TestHubRejoinsWithItsPipes: once its daemon is gone a hub with pipes
// dials the next, hands over every pipe's fds and goes on reporting.
func TestHubRejoinsWithItsPipes(t *testing.T) {
	first, hubSide := connPair(t)
	next, nextHub := connPair(t)
	h := NewHub()
	dialed := make(chan struct{}, 1)
	go h.Run(context.Background(), hubSide, func(context.Context) (*api.Conn, error) {
		select {
		case dialed <- struct{}{}:
			return nextHub, nil
		default:
			return nil, errors.New("dialed once already")
		}
	})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	spec := api.LogPipe{ID: "p", Path: filepath.Join(t.TempDir(), "s.log")}
	if err := first.Send(api.TypeLogPipe, &spec, int(r.Fd())); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := w.WriteString("before\n"); err != nil {
		t.Fatal(err)
	}
	first.Close()

	next.SetDeadline(time.Now().Add(30 * time.Second))
	m, fds, err := next.Recv()
	api.CloseFds(fds)
	if err != nil || m.Type != api.TypeLogHub {
		t.Fatalf("want log_hub first, got %q (%v)", m.Type, err)
	}
	m, fds, err = next.Recv()
	if err != nil || m.Type != api.TypeLogPipe || len(fds) != 1 {
		t.Fatalf("want the pipe with its read end, got %q with %d fds (%v)", m.Type, len(fds), err)
	}
	var got api.LogPipe
	if err := api.Decode(m, &got); err != nil || got != spec {
		t.Fatalf("pipe %+v (%v), want %+v", got, err, spec)
	}
	// The handed-over fd is the same pipe: another reader of it.
	var st1, st2 unix.Stat_t
	unix.Fstat(fds[0], &st1)
	unix.Fstat(int(w.Fd()), &st2)
	api.CloseFds(fds)
	if st1.Ino != st2.Ino {
		t.Errorf("handed-over fd is inode %d, want the pipe's %d", st1.Ino, st2.Ino)
	}
	if m, _, err := next.Recv(); err != nil || m.Type != api.TypeLogPipesEnd {
		t.Fatalf("want log_pipes_end, got %q (%v)", m.Type, err)
	}
	w.WriteString("after\n")
	w.Close()
	if id := recvDone(t, next); id != "p" {
		t.Fatalf("done %q, want p", id)
	}
	if b, _ := os.ReadFile(spec.Path); string(b) != "before\nafter\n" {
		t.Errorf("log %q, want both lines", b)
	}
}

// TestHubReportsWhatItsLogCouldNotTake: a log file that refuses writes (a
// full disk: /dev/full) does not block the server, whose pipe is read on,
// and the pipe's end tells the daemon how much was lost and why.
func TestHubReportsWhatItsLogCouldNotTake(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full here to stand for a full disk: %v", err)
	}
	daemon, hubSide := connPair(t)
	h := NewHub()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- h.Run(ctx, hubSide, func(context.Context) (*api.Conn, error) {
			return nil, errors.New("no next daemon in this test")
		})
	}()
	t.Cleanup(func() {
		cancel()
		daemon.Close()
		<-ran
	})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.Send(api.TypeLogPipe, &api.LogPipe{ID: "full", Path: "/dev/full"}, int(r.Fd())); err != nil {
		t.Fatal(err)
	}
	r.Close()
	line := strings.Repeat("y", 99) + "\n"
	for range 10 {
		if _, err := w.WriteString(line); err != nil {
			t.Fatalf("the server's write blocked or failed: %v", err)
		}
	}
	w.Close()
	if d := recvDoneMsg(t, daemon); d.ID != "full" || d.Dropped != 1000 || !strings.Contains(d.LogError, "no space") {
		t.Errorf("log_done %+v, want pipe full with 1000 bytes dropped and the reason (no space left)", d)
	}
}
