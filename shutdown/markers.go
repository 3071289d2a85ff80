package shutdown

import "github.com/seed-86a41135/supervisor/internal/proc"

// Marker variables (set by spawn; duplicated here so the cascade does not
// depend on the package that starts processes).
const (
	envSessionID = "SUPERVISOR_SESSION_ID"
	envProcID    = "SUPERVISOR_PROC_ID"
	// EnvInstance names the daemon instance that spawned a process, so the
	// session sweep of one instance never takes another's processes.
	EnvInstance = "SUPERVISOR_INSTANCE"
	// EnvKeep=1 in a descendant's environment spares it from the tree and
	// marker sweeps (Jenkins' BUILD_ID=dontKillMe); never when it holds a
	// host pipe, since the host would hang.
	EnvKeep = "SUPERVISOR_KEEP"
	// envLogWriter=1 marks a server's log writer: it exits at EOF once
	// the tree is gone, so no stop claims it (signalled, it would ignore
	// SIGTERM and only a SIGKILL would end it, losing the last lines).
	envLogWriter = "SUPERVISOR_LOG_WRITER"
)

// markerTarget finds the target an environment's markers point at: the
// target whose id its SUPERVISOR_PROC_ID names, else, when a whole session
// ends, the first target of the session its SUPERVISOR_SESSION_ID names
// (and of this daemon instance). byID indexes targets by id. The rules are
// the same on every OS.
func markerTarget(env []string, byID map[string]int, targets []Target, opt Options) (int, bool) {
	if v, _ := proc.EnvValue(env, envLogWriter); v == "1" {
		return 0, false
	}
	if id, ok := proc.EnvValue(env, envProcID); ok {
		if i, ok := byID[id]; ok {
			return i, true
		}
		if opt.SkipProc != nil && opt.SkipProc(id) {
			return 0, false
		}
	}
	if !opt.WholeSession {
		return 0, false
	}
	sess, ok := proc.EnvValue(env, envSessionID)
	if !ok || sess == "" {
		return 0, false
	}
	// Session ids are chosen by users and hosts; another daemon instance
	// may have the same one. Its processes carry its own instance marker.
	if inst, _ := proc.EnvValue(env, EnvInstance); opt.Instance != "" && inst != opt.Instance {
		return 0, false
	}
	for i, t := range targets {
		if t.Session == sess {
			return i, true
		}
	}
	return 0, false
}
