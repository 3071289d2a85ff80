package daemon

import (
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/spawn"
)

// Every server process (a direct server, a shared server's incarnation, a
// broker) starts through the same steps, in the order design §7's
// crash-safety argument needs:
//
//  1. a fresh cgroup of its own (this kernel kills a child cloned into a
//     cgroup that cgroup.kill was ever written to, so none is reused);
//  2. its limits, set before it exists: one whose limits cannot be set
//     does not start;
//  3. its intent record, committed naming that cgroup and those limits, so
//     a daemon that dies after the fork finds the process again by its
//     markers and its cgroup;
//  4. the fork, cloned into the cgroup, then the limits that can only be
//     written once it runs (cgroup v1's threads).
//
// prepareServer does 1 to 3 and forkServer 4 (an exec in a shim's place
// enters the cgroup instead). Each undoes, on its failure, everything
// before it: no caller has a rollback of its own to drift from the others.

// serverStart is a server being started: what prepareServer made for it.
type serverStart struct {
	session, id string
	cg          cgroup.Server
	limited     cgroup.Limited
}

// prepareServer makes the cgroup name in session's for process id, sets
// limits on it, and runs intent (the caller's commit of the intent record)
// with the cgroup's path and the limits' cgroup v1 directories; intent is
// nil where the record exists already (a shared server's next
// incarnation). A cgroup that cannot be made is logged, and the server
// runs without one unless it has limits; limits that cannot be set are a
// limits.refused event. On an error nothing is left behind.
func (d *Daemon) prepareServer(session, id, name string, limits *registry.Limits, intent func(cgroupPath string, v1 []string) error) (*serverStart, error) {
	s := &serverStart{session: session, id: id}
	var cgErr error
	if d.cgroups != nil {
		if s.cg, cgErr = d.cgroups.NewServer(session, name); cgErr != nil {
			d.log.Warn("no cgroup for this server; process group and markers only", "id", id, "err", cgErr)
		}
	}
	limited, err := d.setLimits(session, name, limits, s.cg, cgErr)
	if err != nil {
		d.undoStart(s)
		// Told of the record where one exists already, else of the session.
		process := ""
		if intent == nil {
			process = id
		}
		d.event("limits.refused", session, process, err.Error())
		return nil, err
	}
	s.limited = limited
	if intent != nil {
		if err := intent(s.cg.Path, limited.V1); err != nil {
			d.undoStart(s)
			return nil, err
		}
	}
	return s, nil
}

// forkServer starts r in s's cgroup, with s's limits. r's session, id and
// instance markers are s's; the caller sets the rest (its command, fds,
// the host marker). On an error nothing prepareServer made is left.
func (d *Daemon) forkServer(s *serverStart, r spawn.Request) (spawn.Started, error) {
	r.SessionID, r.ProcID, r.Instance = s.session, s.id, d.instance
	r.CgroupFD, r.ThreadCgroups, r.ThreadHome = s.cg.Fd, s.limited.V1, d.v1Home(s.limited.V1)
	started, err := spawn.Start(d.reaper, r)
	d.metrics.Spawn(err)
	s.closeFd()
	if err != nil {
		d.undoStart(s)
		return started, err
	}
	d.applyLimits(s.session, s.id, s.limited, s.cg)
	return started, nil
}

// undoStart removes what prepareServer made, for a server that will not
// run: its cgroup's fd and directory, and its cgroup v1 limit directories.
func (d *Daemon) undoStart(s *serverStart) {
	s.closeFd()
	if s.cg.Path != "" {
		d.removeCgroup(s.cg.Path)
	}
	cgroup.RemoveV1(s.limited.V1)
}

// closeFd closes the cgroup's directory fd once the clone (or the shim's
// move into it) has used it; a second call does nothing, so the fd number,
// which may be another file's by then, is never closed twice. (0 is
// spawn.Request's "no cgroup".)
func (s *serverStart) closeFd() {
	s.cg.CloseFd()
	s.cg.Fd = 0
}
