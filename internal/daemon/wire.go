package daemon

import (
	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/registry"
)

// The daemon keeps registry records and answers with api types: these
// convert between the two, so that what is stored can change without the
// protocol and the `--json` output changing with it. wire_test.go checks
// that each conversion carries every field; a field meant to stay off the
// wire is excluded there, deliberately.
//
// Types whose fields are the same on both sides convert with a Go type
// conversion rather than field by field: the compiler then refuses a
// field added to one side and not the other, where a copy would drop it
// silently.
//
// Slices and pointers keep nil as nil: a null and an empty list are not
// the same bytes on the wire.

// wireProcess is rec as ps answers it.
func wireProcess(rec registry.Process) api.Process {
	return api.Process{
		ID:           rec.ID,
		Session:      rec.Session,
		Name:         rec.Name,
		Argv:         rec.Argv,
		Path:         rec.Path,
		Cwd:          rec.Cwd,
		PID:          rec.PID,
		PGID:         rec.PGID,
		Token:        rec.Token,
		ShimPID:      rec.ShimPID,
		ShimToken:    rec.ShimToken,
		InPlace:      rec.InPlace,
		State:        api.ProcState(rec.State),
		StartedAt:    rec.StartedAt,
		ExitedAt:     rec.ExitedAt,
		ExitCode:     rec.ExitCode,
		Signal:       rec.Signal,
		Error:        rec.Error,
		Port:         rec.Port,
		Shared:       rec.Shared,
		Health:       rec.Health,
		HealthCheck:  rec.HealthCheck,
		Restarts:     rec.Restarts,
		Cgroup:       rec.Cgroup,
		Stop:         wireStop(rec.Stop),
		GraceMS:      rec.GraceMS,
		Stdio:        convertAll(rec.Stdio, func(s registry.StdioInode) api.StdioInode { return api.StdioInode(s) }),
		Broker:       rec.Broker,
		BrokerKey:    rec.BrokerKey,
		ServerKey:    rec.ServerKey,
		Fingerprint:  rec.Fingerprint,
		Lazy:         rec.Lazy,
		IdleMS:       rec.IdleMS,
		Unsafe:       rec.Unsafe,
		Relayed:      rec.Relayed,
		Clients:      convertAll(rec.Clients, func(c registry.Client) api.BrokerClient { return api.BrokerClient(c) }),
		Usage:        wireUsage(rec.Usage),
		Limits:       wireLimits(rec.Limits),
		LimitCgroups: rec.LimitCgroups,
		LimitHit:     rec.LimitHit,
		Sandboxed:    rec.Sandboxed,
		Egress:       wireEgress(rec.Egress),
	}
}

// wireProcesses is recs as ps answers them.
func wireProcesses(recs []registry.Process) []api.Process {
	return convertAll(recs, wireProcess)
}

func wireStop(s *registry.StopRecord) *api.StopRecord {
	if s == nil {
		return nil
	}
	return &api.StopRecord{
		Result:   s.Result,
		Procs:    convertAll(s.Procs, func(p registry.StoppedProc) api.StoppedProc { return api.StoppedProc(p) }),
		Left:     s.Left,
		Spared:   s.Spared,
		Unproven: s.Unproven,
	}
}

// wireSession is s as sessions answers it.
func wireSession(s registry.Session) api.Session {
	return api.Session{
		ID:          s.ID,
		Label:       s.Label,
		HostPID:     s.HostPID,
		HostToken:   s.HostToken,
		HostCommand: s.HostCommand,
		State:       api.SessionState(s.State),
		StartedAt:   s.StartedAt,
		EndedAt:     s.EndedAt,
		EndReason:   s.EndReason,
	}
}

// wireEvents is evs as events answers them.
func wireEvents(evs []registry.Event) []api.Event {
	return convertAll(evs, func(e registry.Event) api.Event { return api.Event(e) })
}

// wireBreakers is bs as breakers and breaker_reset answer them.
func wireBreakers(bs []registry.BreakerState) []api.BreakerState {
	return convertAll(bs, func(b registry.BreakerState) api.BreakerState { return api.BreakerState(b) })
}

func wireUsage(u *registry.Usage) *api.Usage {
	if u == nil {
		return nil
	}
	w := api.Usage(*u)
	return &w
}

func wireLimits(l *registry.Limits) *api.Limits {
	if l == nil {
		return nil
	}
	w := api.Limits(*l)
	return &w
}

// storedLimits is a request's limits (run or ensure, after the config's
// are merged in) as a record keeps them.
func storedLimits(l *api.Limits) *registry.Limits {
	if l == nil {
		return nil
	}
	s := registry.Limits(*l)
	return &s
}

// convertAll maps each element of in through f; nil stays nil.
func convertAll[From, To any](in []From, f func(From) To) []To {
	if in == nil {
		return nil
	}
	out := make([]To, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

func wireEgress(e *registry.Egress) *api.Egress {
	if e == nil {
		return nil
	}
	return &api.Egress{Hosts: e.Hosts, Port: e.Port, Netns: e.Netns}
}
