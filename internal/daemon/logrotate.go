package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Copy-truncate rotation of shared servers' logs, for a server that writes
// its log file itself because no log writer could be started for it
// (logpipe.go; on Windows always).
//
// Such a server writes its stdout and stderr straight into its log file,
// opened O_APPEND: no reader is needed, so its output outlives any daemon
// (a pipe read by the daemon would kill it with SIGPIPE once the daemon is
// gone). The file cannot be renamed away from under the server, which
// keeps its fd, so the daemon rotates it by copy and truncate: checked
// every rotateEvery, a log over the maximum size is copied to NAME.log.1
// (older backups shift to .2, .3, ... up to the number kept) and truncated
// to 0; the server's O_APPEND writes go on at the new end. What is written
// between the copy's last read and the truncation is lost: a window of
// microseconds, once per rotation.

// rotateEvery is how often shared servers' logs are checked for size.
const rotateEvery = time.Second

// rotateMu makes rotations one at a time (the loop, and re-adoption).
var rotateMu sync.Mutex

// runLogRotation checks the logs of the shared servers in service every
// rotateEvery until ctx is done (it is an actor of the daemon's run group).
func (d *Daemon) runLogRotation(ctx context.Context) error {
	t := time.NewTicker(rotateEvery)
	defer t.Stop()
	failing := map[string]string{} // path → the error last logged for it
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, path := range d.sharedLogPaths() {
			err := d.rotateLog(path)
			switch {
			case err == nil:
				delete(failing, path)
			case failing[path] != err.Error():
				failing[path] = err.Error()
				d.log.Warn("cannot rotate a shared server's log", "path", path, "err", err)
			}
		}
	}
}

// sharedLogPaths lists the logs of the shared servers in service that
// write them themselves.
func (d *Daemon) sharedLogPaths() []string {
	var out []string
	for _, s := range d.shared.All() {
		if s.logPath != "" && s.directLog.Load() {
			out = append(out, s.logPath)
		}
	}
	return out
}

// rotateLog rotates path if it is over the configured size.
func (d *Daemon) rotateLog(path string) error {
	st := d.settings()
	rotated, err := rotateLog(path, int64(st.LogMaxMB)<<20, st.LogBackups)
	if rotated {
		d.log.Debug("rotated a shared server's log", "path", path)
	}
	return err
}

// backupPath is the name of path's i-th backup (1 the newest).
func backupPath(path string, i int) string { return fmt.Sprintf("%s.%d", path, i) }

// rotateLog copies path to its backups and truncates it when it is over
// maxBytes, keeping backups of them. A burst written within one check
// (more than 1/16 over maxBytes) is cut into backups of maxBytes from its
// end, so no backup grows much past the size and the newest output is kept;
// what does not fit in the backups is dropped, oldest first.
func rotateLog(path string, maxBytes int64, backups int) (bool, error) {
	if maxBytes <= 0 {
		return false, nil
	}
	rotateMu.Lock()
	defer rotateMu.Unlock()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() <= maxBytes {
		return false, err
	}
	if backups <= 0 {
		return true, f.Truncate(0)
	}
	// Copy first (in the kernel, to a staging file), truncate right after:
	// the window in which a write is lost is as short as it gets. The
	// copy is bounded so a writer faster than it cannot keep it going.
	stage := path + ".rotating"
	tmp, err := os.OpenFile(stage, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return false, err
	}
	defer os.Remove(stage) // once renamed, this removes nothing
	defer tmp.Close()
	if _, err := io.Copy(tmp, io.LimitReader(f, st.Size()+maxBytes)); err != nil {
		return false, fmt.Errorf("copy %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		return false, fmt.Errorf("truncate %s: %w", path, err)
	}
	n, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return true, err
	}

	// The pieces, newest first: the whole copy, or maxBytes cuts from its
	// end when it is a burst.
	type piece struct{ off, len int64 }
	var pieces []piece
	if n <= maxBytes+maxBytes/16 {
		pieces = []piece{{0, n}}
	} else {
		for end := n; end > 0 && len(pieces) < backups; end -= maxBytes {
			start := max(end-maxBytes, 0)
			pieces = append(pieces, piece{start, end - start})
		}
	}
	// Make room: backup i becomes i+len(pieces), or goes when past the
	// number kept.
	for i := backups; i >= 1; i-- {
		from := backupPath(path, i)
		if to := i + len(pieces); to > backups {
			err = os.Remove(from)
		} else {
			err = os.Rename(from, backupPath(path, to))
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return true, err
		}
	}
	if len(pieces) == 1 {
		return true, os.Rename(stage, backupPath(path, 1))
	}
	for i, p := range pieces {
		if err := writePiece(backupPath(path, i+1), io.NewSectionReader(tmp, p.off, p.len)); err != nil {
			return true, err
		}
	}
	return true, nil
}

func writePiece(path string, r io.Reader) error {
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, r)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}
