package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/session"
)

// hookBudget bounds `session end --hook`: Claude Code gives SessionEnd hooks
// 1.5 s by default. The daemon finishes a cascade it has begun even when
// we stop waiting for its answer.
const (
	hookBudget      = 1200 * time.Millisecond
	hookDialTimeout = 300 * time.Millisecond
)

// hookInput is the part of a SessionEnd hook's stdin we use (Claude Code
// and Gemini CLI both send session_id).
type hookInput struct {
	SessionID string `json:"session_id"`
}

// endHookSession ends the sessions labelled with the hook's session_id
// (Claude Code passes its id to its servers too). A host that tells its
// session id to hooks only (Gemini CLI, Qwen Code) labels no session: the
// hook then ends the active sessions of the host it runs under, found the
// way a shim finds its host (the first ancestor that is not a shell or
// launcher), matched by pid and start time. Only malformed input is an
// error: no daemon, no such session or a slow daemon must not break the
// host, so those exit 0 silently. It never starts a daemon.
func endHookSession(stdin io.Reader, grace time.Duration) error {
	data, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
	if err != nil {
		return fmt.Errorf("session end --hook: read stdin: %w", err)
	}
	var in hookInput
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("session end --hook: stdin is not the hook's JSON: %w", err)
	}
	if in.SessionID == "" {
		return errors.New("session end --hook: the hook's JSON on stdin has no session_id")
	}
	p, err := paths()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), hookDialTimeout)
	defer cancel()
	c, err := api.Dial(ctx, p.Socket)
	if err != nil {
		return nil
	}
	defer c.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var list api.SessionList
		if c.Call(api.TypeSessions, &api.SessionsRequest{}, &list) != nil {
			return
		}
		for _, id := range hookSessions(list.Sessions, in.SessionID, hookHost) {
			// Silent, as the doc says: one session that cannot be ended
			// (ended meanwhile) must not keep the others.
			_ = c.Call(api.TypeSessionEnd, &api.SessionEndRequest{ID: id, GraceMS: api.Millis(grace)}, &api.Outcomes{})
		}
	}()
	select {
	case <-done:
	case <-time.After(hookBudget):
	}
	return nil
}

// hookSessions picks the active sessions a hook ends: those labelled with
// its session id, else those of its host (host() finds it; it is asked
// only when no label matched).
func hookSessions(sessions []api.SessionInfo, label string, host func() (int, proc.Token, bool)) []string {
	var out []string
	for _, s := range sessions {
		if s.Label == label && s.State == api.SessionActive {
			out = append(out, s.ID)
		}
	}
	if len(out) > 0 {
		return out
	}
	pid, tok, ok := host()
	if !ok {
		return nil
	}
	for _, s := range sessions {
		if s.State == api.SessionActive && s.Label == "" && s.HostPID == pid && s.HostToken.Matches(tok) {
			out = append(out, s.ID)
		}
	}
	return out
}

// hookHost is the host this hook runs under.
func hookHost() (int, proc.Token, bool) {
	id, err := session.Identify(os.Getppid(), "", nil)
	if err != nil {
		return 0, proc.Token{}, false
	}
	return id.HostPID, id.HostToken, true
}
