package shim

import (
	"fmt"
	"os"
	"os/signal"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/lazycache"
)

// frontOrder is startServer's word that the daemon answered a lazy run
// with the server's cache: the shim answers its host from it (lazycache.Front)
// before anything runs for it.
type frontOrder struct{ front *lazycache.Front }

func (*frontOrder) Error() string { return "the daemon left the client's handshake to its front" }

// serveFront answers the host from o's cache until it asks what only the
// server can answer, and puts what the front read into req for the run
// that follows (which offers no front again). code is the shim's exit
// status where the run ends here (the host ended its input: 0, as a
// server exits on EOF), -1 where it goes on.
//
// Signals keep their default meaning meanwhile: a host's SIGTERM ends
// this process as it would end a server started directly, and nothing
// else runs for it. caught says whether sigs caught catch before; they
// are caught again once the front is done.
func serveFront(o *frontOrder, req *api.RunRequest, sigs chan os.Signal, catch []os.Signal, caught bool) (int, error) {
	if caught {
		signal.Stop(sigs)
	}
	h, err := o.front.Serve(os.Stdin, os.Stdout)
	if caught {
		signal.Notify(sigs, catch...)
	}
	switch {
	case lazycache.IsFrontEOF(err):
		return 0, nil
	case err != nil:
		return fail(CodeSupervisorError, fmt.Errorf("lazy start from the cache: %w", err))
	}
	req.Front = false
	req.Replay, req.Rest = h.Replay, h.Rest
	return -1, nil
}
