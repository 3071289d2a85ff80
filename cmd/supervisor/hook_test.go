package main

import (
	"slices"
	"testing"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

func TestHookSessions(t *testing.T) {
	t.Parallel()
	tok := proc.Token{BootID: "b", StartTicks: 7}
	sess := func(id, label string, pid int, tk proc.Token, st api.SessionState) api.SessionInfo {
		return api.SessionInfo{Session: api.Session{ID: id, Label: label, HostPID: pid, HostToken: tk, State: st}}
	}
	all := []api.SessionInfo{
		sess("claude", "abc", 10, tok, api.SessionActive),
		sess("gemini", "", 20, tok, api.SessionActive),
		sess("gemini-old", "", 20, tok, api.SessionEnded),
		sess("recycled", "", 20, proc.Token{BootID: "b", StartTicks: 99}, api.SessionActive),
		sess("other", "", 30, tok, api.SessionActive),
	}
	host := func(pid int) func() (int, proc.Token, bool) {
		return func() (int, proc.Token, bool) { return pid, tok, pid != 0 }
	}
	for _, tc := range []struct {
		name, label string
		host        int
		want        []string
	}{
		{"the label wins", "abc", 20, []string{"claude"}},
		{"no label: the host's active unlabelled session", "zzz", 20, []string{"gemini"}},
		{"a labelled session is never matched by its host", "zzz", 10, nil},
		{"no host found", "zzz", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hookSessions(all, tc.label, host(tc.host)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
