package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/registry"
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

// endHookSession ends the sessions labelled with the hook's session_id.
// Only malformed input is an error: no daemon, no such session or a slow
// daemon must not break the host, so those exit 0 silently. It never
// starts a daemon.
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
		for _, s := range list.Sessions {
			if s.Label == in.SessionID && s.State == registry.SessionActive {
				c.Call(api.TypeSessionEnd, &api.SessionEndRequest{ID: s.ID, GraceMS: api.Millis(grace)}, &api.Outcomes{})
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(hookBudget):
	}
	return nil
}
