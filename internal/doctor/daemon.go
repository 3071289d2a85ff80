package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/spawn"
)

// daemonState is what the instance's daemon said, if one answered.
type daemonState struct {
	// running: something serves the socket, even if it could not be
	// asked anything. Stale-file checks and fixes stay away then.
	running bool
	pid     int
	// known holds the process ids the daemon has records of; nil when it
	// could not be asked (then no marker can be judged).
	known        map[string]bool
	openBreakers []api.BreakerState
	findings     []Finding
}

// probeDaemon dials the instance's daemon without starting one and asks it
// for its version, its records and its breakers.
func (d *Doctor) probeDaemon(ctx context.Context) daemonState {
	dctx, cancel := context.WithTimeout(ctx, d.dialTimeout())
	defer cancel()
	c, err := api.Dial(dctx, d.Paths.Socket)
	if errors.Is(err, api.ErrNotRunning) {
		return daemonState{}
	}
	if err != nil {
		st := daemonState{running: true}
		// The daemon checks the protocol first and answers a mismatch with
		// an error that names its version: an upgrade left it behind.
		var apiErr *api.Error
		if errors.As(err, &apiErr) {
			st.findings = append(st.findings, Finding{
				Kind: KindDaemonOlder, Path: d.Paths.Socket,
				Evidence: fmt.Sprintf("the daemon on %s refused this binary (version %s, protocol %d): %s; checks that need the daemon were skipped",
					d.Paths.Socket, d.version(), api.Protocol, apiErr.Message),
				// This binary cannot talk to it, so `daemon restart` cannot
				// stop it either: only a binary of its own protocol can.
				Fix: "stop it with a supervisor binary of its version (`supervisor daemon stop --keep-processes`), then `supervisor daemon` starts this one, which re-adopts the servers",
			})
		} else {
			st.findings = append(st.findings, unreachable(d.Paths.Socket, err))
		}
		return st
	}
	defer c.Close()
	st := daemonState{running: true, pid: c.Daemon.PID}
	// Only an older daemon is worth a restart: a newer one would be
	// downgraded by this binary's `daemon restart`.
	if api.NewerVersion(d.version(), c.Daemon.Version) {
		st.findings = append(st.findings, Finding{
			Kind: KindDaemonOlder, PID: c.Daemon.PID, Path: d.Paths.Socket,
			Evidence: fmt.Sprintf("the daemon (pid %d) runs version %s; this binary is version %s (an upgrade in place leaves the old code running)",
				c.Daemon.PID, c.Daemon.Version, d.version()),
			Fix: "`supervisor daemon restart`: this binary's daemon takes over and re-adopts every server",
		})
	}
	// A daemon that accepted the hello but hangs must not hang the audit.
	c.SetDeadline(time.Now().Add(d.dialTimeout()))
	var ps api.Processes
	if ps.Processes, err = c.Processes(api.PsRequest{All: true}); err != nil {
		st.findings = append(st.findings, unreachable(d.Paths.Socket, fmt.Errorf("ps --all: %w", err)))
		return st
	}
	st.known = make(map[string]bool, len(ps.Processes))
	for _, p := range ps.Processes {
		st.known[p.ID] = true
	}
	c.SetDeadline(time.Now().Add(d.dialTimeout()))
	var bl api.BreakerList
	if err := c.Call(api.TypeBreakers, nil, &bl); err != nil {
		st.findings = append(st.findings, unreachable(d.Paths.Socket, fmt.Errorf("breaker list: %w", err)))
		return st
	}
	for _, b := range bl.Breakers {
		if b.State == spawn.BreakerOpen {
			st.openBreakers = append(st.openBreakers, b)
		}
	}
	return st
}

func unreachable(socket string, err error) Finding {
	return Finding{
		Kind: KindDaemonUnreachable, Path: socket,
		Evidence: fmt.Sprintf("a daemon serves %s but did not answer: %v; checks that need the daemon were skipped", socket, err),
		Fix:      "see supervisor.log in the state directory; `supervisor daemon restart` replaces it",
	}
}
