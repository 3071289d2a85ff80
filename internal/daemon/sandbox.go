package daemon

import (
	"fmt"
	"os"

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
	spec := *r.req.Sandbox
	if err := d.sandboxCaps.Enforceable(spec); err != nil {
		return err.Error()
	}
	if r.req.Share || r.req.Lazy || r.req.IdleMS > 0 {
		return "a sandboxed server runs unshared: its broker does not confine it yet (run it with --share=false, without --lazy and --idle, or without --sandbox)"
	}
	if r.shim != nil && !r.req.Confines {
		if r.req.InPlaceOnly {
			return "this shim does not confine a server it execs (an older supervisor-run): handed to `supervisor run`"
		}
		r.dropShim()
	}
	return ""
}

// planSandbox makes the run's policy concrete for the command it runs as
// (launch, flattened): the rules its process confines itself to, and the
// environment it may see. The home and the deny list are this user's:
// the daemon runs as the user its servers do.
func (d *Daemon) planSandbox(launch *launched, req api.RunRequest) error {
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
	launch.note += " (" + rules.Summary(len(env), len(launch.env)) + ")"
	launch.env, launch.sandbox = env, &rules
	return nil
}
