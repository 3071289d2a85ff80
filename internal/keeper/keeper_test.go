package keeper

import (
	"syscall"
	"testing"
	"time"
)

func TestPolicy(t *testing.T) {
	killed := Exit{Code: -1, Signal: syscall.SIGKILL, Ran: time.Minute}
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	type step struct {
		e       Exit
		at      time.Duration // since t0
		restart bool
		pause   time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
		later bool // its first step is not the keeper's first daemon
	}{
		{"a stop on purpose ends the keeping", []step{{Exit{Code: 0, Ran: time.Hour}, 0, false, 0}}, false},
		{"another daemon held the lock", []step{{Exit{Code: 0, Ran: 5 * time.Millisecond}, 0, false, 0}}, false},
		{"a refused start is not retried", []step{{Exit{Code: 1, Ran: 40 * time.Millisecond}, 0, false, 0}}, false},
		{"a later daemon's quick exit 1 is retried", []step{{Exit{Code: 1, Ran: 40 * time.Millisecond}, 0, true, 0}}, true},
		{"a failure after the start window is", []step{{Exit{Code: 1, Ran: time.Hour}, 0, true, 0}}, false},
		{"a Go panic (exit 2) at once is", []step{{Exit{Code: 2, Ran: time.Millisecond}, 0, true, 0}}, false},
		{"a SIGKILL at start is", []step{{Exit{Code: -1, Signal: syscall.SIGKILL, Ran: time.Millisecond}, 0, true, 0}}, false},
		{"three free restarts, then backing off", []step{
			{killed, 0, true, 0},
			{killed, time.Second, true, 0},
			{killed, 2 * time.Second, true, 0},
			{killed, 3 * time.Second, true, 250 * time.Millisecond},
			{killed, 4 * time.Second, true, 500 * time.Millisecond},
			{killed, 5 * time.Second, true, time.Second},
		}, false},
		{"the pause is capped, never infinite", []step{
			{killed, 0, true, 0}, {killed, 1, true, 0}, {killed, 2, true, 0},
			{killed, 3, true, 250 * time.Millisecond}, {killed, 4, true, 500 * time.Millisecond},
			{killed, 5, true, time.Second}, {killed, 6, true, 2 * time.Second}, {killed, 7, true, 4 * time.Second},
			{killed, 8, true, 8 * time.Second}, {killed, 9, true, 16 * time.Second}, {killed, 10, true, 30 * time.Second},
			{killed, 11, true, 30 * time.Second},
		}, false},
		{"restarts a window apart are free again", []step{
			{killed, 0, true, 0}, {killed, time.Minute, true, 0}, {killed, 2 * time.Minute, true, 0},
			{killed, 3 * time.Minute, true, 0}, {killed, 4 * time.Minute, true, 0},
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			for i, s := range tc.steps {
				restart, pause, why := p.Next(s.e, i == 0 && !tc.later, t0.Add(s.at))
				if restart != s.restart || pause != s.pause {
					t.Fatalf("step %d (%v): restart %v after %v (%s), want %v after %v", i, s.e, restart, pause, why, s.restart, s.pause)
				}
				if !restart && why == "" {
					t.Fatalf("step %d: no restart and no reason", i)
				}
			}
		})
	}
}
