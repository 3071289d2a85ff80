package daemon

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
	"github.com/seed-86a41135/supervisor/spawn"
)

// sandboxRefusal says why run r's sandbox cannot be had, or "": a kernel
// that cannot enforce its policy, or a way of running it that does not
// confine yet (a broker's). A sandboxed server is refused rather than run
// with less than its policy (design §5, "Sandbox"). A shim that cannot
// confine itself is not offered the exec in place: the daemon forks the
// server confined instead.
func (d *Daemon) sandboxRefusal(r *directRun) string {
	if why := d.sandboxUnenforceable(*r.req.Sandbox); why != "" {
		return why
	}
	if (r.req.Share || r.req.Lazy || r.req.IdleMS > 0) && runtime.GOOS != "linux" {
		return "a shared, lazy or idle server is sandboxed on Linux only for now: its broker confines it with Landlock (run it unshared, or without --sandbox)"
	}
	// A network list's server is forked into its namespace by the daemon
	// (a broker's upstream by its broker, forked there): a shim's exec
	// could not enter it.
	hosts, _ := r.req.Sandbox.Hosts()
	if r.shim != nil && (!r.req.Confines || hosts != nil) {
		if r.req.InPlaceOnly {
			if hosts != nil {
				return inPlaceDeclined + "a server with a network list is started by the daemon, behind its egress proxy: handed to `supervisor run`"
			}
			return inPlaceDeclined + "this shim does not confine a server it execs (an older supervisor-run): handed to `supervisor run`"
		}
		r.dropShim()
	}
	return ""
}

// inPlaceDeclined starts a sandboxRefusal that only declines the exec in
// place: the run goes on through `supervisor run`.
const inPlaceDeclined = "not in place: "

// planSandbox makes the run's policy concrete for the command it runs as
// (launch, flattened): the rules its process confines itself to, tagged
// with the server's id (its denials in the kernel's audit name it), and
// the environment it may see. The home and the deny list are this user's:
// the daemon runs as the user its servers do.
func (d *Daemon) planSandbox(launch *launched, req api.RunRequest, id string) error {
	spec := *req.Sandbox
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	argv := append([]string(nil), launch.argv...)
	pathEnv, _ := proc.EnvValue(launch.env, "PATH")
	if path, err := spawn.Resolve(argv[0], pathEnv, string(req.Cwd)); err == nil {
		argv[0] = path
	}
	// What its host's config gave this server by name is its own; its
	// temporary files go where its own environment says, not the daemon's.
	rules, env, err := sandbox.Prepare(spec, sandbox.Context{Home: home, Cwd: string(req.Cwd), Argv: argv,
		StateDir: d.cfg.Paths.StateDir}, launch.env, req.Given)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	rules.Daemon, rules.Tag = d.cfg.Paths.Socket, id
	launch.note += " (" + rules.Summary(len(env), len(launch.env)) + ")"
	launch.env, launch.sandbox = env, &rules
	return nil
}

// sandboxUnenforceable says why spec cannot be had here, for a run or an
// ensure alike, or "": the kernel cannot enforce it, or this daemon could
// not tell a sandboxed server's requests from a host's. A sandboxed server
// that could ask the daemon to run or ensure a command would have it run
// unconfined: the daemon refuses every request from a sandboxed server's
// processes, which it finds by their cgroup (sandboxedPeer). Without
// cgroups it could not, and refuses the sandbox instead. On macOS the
// server's profile denies it the daemon's socket.
func (d *Daemon) sandboxUnenforceable(spec sandbox.Spec) string {
	if err := d.sandboxCaps.Enforceable(spec); err != nil {
		return err.Error()
	}
	if d.sandboxCaps.Mechanism == "landlock" && d.cgroups == nil {
		return "a sandbox needs cgroups here (the daemon has none: " + strings.Join(d.limits, "; ") + "): without them it could not refuse a sandboxed server's own requests to it"
	}
	return ""
}

// sandboxedPeer says why the peer pid may not use the daemon, or "": it
// is a process of a sandboxed server (in its cgroup, with no new
// privileges, which only a sandboxed process of ours has for sure). A peer
// whose process cannot be read any more is refused too: it could have
// handed its connection on and exited.
func (d *Daemon) sandboxedPeer(pid int) string {
	if d.cgroups == nil || pid <= 0 {
		return ""
	}
	nnp, err := proc.NoNewPrivs(pid)
	if err != nil {
		return fmt.Sprintf("the peer process %d cannot be read (%v)", pid, err)
	}
	if !nnp {
		return "" // every sandboxed process has no_new_privs, for good
	}
	cg, err := d.cgroups.Of(pid)
	if err != nil {
		return fmt.Sprintf("the cgroup of peer process %d cannot be read (%v)", pid, err)
	}
	if p, ok := d.sandboxedInCgroup(cg); ok {
		return fmt.Sprintf("process %d belongs to the sandboxed server %s (%s)", pid, p.Name, p.ID)
	}
	return ""
}
