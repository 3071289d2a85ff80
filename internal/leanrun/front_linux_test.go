package leanrun

import (
	"os"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/lazycache"
)

// What the front leaves reaches `supervisor run` through the memfd alone:
// the name leaves the environment, and an fd that is not the lean entry's
// memfd (a pipe a host leaked: reading it could block for ever) is
// refused.
func TestTakeFrontState(t *testing.T) {
	if _, env, ok, err := TakeFrontState([]string{"A=1"}); ok || err != nil || !slices.Equal(env, []string{"A=1"}) {
		t.Fatalf("no front: %v %v %v", env, ok, err)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, v := range []string{"x", "1", strconv.Itoa(int(r.Fd()))} {
		_, env, ok, err := TakeFrontState([]string{"A=1", EnvFrontFd + "=" + v, "B=2"})
		if !ok || err == nil || !slices.Equal(env, []string{"A=1", "B=2"}) {
			t.Errorf("%s=%s: %v %v %v, want it refused and taken out", EnvFrontFd, v, env, ok, err)
		}
	}

	// The real hand-over's memfd, as handOverFront writes it.
	h := lazycache.Handover{Replay: []byte("{\"a\":1}\n"), Rest: []byte("{\"b\":2}\n")}
	fd, err := writeFrontState(h)
	if err != nil {
		t.Fatal(err)
	}
	st, env, ok, err := TakeFrontState([]string{EnvFrontFd + "=" + strconv.Itoa(fd)})
	if !ok || err != nil || len(env) != 0 || string(st.Replay) != string(h.Replay) || string(st.Rest) != string(h.Rest) {
		t.Fatalf("memfd: %+v %v %v %v", st, env, ok, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("the memfd %d is still open after it was read (%v)", fd, err)
	}
}
