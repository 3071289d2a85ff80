package leanrun

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/lazycache"
)

// What the front leaves reaches `supervisor run` through the memfd alone:
// the name leaves the environment, and an fd that is not the lean entry's
// memfd (a pipe a host leaked: reading it could block for ever) is
// What the front leaves reaches `supervisor run` through the memfd alone:
// an fd that is not the lean entry's memfd (a pipe a host leaked: reading
// it could block for ever) is refused.
func TestTakeFrontState(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, fd := range []int{1, int(r.Fd()), 999} {
		if _, err := TakeFrontState(fd); err == nil {
			t.Errorf("--%s=%d: taken, want it refused", FrontFdFlag, fd)
		}
	}

	// The real hand-over's memfd, as handOverFront writes it.
	h := lazycache.Handover{Replay: []byte("{\"a\":1}\n"), Rest: []byte("{\"b\":2}\n")}
	fd, err := writeFrontState(h)
	if err != nil {
		t.Fatal(err)
	}
	st, err := TakeFrontState(fd)
	if err != nil || string(st.Replay) != string(h.Replay) || string(st.Rest) != string(h.Rest) {
		t.Fatalf("memfd: %+v %v", st, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("the memfd %d is still open after it was read (%v)", fd, err)
	}
}
