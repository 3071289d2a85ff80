package daemon

import (
	"context"
	"time"

	"github.com/seed-86a41135/supervisor/internal/settings"
)

// runRetention compacts the registry (design §7): once at start, then every
// retentionInterval, until ctx is done. Ended sessions and exited, failed or
// lost processes older than Settings.Retention are deleted, so the file
// stays bounded under churn (bbolt reuses the freed pages); stdio servers'
// logs go with their records. A failed
// compaction is logged and retried next time: it is no reason to stop
// supervising.
func (d *Daemon) runRetention(ctx context.Context) error {
	retentionOf := func() time.Duration { // as of now: a config reload may change it
		if r := d.settings().Retention; r > 0 {
			return r
		}
		return settings.Defaults().Retention
	}
	retention := retentionOf()
	log := d.log.Named("retention")
	tick := time.NewTicker(retentionInterval(retention))
	defer tick.Stop()
	for {
		if r := retentionOf(); r != retention {
			retention = r
			tick.Reset(retentionInterval(retention))
		}
		before := d.reg.Now().Add(-retention)
		sessions, procs, err := d.reg.Compact(before)
		switch {
		case err != nil:
			log.Error("compaction failed; retrying at the next interval", "err", err)
		case sessions+procs > 0:
			log.Info("compacted the registry", "sessions", sessions, "processes", procs,
				"ended_before", before.UTC().Format(time.RFC3339))
		}
		// A stdio server's log goes with its record: once the record is
		// compacted away and the log is as old, nobody can ask for it.
		if n, err := pruneRunLogs(d.cfg.Paths, before, func(id string) bool {
			_, err := d.reg.Process(id)
			return err == nil
		}); err != nil {
			log.Warn("cannot remove old server logs; retrying at the next interval", "err", err)
		} else if n > 0 {
			log.Info("removed old server logs", "files", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// retentionInterval is how often compaction runs: hourly, as nothing
// becomes due faster than that at the default retention, but a short
// retention (tests, or a user who wants little history) is honoured within
// half of itself; never more often than every 100 ms.
func retentionInterval(retention time.Duration) time.Duration {
	return max(100*time.Millisecond, min(time.Hour, retention/2))
}
