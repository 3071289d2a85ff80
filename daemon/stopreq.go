package daemon

import (
	"context"

	"github.com/seed-86a41135/supervisor/shutdown"
)

// stopByRequest stops process id because a user asked (`supervisor stop`).
// Such a stop is final: a shared server is stopped for good (no restart,
// its port freed for the next ensure), whether it runs or waits out a
// restart backoff.
func (d *Daemon) stopByRequest(ctx context.Context, id string, opt shutdown.Options) []shutdown.Outcome {
	if s := d.sharedByID(id); s != nil {
		return []shutdown.Outcome{d.finishSharedWith(ctx, s, "stopped by request", opt, true)}
	}
	return d.stopIDs(ctx, []string{id}, opt)
}
