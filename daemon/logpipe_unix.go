//go:build unix

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/spawn"
)

// logWriterMarkers are the markers of the server a log writer serves.
type logWriterMarkers struct {
	session, procID, host string
}

// startLogWriter starts the log writer of path (see logpipe.go) and
// returns the write end of its pipe, for the server's output. tee, when
// not nil, is where the writer copies everything too; the caller keeps
// (and closes) its own tee, the writer gets a duplicate.
func (d *Daemon) startLogWriter(path string, tee *os.File, m logWriterMarkers) (*os.File, error) {
	if d.exe == "" {
		return nil, errors.New("this binary's path is unknown")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	out := null
	if tee != nil {
		// Start closes what it is given: the server may still need the
		// original should the writer fail to start.
		fd, err := unix.FcntlInt(tee.Fd(), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			null.Close()
			return nil, fmt.Errorf("duplicate the host's stderr: %w", err)
		}
		out = os.NewFile(uintptr(fd), "tee")
	}
	r, w, err := os.Pipe()
	if err != nil {
		null.Close()
		out.Close()
		return nil, fmt.Errorf("create the log pipe: %w", err)
	}
	// Its stderr is /dev/null: a writer that cannot write says nothing to
	// a host that never asked for its messages.
	started, err := spawn.Start(d.reaper, spawn.Request{
		Argv: d.logWriterArgv(path, tee != nil), LogWriter: true,
		// One P: a copy loop needs no parallelism, and every P past the
		// first costs the writer threads for the server's whole life
		// (thread ids count against pid_max with the servers').
		Env:       []string{"GOMAXPROCS=1"},
		Stdio:     [3]*os.File{r, out, null},
		SessionID: m.session, ProcID: m.procID, Instance: d.instance, Host: m.host,
	})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start the log writer: %w", err)
	}
	// Nothing waits for its status: the reaper's channel is buffered.
	d.log.Debug("log writer started", "id", m.procID, "pid", started.PID, "path", path)
	return w, nil
}
