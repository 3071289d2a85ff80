//go:build unix

package leanrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/session"
)

// FullName is the full binary the lean entry hands runs to: it is
// installed beside it.
const FullName = "supervisor"

// dialWait bounds reaching the daemon (a hello takes milliseconds): past
// it, `supervisor run` decides, with its own two seconds for a daemon
// (shim.Options.LocalAfter) before it supervises the server itself. A
// daemon at its connection cap thus delays local mode by half a second,
// not by the lean entry's own two.
const dialWait = 500 * time.Millisecond

// Main is the lean entry: `supervisor-run [flags] -- CMD [ARG...]`, the
// arguments of `supervisor run`. It returns only with the run's status
// when the run ends here: the daemon refused it, the server's exec
// failed, or the hand-over's exec did (125).
func Main(args []string, env []string, stderr io.Writer) int {
	why, code, err := fastPath(args, env)
	var fh *frontHandover
	switch {
	case errors.As(err, &fh):
		return handOverFront(args, env, fh.h, stderr)
	case errors.Is(err, errFrontEnded):
		return 0 // the host ended its input: as a server exits on EOF
	}
	if err != nil {
		// The daemon refused the run, or the server's exec failed after
		// it was ordered (the daemon has its record): the run's end, as
		// on the full path.
		fmt.Fprintf(stderr, "supervisor: %v\n", err)
		return code
	}
	return handOver(args, env, why, stderr)
}

// handOver execs `supervisor run` with the same arguments, in this
// process's place: the host's child stays the same process.
func handOver(args, env []string, why string, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "supervisor: the lean run entry cannot find itself to find %s beside it: %v\n", FullName, err)
		return CodeSupervisorError
	}
	full := filepath.Join(filepath.Dir(exe), FullName)
	if v, _ := proc.EnvValue(env, envTrace); v != "" {
		fmt.Fprintf(stderr, "supervisor-run: handing over to %s run: %s\n", full, why)
	}
	err = syscall.Exec(full, append([]string{full, "run"}, args...), env)
	fmt.Fprintf(stderr, "supervisor: hand the run to %s: %v; it is installed beside supervisor-run: reinstall both\n", full, err)
	return CodeSupervisorError
}

// envTrace set to anything makes the lean entry say why it hands a run
// over (the tests use it).
const envTrace = "SUPERVISOR_RUN_TRACE"

// fastPath execs the server in this process's place where the daemon is
// up and orders it. Otherwise it returns why not, for the hand-over; an
// error ends the run with its status, as it would end `supervisor run`: a
// failed exec of the server, or the daemon's refusal of the run.
func fastPath(args, env []string) (why string, code int, err error) {
	spec, why := parseArgs(args)
	if why != "" {
		return why, 0, nil
	}
	spec.Env = env
	if v, _ := proc.EnvValue(env, api.EnvInPlace); v == "off" {
		return api.EnvInPlace + "=off", 0, nil
	}
	explicit := spec.Session
	if explicit == "" {
		explicit, _ = proc.EnvValue(env, session.EnvSession)
	}
	if explicit != "" && session.ValidateID(explicit) != nil {
		return "the session id is not valid", 0, nil
	}
	if _, err := api.LocalAfter(func(k string) string { v, _ := proc.EnvValue(env, k); return v }); err != nil {
		return "the environment: " + err.Error(), 0, nil // `supervisor run` says so
	}
	// Host fds leaked without close-on-exec must not reach the server (or
	// `supervisor run`, which marks them itself).
	if err := cloexecAbove2(); err != nil {
		return "inherited fds: " + err.Error(), 0, nil
	}
	selfFd := InPlaceFd()
	if selfFd < 0 {
		return "no offer to exec in place here (a terminal, a group leader, or a kernel without pidfd exit info)", 0, nil
	}
	defer api.CloseFds([]int{selfFd})
	req, err := NewRequest(spec)
	if err != nil {
		return "the request: " + err.Error(), 0, nil
	}
	req.InPlace, req.InPlaceOnly = true, true
	req.Confines = true // Exec confines to the order's sandbox
	if v, _ := proc.EnvValue(env, envLazyFront); v != "off" {
		req.Front = true // the config file may make a server lazy
	}
	paths, err := api.ResolvePaths(func(k string) string { v, _ := proc.EnvValue(env, k); return v })
	if err != nil {
		return "the daemon's paths: " + err.Error(), 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialWait)
	c, err := api.Dial(ctx, paths.Socket)
	cancel()
	if err != nil {
		return "the daemon: " + err.Error(), 0, nil
	}
	switch {
	case !c.Daemon.InPlaceOnly:
		why = "the daemon does not take in-place-only runs"
	case c.Daemon.Version != api.Version:
		why = fmt.Sprintf("the daemon is version %s, this entry %s", c.Daemon.Version, api.Version)
	case !c.SameNamespaces():
		why = "the daemon runs in other namespaces"
	}
	if why != "" {
		c.Close()
		return why, 0, nil
	}
	if err := c.Send(api.TypeRun, &req, 0, 1, 2, selfFd); err != nil {
		c.Close()
		return "send the run: " + err.Error(), 0, nil
	}
	// From here the daemon may have recorded the run (its intent, the
	// move into its cgroup): only an answer that says nothing was made
	// hands it over, as `supervisor run` would otherwise make a second.
	m, fds, err := c.Recv()
	if err != nil {
		c.Close()
		// The daemon died mid-start. Its keeper (or service manager)
		// starts the next at once, which finds the intent record and
		// stops whatever was started for it: as `supervisor run` says.
		return "", CodeSupervisorError, fmt.Errorf("the daemon went away while starting the server (%v); a new daemon stops whatever it had started: retry", err)
	}
	if m.Type == api.TypeFront {
		api.CloseFds(fds)
		c.Close()
		return "", CodeSupervisorError, serveFront(m)
	}
	if m.Type != api.TypeExec {
		api.CloseFds(fds)
		c.Close()
		var e api.Error
		derr := api.Decode(m, &e)
		switch {
		case m.Type == api.TypeNotInPlace && derr == nil:
			return "not_in_place: " + e.Message, 0, nil
		case m.Type == api.TypeError && derr == nil && e.Retry:
			// Before anything is made (the daemon stopping, at its server
			// limit): `supervisor run` retries.
			return "retry: " + e.Message, 0, nil
		case m.Type == api.TypeError && derr == nil:
			// A refusal that does not pass by itself (an open breaker, a
			// directory the daemon cannot use) is the run's end, as in
			// `supervisor run`: asking again would only ask twice.
			if e.Code == 0 {
				e.Code = CodeSupervisorError
			}
			return "", e.Code, errors.New(e.Message)
		}
		return "", CodeSupervisorError, fmt.Errorf("%w: the daemon answered an in-place-only run with %q", api.ErrMalformed, m.Type)
	}
	ex, err := DecodeExec(m, fds)
	if err != nil {
		// Ordered, but the order does not decode: this process is the
		// server in the daemon's record now, and `supervisor run` must
		// not start another on the same stdio. The daemon sees it end.
		c.Close()
		return "", CodeSupervisorError, err
	}
	code, err = Exec(c, ex)
	return "", code, err
}
