package leanrun

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/lazycache"
)

// A lazy run's front (design §11) in the lean entry: the daemon answered
// the run with the server's cache, and this process answers its host from
// it until a request needs the server. Then `supervisor run` takes over,
// in this process's place as for any hand-over, and is told what the front
// read through an inherited memfd named by its --front-fd flag.

// serveFront answers the host from the cache in m (a front) until it asks
// what only the server can answer. Signals keep their default meaning:
// a host's SIGTERM ends this process, and nothing else runs for it.
func serveFront(m api.Msg) error {
	var f api.Front
	if err := api.Decode(m, &f); err != nil {
		return err
	}
	front, err := lazycache.NewFront(f.Cache)
	if err != nil {
		return fmt.Errorf("the daemon's answer to a lazy run: %w", err)
	}
	h, err := front.Serve(os.Stdin, os.Stdout)
	switch {
	case lazycache.IsFrontEOF(err):
		return errFrontEnded
	case err != nil:
		return fmt.Errorf("lazy start from the cache: %w", err)
	}
	return &frontHandover{h: h}
}

// handOverFront hands the run to `supervisor run` with what the front
// left, in a memfd it inherits.
func handOverFront(args, env []string, h lazycache.Handover, stderr io.Writer) int {
	fd, err := writeFrontState(h)
	if err != nil {
		// The host was answered from the cache: a run without what it
		// read would start the server without the host's handshake.
		fmt.Fprintf(stderr, "supervisor: hand the lazy run over after its answers from the cache: %v\n", err)
		return CodeSupervisorError
	}
	return handOver(append([]string{"--" + FrontFdFlag + "=" + strconv.Itoa(fd)}, args...), env, "a request the cache cannot answer", stderr)
}

// writeFrontState puts h in a memfd that an exec inherits.
func writeFrontState(h lazycache.Handover) (int, error) {
	fd, err := unix.MemfdCreate("supervisor-front", 0) // inherited: no CLOEXEC
	if err != nil {
		return -1, fmt.Errorf("memfd: %w", err)
	}
	raw, _ := json.Marshal(FrontState{Replay: h.Replay, Rest: h.Rest})
	for len(raw) > 0 {
		n, err := unix.Write(fd, raw)
		if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("write the memfd: %w", err)
		}
		raw = raw[n:]
	}
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("rewind the memfd: %w", err)
	}
	return fd, nil
}

// TakeFrontState reads what the lean entry's front left in fd (and
// closes it).
func TakeFrontState(fd int) (FrontState, error) {
	var st FrontState
	// Only the memfd the lean entry made: any other fd (a pipe a host
	// leaked, say) could block the read for ever.
	if target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || !strings.HasPrefix(target, "/memfd:supervisor-front") {
		return st, fmt.Errorf("--%s=%d is not the lean run entry's memfd", FrontFdFlag, fd)
	}
	f := os.NewFile(uintptr(fd), "supervisor-front")
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, api.MaxFrame))
	if err != nil {
		return st, fmt.Errorf("read --%s=%d: %w", FrontFdFlag, fd, err)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("--%s=%d holds no front state: %w", FrontFdFlag, fd, err)
	}
	return st, nil
}
