//go:build unix

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/spawn"
)

// The daemon's glue to its log hubs (logpipe.go; the hubs and their pipes
// are internal/daemon/loghub's): what only the daemon can give them, its
// reaper and markers to start a hub by, its settings' log cap, and its
// socket, on which a hub of an earlier daemon re-joins.

// startLogWriter opens a log pipe for path, hands its read end to the
// hub, and returns its write end, for the server's output. tee, when not
// nil, is where the hub copies everything too; the caller keeps (and
// closes) its own tee, the hub gets a copy.
func (d *Daemon) startLogWriter(path string, tee *os.File, id string) (*os.File, error) {
	if d.hubs == nil {
		return nil, errors.New("this binary's path is unknown")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	maxBytes, keep := d.logCap()
	w, pipe, err := d.hubs.Open(api.LogPipe{Path: path, MaxBytes: maxBytes, Keep: keep}, tee)
	if err != nil {
		return nil, err
	}
	d.log.Debug("log pipe opened", "id", id, "pipe", pipe, "path", path)
	return w, nil
}

// startHub starts a hub process on sock, its end of the connection to the
// daemon (loghub.Spawn).
func (d *Daemon) startHub(sock *os.File) (int, proc.Token, error) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		sock.Close()
		return 0, proc.Token{}, err
	}
	null2, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		sock.Close()
		null.Close()
		return 0, proc.Token{}, err
	}
	// Its stdout and stderr are /dev/null: a hub that cannot write says
	// nothing to anyone who never asked for its messages.
	started, err := spawn.Start(d.reaper, spawn.Request{
		Argv: []string{d.exe, "_log-writer", "--socket", d.cfg.Paths.Socket}, LogWriter: true,
		// One P: copying needs no parallelism, and every P past the
		// first costs threads (thread ids count against pid_max).
		Env:    []string{"GOMAXPROCS=1"},
		Stdio:  [3]*os.File{sock, null, null2},
		ProcID: "log-hub", Instance: d.instance,
	})
	if err != nil {
		return 0, proc.Token{}, fmt.Errorf("start the log hub: %w", err)
	}
	d.log.Debug("log hub started", "pid", started.PID)
	return started.PID, started.Token, nil
}

// adoptLogHub serves a hub that re-joined from an earlier daemon on conn,
// until it is gone.
func (d *Daemon) adoptLogHub(conn *api.Conn, m api.Msg) {
	var intro api.LogHub
	if d.hubs == nil || api.Decode(m, &intro) != nil {
		return
	}
	// Its life is its pipes': never closed for idling, nor counted among
	// requests.
	conn.SetDeadline(time.Time{})
	d.becomeLifeline(conn)
	d.hubs.Adopt(conn)
}
