//go:build linux

package api

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func fakeEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestResolvePaths(t *testing.T) {
	cwd, _ := os.Getwd()
	t.Setenv("TMPDIR", "") // os.TempDir() is then /tmp
	long := "/" + strings.Repeat("d", 120)
	tests := []struct {
		name       string
		env        map[string]string
		wantState  string
		wantSocket string
		wantErr    string // substring; empty means success
	}{
		{
			name:       "state dir from env",
			env:        map[string]string{EnvStateDir: "/srv/sup", "HOME": "/home/u"},
			wantState:  "/srv/sup",
			wantSocket: "/srv/sup/supervisor.sock",
		},
		{
			name:       "default from HOME",
			env:        map[string]string{"HOME": "/home/u"},
			wantState:  "/home/u/.local/state/supervisor",
			wantSocket: "/home/u/.local/state/supervisor/supervisor.sock",
		},
		{
			name:       "state dir is cleaned",
			env:        map[string]string{EnvStateDir: "/srv//sup/x/../"},
			wantState:  "/srv/sup",
			wantSocket: "/srv/sup/supervisor.sock",
		},
		{
			name:       "explicit socket",
			env:        map[string]string{EnvStateDir: "/srv/sup", EnvSocket: "/run/s.sock"},
			wantState:  "/srv/sup",
			wantSocket: "/run/s.sock",
		},
		{
			name:       "over-long state dir falls back to tmp",
			env:        map[string]string{EnvStateDir: long},
			wantState:  long,
			wantSocket: FallbackSocket(long),
		},
		{
			name:       "relative socket is made absolute",
			env:        map[string]string{EnvStateDir: "/srv/sup", EnvSocket: "rel.sock"},
			wantState:  "/srv/sup",
			wantSocket: filepath.Join(cwd, "rel.sock"),
		},
		{
			name:       "socket of exactly 107 bytes",
			env:        map[string]string{EnvStateDir: "/s", EnvSocket: "/" + strings.Repeat("s", 106)},
			wantState:  "/s",
			wantSocket: "/" + strings.Repeat("s", 106),
		},
		{
			name:    "over-long explicit socket",
			env:     map[string]string{EnvStateDir: "/srv/sup", EnvSocket: "/" + strings.Repeat("s", 107)},
			wantErr: EnvSocket,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolvePaths(fakeEnv(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ResolvePaths: got (%+v, %v), want an error naming %s", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResolvePaths: got error %v, want nil", err)
			}
			if got.StateDir != tt.wantState {
				t.Errorf("StateDir: got %q, want %q", got.StateDir, tt.wantState)
			}
			if got.Socket != tt.wantSocket {
				t.Errorf("Socket: got %q, want %q", got.Socket, tt.wantSocket)
			}
			if want := filepath.Join(tt.wantState, "daemon.lock"); got.Lock() != want {
				t.Errorf("Lock: got %q, want %q", got.Lock(), want)
			}
			if want := filepath.Join(tt.wantState, "registry.db"); got.DB() != want {
				t.Errorf("DB: got %q, want %q", got.DB(), want)
			}
		})
	}
}

func TestResolvePathsHomeFromPasswd(t *testing.T) {
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		t.Skipf("no password entry for this uid: %v", err)
	}
	got, err := ResolvePaths(fakeEnv(nil))
	if err != nil {
		t.Fatalf("ResolvePaths without HOME: %v", err)
	}
	home, _ := filepath.Abs(u.HomeDir)
	if want := filepath.Join(home, ".local", "state", "supervisor"); got.StateDir != want {
		t.Errorf("StateDir: got %q, want %q", got.StateDir, want)
	}
}

func TestResolvePathsRelativeStateDir(t *testing.T) {
	got, err := ResolvePaths(fakeEnv(map[string]string{EnvStateDir: "rel/state"}))
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if want := filepath.Join(wd, "rel", "state"); got.StateDir != want {
		t.Errorf("StateDir: got %q, want %q (made absolute)", got.StateDir, want)
	}
}

func TestEnsurePrivateDir(t *testing.T) {
	base := t.TempDir()
	mode := func(t *testing.T, p string) os.FileMode {
		t.Helper()
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}

	t.Run("creates 0700", func(t *testing.T) {
		dir := filepath.Join(base, "new", "nested")
		if err := EnsurePrivateDir(dir); err != nil {
			t.Fatalf("EnsurePrivateDir: %v", err)
		}
		if got := mode(t, dir); got != 0o700 {
			t.Errorf("mode: got %o, want 700", got)
		}
	})
	t.Run("tightens 0755", func(t *testing.T) {
		dir := filepath.Join(base, "open")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o755)
		if err := EnsurePrivateDir(dir); err != nil {
			t.Fatalf("EnsurePrivateDir: %v", err)
		}
		if got := mode(t, dir); got != 0o700 {
			t.Errorf("mode: got %o, want 700", got)
		}
	})
	t.Run("keeps 0700", func(t *testing.T) {
		dir := filepath.Join(base, "private")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := EnsurePrivateDir(dir); err != nil {
			t.Fatalf("EnsurePrivateDir: %v", err)
		}
		if got := mode(t, dir); got != 0o700 {
			t.Errorf("mode: got %o, want 700", got)
		}
	})
	t.Run("refuses a symlink", func(t *testing.T) {
		target := filepath.Join(base, "target")
		if err := os.Mkdir(target, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(target, 0o755)
		link := filepath.Join(base, "link")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		if err := EnsurePrivateDir(link); !errors.Is(err, errUnsafeDir) {
			t.Errorf("EnsurePrivateDir(symlink): got %v, want %v", err, errUnsafeDir)
		}
		if got := mode(t, target); got != 0o755 {
			t.Errorf("symlink target mode: got %o, want 755 (untouched)", got)
		}
	})
	t.Run("refuses a file", func(t *testing.T) {
		f := filepath.Join(base, "file")
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := EnsurePrivateDir(f); err == nil {
			t.Errorf("EnsurePrivateDir(file): got nil, want an error")
		}
	})
	t.Run("refuses another owner", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("needs root to chown")
		}
		dir := filepath.Join(base, "theirs")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 12345, 12345); err != nil {
			t.Skipf("chown: %v", err)
		}
		if err := EnsurePrivateDir(dir); !errors.Is(err, errUnsafeDir) {
			t.Errorf("EnsurePrivateDir(other owner): got %v, want %v", err, errUnsafeDir)
		}
	})
}

// connPair returns two Conns over a unix socketpair.
func connPair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(fd int, name string) *Conn {
		f := os.NewFile(uintptr(fd), name)
		nc, err := net.FileConn(f)
		f.Close() // FileConn dups
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewConn(nc.(*net.UnixConn))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return wrap(fds[0], "a"), wrap(fds[1], "b")
}

// rawPair returns a Conn and the raw other end, for writing hand-made frames.
func rawPair(t *testing.T) (*Conn, *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "a")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConn(nc.(*net.UnixConn))
	if err != nil {
		t.Fatal(err)
	}
	raw := os.NewFile(uintptr(fds[1]), "raw")
	t.Cleanup(func() { c.Close(); raw.Close() })
	return c, raw
}

// recvAsync runs Recv in a goroutine with a deadline on the result.
func recvAsync(t *testing.T, c *Conn) (Msg, []int, error) {
	t.Helper()
	type res struct {
		m   Msg
		fds []int
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, fds, err := c.Recv()
		ch <- res{m, fds, err}
	}()
	select {
	case r := <-ch:
		return r.m, r.fds, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("Recv did not return within 10s")
		return Msg{}, nil, nil
	}
}

func TestSendRecvRoundTrip(t *testing.T) {
	a, b := connPair(t)
	want := StopRequest{Target: "srv", GraceMS: 1500}
	errc := make(chan error, 1)
	go func() { errc <- a.Send(TypeStop, &want) }()
	m, fds, err := recvAsync(t, b)
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Send: %v", err)
	}
	if len(fds) != 0 {
		t.Errorf("fds: got %v, want none", fds)
	}
	if m.Type != TypeStop {
		t.Errorf("Type: got %q, want %q", m.Type, TypeStop)
	}
	var got StopRequest
	if err := Decode(m, &got); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if got != want {
		t.Errorf("body: got %+v, want %+v", got, want)
	}

	// A message without a body, in the other direction.
	go func() { errc <- b.Send(TypeOK, nil) }()
	m, _, err = recvAsync(t, a)
	if err != nil || m.Type != TypeOK || len(m.Body) != 0 {
		t.Errorf("Recv of a bodiless ok: got (%+v, %v), want type ok with no body", m, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := Decode(m, &got); !errors.Is(err, ErrMalformed) {
		t.Errorf("Decode of no body: got %v, want %v", err, ErrMalformed)
	}
}

func TestSendRecvLargeFrame(t *testing.T) {
	a, b := connPair(t)
	// Larger than a socket buffer, so Send needs several writes.
	env := make([]string, 0, 2000)
	for i := range 2000 {
		env = append(env, fmt.Sprintf("VAR_%d=%s", i, strings.Repeat("v", 500)))
	}
	want := RunRequest{Argv: []string{"srv"}, Env: env}
	errc := make(chan error, 1)
	go func() { errc <- a.Send(TypeRun, &want) }()
	m, _, err := recvAsync(t, b)
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Send: %v", err)
	}
	var got RunRequest
	if err := Decode(m, &got); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(got.Env) != len(want.Env) || got.Env[1999] != want.Env[1999] {
		t.Errorf("Env: got %d entries, want %d intact", len(got.Env), len(want.Env))
	}
}

func TestSendRecvFds(t *testing.T) {
	a, b := connPair(t)
	var pipes [3][2]int
	var send []int
	for i := range pipes {
		if err := unix.Pipe2(pipes[i][:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(pipes[i][0])
		defer unix.Close(pipes[i][1])
		send = append(send, pipes[i][0])
	}
	errc := make(chan error, 1)
	go func() { errc <- a.Send(TypeRun, &RunRequest{Argv: []string{"x"}}, send...) }()
	m, fds, err := recvAsync(t, b)
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Send: %v", err)
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if m.Type != TypeRun {
		t.Errorf("Type: got %q, want %q", m.Type, TypeRun)
	}
	if len(fds) != 3 {
		t.Fatalf("fds: got %d, want 3", len(fds))
	}
	for i, fd := range fds {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			t.Fatalf("F_GETFD: %v", err)
		}
		if flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("received fd %d: FD_CLOEXEC clear, want set", fd)
		}
		// Each received fd is the same pipe as the one sent, in order.
		var got, want unix.Stat_t
		unix.Fstat(fd, &got)
		unix.Fstat(send[i], &want)
		if got.Ino != want.Ino {
			t.Errorf("fd %d: got inode %d, want %d", i, got.Ino, want.Ino)
		}
	}
	// The sender keeps its fds.
	for _, fd := range send {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			t.Errorf("sent fd %d after Send: %v, want still open", fd, err)
		}
	}
}

func frame(n uint32, payload []byte) []byte {
	b := make([]byte, 4, 4+len(payload))
	binary.BigEndian.PutUint32(b, n)
	return append(b, payload...)
}

// errAny in a want column accepts any non-nil error.
var errAny = errors.New("any error")

func TestRecvBadFrames(t *testing.T) {
	tests := []struct {
		name  string
		write []byte
		close bool // close the writer after writing
		want  error
	}{
		{"too large", frame(MaxFrame+1, nil), false, ErrFrameTooLarge},
		{"huge", frame(^uint32(0), nil), false, ErrFrameTooLarge},
		{"empty frame", frame(0, nil), false, ErrMalformed},
		{"garbage json", frame(9, []byte("not json!")), false, ErrMalformed},
		{"empty type", frame(11, []byte(`{"type":""}`)), false, ErrMalformed},
		{"no type", frame(2, []byte(`{}`)), false, ErrMalformed},
		{"eof mid-frame", frame(100, []byte(`{"type":`)), true, io.ErrUnexpectedEOF},
		{"eof before a frame", nil, true, io.EOF},
		{"eof mid-header", []byte{0, 0}, true, errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, raw := rawPair(t)
			if len(tt.write) > 0 {
				if _, err := raw.Write(tt.write); err != nil {
					t.Fatal(err)
				}
			}
			if tt.close {
				raw.Close()
			}
			m, fds, err := recvAsync(t, c)
			if ok := errors.Is(err, tt.want) || tt.want == errAny && err != nil; !ok {
				t.Errorf("Recv: got (%+v, %v), want %v", m, err, tt.want)
			}
			if fds != nil {
				t.Errorf("fds on error: got %v, want nil", fds)
			}
		})
	}
}

// TestRecvTooLargeReadsNoFurther: after refusing an oversized header, Recv
// has not consumed the bytes behind it.
func TestRecvTooLargeReadsNoFurther(t *testing.T) {
	c, raw := rawPair(t)
	next := frame(13, []byte(`{"type":"ok"}`))
	if _, err := raw.Write(append(frame(MaxFrame+1, nil), next...)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := recvAsync(t, c); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("Recv: got %v, want %v", err, ErrFrameTooLarge)
	}
	m, _, err := recvAsync(t, c)
	if err != nil || m.Type != TypeOK {
		t.Errorf("Recv after the refused header: got (%+v, %v), want the following ok frame", m, err)
	}
}

func TestRecvFdsClosedOnError(t *testing.T) {
	c, raw := rawPair(t)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	// Send a garbage frame with the pipe's read end attached, then close our
	// write end: if Recv closed the received copy, the pipe has no reader
	// left and a write fails with EPIPE.
	rc, err := raw.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	rc.Control(func(fd uintptr) {
		serr = unix.Sendmsg(int(fd), frame(3, []byte("bad")), unix.UnixRights(p[0]), nil, 0)
	})
	if serr != nil {
		t.Fatal(serr)
	}
	unix.Close(p[0])
	p[0] = p[1] // the deferred close now closes the write end
	if _, fds, err := recvAsync(t, c); !errors.Is(err, ErrMalformed) || fds != nil {
		t.Fatalf("Recv: got (%v, %v), want (nil, %v)", fds, err, ErrMalformed)
	}
	if _, err := unix.Write(p[1], []byte("x")); !errors.Is(err, unix.EPIPE) {
		t.Errorf("write to the pipe after Recv failed: got %v, want %v (received fd closed)", err, unix.EPIPE)
	}
}

func TestSendTooLarge(t *testing.T) {
	a, b := connPair(t)
	big := strings.Repeat("x", MaxFrame)
	if err := a.Send(TypeRun, &RunRequest{Argv: []string{big}}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("Send of %d bytes: got %v, want %v", len(big), err, ErrFrameTooLarge)
	}
	// Nothing was written: the connection still carries the next message.
	errc := make(chan error, 1)
	go func() { errc <- a.Send(TypeOK, nil) }()
	m, _, err := recvAsync(t, b)
	if err != nil || m.Type != TypeOK {
		t.Errorf("Recv after a refused Send: got (%+v, %v), want ok", m, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestPeerCred(t *testing.T) {
	a, _ := connPair(t)
	pid, uid, err := a.PeerCred()
	if err != nil {
		t.Fatalf("PeerCred: %v", err)
	}
	if pid != os.Getpid() {
		t.Errorf("pid: got %d, want %d", pid, os.Getpid())
	}
	if uid != os.Getuid() {
		t.Errorf("uid: got %d, want %d", uid, os.Getuid())
	}
}

func TestSendError(t *testing.T) {
	a, b := connPair(t)
	errc := make(chan error, 1)
	go func() { errc <- a.SendError(127, "no such command %q", "srv") }()
	m, _, err := recvAsync(t, b)
	if err != nil {
		t.Fatal(err)
	}
	<-errc
	var e Error
	if err := Decode(m, &e); err != nil {
		t.Fatal(err)
	}
	if m.Type != TypeError || e.Code != 127 || e.Message != `no such command "srv"` {
		t.Errorf("error message: got %s %+v, want error 127 naming srv", m.Type, e)
	}
}

func TestFallbackSocketIsPerStateDir(t *testing.T) {
	a, b := FallbackSocket("/x/"+strings.Repeat("a", 120)), FallbackSocket("/x/"+strings.Repeat("b", 120))
	if a == b {
		t.Fatalf("two state dirs share the fallback socket %s", a)
	}
	if want := fmt.Sprintf("/tmp/supervisor-%d/", os.Getuid()); !strings.HasPrefix(a, want) || len(a) > maxSunPath {
		t.Fatalf("fallback %q, want a short path under %s", a, want)
	}
}

func TestPsPagesStayUnderMaxFrame(t *testing.T) {
	for _, tt := range []struct {
		name  string
		n     int
		argv  int // bytes of argv per record
		pages int
	}{
		{"empty", 0, 0, 1},
		{"small table, one page", 100, 100, 1},
		{"large argv", 1000, 8 << 10, 0}, // several
	} {
		procs := make([]Process, tt.n)
		for i := range procs {
			procs[i] = Process{ID: fmt.Sprint(i), Argv: []string{strings.Repeat("x", tt.argv)}}
		}
		pages := PsPages(procs)
		total := 0
		for _, p := range pages {
			total += len(p)
			b, err := json.Marshal(Processes{Processes: p, More: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(b) >= MaxFrame {
				t.Errorf("%s: a page of %d bytes, limit %d", tt.name, len(b), MaxFrame)
			}
		}
		if total != tt.n {
			t.Errorf("%s: pages hold %d records, want %d", tt.name, total, tt.n)
		}
		if tt.pages > 0 && len(pages) != tt.pages {
			t.Errorf("%s: %d pages, want %d", tt.name, len(pages), tt.pages)
		}
		if tt.pages == 0 && len(pages) < 2 {
			t.Errorf("%s: %d page(s), want several", tt.name, len(pages))
		}
	}
}

// TestEncodeMsgMatchesMarshal: the hand-built frame is byte for byte what
// json.Marshal makes of a Msg.
func TestEncodeMsgMatchesMarshal(t *testing.T) {
	for _, tt := range []struct {
		typ  string
		body any
	}{
		{TypeStatus, nil},
		{TypePs, &PsRequest{All: true, Session: "a\"b<>&\u2028"}},
		{TypeProcesses, &Processes{Processes: []Process{{ID: "p-1", Argv: []string{"x", "<&>"}}}, More: true}},
		{"odd\"type", map[string]int{"a": 1}},
	} {
		got, err := encodeMsg(tt.typ, tt.body)
		if err != nil {
			t.Fatal(err)
		}
		m := Msg{Type: tt.typ}
		if tt.body != nil {
			b, _ := json.Marshal(tt.body)
			m.Body = b
		}
		want, _ := json.Marshal(m)
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", tt.typ, got, want)
		}
	}
}

// TestRecvTooManyFdsClosesThem: a frame with more fds than maxFds is
// refused, and every fd that came with it is closed, none kept.
func TestRecvTooManyFdsClosesThem(t *testing.T) {
	c, raw := rawPair(t)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	rights := make([]int, maxFds+2)
	for i := range rights {
		rights[i] = p[0]
	}
	rc, err := raw.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	rc.Control(func(fd uintptr) {
		serr = unix.Sendmsg(int(fd), frame(2, []byte("{}")), unix.UnixRights(rights...), nil, 0)
	})
	if serr != nil {
		t.Fatal(serr)
	}
	unix.Close(p[0])
	if _, fds, err := recvAsync(t, c); !errors.Is(err, ErrTooManyFds) || fds != nil {
		t.Fatalf("Recv: got (%v, %v), want (nil, %v)", fds, err, ErrTooManyFds)
	}
	// Every received copy of the read end is closed: the pipe has no
	// reader left.
	if _, err := unix.Write(p[1], []byte("x")); !errors.Is(err, unix.EPIPE) {
		t.Errorf("write to the pipe after Recv: got %v, want %v (all %d received fds closed)", err, unix.EPIPE, len(rights))
	}
}

// TestProcessesPage: the records of a processes frame are taken out as
// they are, with "more" read, and anything of another shape is left to the
// decoder.
func TestProcessesPage(t *testing.T) {
	for _, tc := range []struct {
		typ, body  string
		ok, more   bool
		wantRecord string
	}{
		{TypeProcesses, `{"processes":[{"id":"a"},{"id":"b"}],"more":true}`, true, true, `[{"id":"a"},{"id":"b"}]`},
		{TypeProcesses, `{"processes":[{"id":"a"}]}`, true, false, `[{"id":"a"}]`},
		{TypeProcesses, `{"processes":[]}`, true, false, `[]`},
		{TypeProcesses, `{"processes":null}`, false, false, ""},
		{TypeProcesses, `{"more":true,"processes":[]}`, false, false, ""},
		{TypeProcesses, `{"processes":`, false, false, ""},
		{TypeError, `{"processes":[]}`, false, false, ""},
		// Another member after the records: not the daemon's shape.
		{TypeProcesses, `{"processes":[1],"more":true,"next":[2]}`, false, false, ""},
		{TypeProcesses, `{"processes":[1],"processes":[2]}`, false, false, ""},
		{TypeProcesses, `{"processes":[{"id":"]}\"],"},{"id":"[{"}],"more":true}`, true, true, `[{"id":"]}\"],"},{"id":"[{"}]`},
	} {
		page, ok := processesPage(Msg{Type: tc.typ, Body: []byte(tc.body)})
		if ok != tc.ok || ok && (page.More != tc.more || string(page.Processes) != tc.wantRecord) {
			t.Errorf("%s %s: ok %v more %v records %s; want ok %v more %v records %s", tc.typ, tc.body, ok, page.More, page.Processes, tc.ok, tc.more, tc.wantRecord)
		}
		// Whatever the fast path takes, the decoder agrees with.
		var slow rawPage
		if ok && (json.Unmarshal([]byte(tc.body), &slow) != nil || string(slow.Processes) != string(page.Processes) || slow.More != page.More) {
			t.Errorf("%s: the decoder reads %+v, the fast path %+v", tc.body, slow, page)
		}
	}
}
