//go:build !linux

package daemon

import (
	"errors"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/spawn"
)

// Exec in the shim's place is Linux-only (inplace_linux.go): elsewhere the
// daemon spawns every server, and shims never offer it.

func inPlaceUnsupported() string { return "it needs Linux pidfds" }

func shimHandle(fd int, req api.RunRequest) (*proc.Handle, proc.Token, error) {
	return nil, proc.Token{}, errors.New("exec in the shim's place is Linux-only")
}

func (d *Daemon) execInPlace(conn *api.Conn, r inPlaceRun) *live { return nil }

func (d *Daemon) execLine(conn *api.Conn, l *live, log hclog.Logger) {}

// watchExit watches pid (verified against tok), a process that is not our
// child: it is gone when its handle says so, and its status is known only
// if it is still a zombie its new parent has not reaped.
func (d *Daemon) watchExit(pid int, tok proc.Token) (<-chan spawn.Status, error) {
	ch := make(chan spawn.Status, 1)
	if _, err := d.watcher.Watch(pid, tok, func() {
		st := spawn.Status{PID: pid, Unknown: true}
		if ws, ok := proc.ZombieStatus(pid, tok); ok {
			st = spawn.Status{PID: pid, Code: ws.ExitStatus(), Signal: ws.Signal()}
			if !ws.Signaled() {
				st.Signal = 0
			}
		}
		ch <- st
	}); err != nil {
		return nil, err
	}
	return ch, nil
}
