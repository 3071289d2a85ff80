//go:build linux

package shutdown

import (
	"context"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

func TestMarkerCutoff(t *testing.T) {
	a := proc.Token{BootID: "b1", StartTicks: 500}
	b := proc.Token{BootID: "b1", StartTicks: 300}
	other := proc.Token{BootID: "b0", StartTicks: 100}
	for _, tc := range []struct {
		name    string
		targets []Target
		whole   bool
		want    proc.Token
	}{
		{"the oldest leader", []Target{{Token: a}, {Token: b}}, false, b},
		{"one target", []Target{{Token: a}}, false, a},
		{"a whole session: none", []Target{{Token: a}}, true, proc.Token{}},
		{"a leader of unknown start: none", []Target{{Token: a}, {}}, false, proc.Token{}},
		{"leaders of two boots: none", []Target{{Token: a}, {Token: other}}, false, proc.Token{}},
		{"a target whose id earlier runs carried: none", []Target{{Token: a}, {Token: b, RunsBefore: true}}, false, proc.Token{}},
		{"no targets: none", nil, false, proc.Token{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := markerCutoff(tc.targets, Options{WholeSession: tc.whole})
			if got != tc.want {
				t.Errorf("markerCutoff = %+v, want %+v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		tok, born proc.Token
		want      bool
	}{
		{proc.Token{BootID: "b1", StartTicks: 299}, b, true},
		{proc.Token{BootID: "b1", StartTicks: 300}, b, false}, // the same tick: maybe a child
		{proc.Token{BootID: "b1", StartTicks: 900}, b, false},
		{proc.Token{BootID: "b0", StartTicks: 1}, b, false},
		{proc.Token{BootID: "b1", StartTicks: 1}, proc.Token{}, false},
	} {
		if got := olderThan(tc.tok, tc.born); got != tc.want {
			t.Errorf("olderThan(%+v, %+v) = %v, want %v", tc.tok, tc.born, got, tc.want)
		}
	}
}

// TestMarkerScanSkipsOlderProcesses: a stop of one server reads the
// environment only of processes no older than its leader, so a process
// that started before it is never claimed by a marker (it cannot have
// inherited one; this one forged it). A whole session's stop still claims
// it by the session marker, which older servers of the session passed on.
func TestMarkerScanSkipsOlderProcesses(t *testing.T) {
	markers := []string{envProcID + "=p-cutoff", envSessionID + "=s-cutoff"}
	old := startHelper(t, "leaf", markers...)
	old.line(t)
	// Start ticks are 10 ms apart: wait until the leader's will differ.
	time.Sleep(50 * time.Millisecond)
	leader := startHelper(t, "leaf", markers...)
	leader.line(t)
	if old.tok.StartTicks >= leader.tok.StartTicks {
		t.Fatalf("the older helper started at tick %d, the leader at %d", old.tok.StartTicks, leader.tok.StartTicks)
	}
	c := &Cascade{}
	target := leader.target("p-cutoff")
	target.Session = "s-cutoff"
	stop(t, c, context.Background(), []Target{target}, Options{Grace: time.Second})
	assertGone(t, "leader", leader.pid, leader.tok)
	if err := proc.Verify(old.pid, old.tok); err != nil {
		t.Fatalf("the older process with a forged marker was stopped with the server: %v", err)
	}

	// Its whole session ending takes it, by the session marker.
	stop(t, c, context.Background(), []Target{target}, Options{Grace: time.Second, WholeSession: true})
	assertGone(t, "older process of the session", old.pid, old.tok)
}

// TestMarkerScanSkipsOtherServers: a live server the stop does not target
// (OtherServer) is never read for markers, so a whole session's stop
// leaves it alone even when it carries the session's marker; without
// OtherServer the same stop takes it.
func TestMarkerScanSkipsOtherServers(t *testing.T) {
	markers := []string{envProcID + "=p-other-srv", envSessionID + "=s-other"}
	other := startHelper(t, "leaf", markers...)
	other.line(t)
	leader := startHelper(t, "leaf", envProcID+"=p-target", envSessionID+"=s-other")
	leader.line(t)
	c := &Cascade{}
	target := leader.target("p-target")
	target.Session = "s-other"
	opt := Options{Grace: time.Second, WholeSession: true,
		OtherServer: func(pid int, tok proc.Token) bool { return pid == other.pid && tok.Matches(other.tok) }}
	stop(t, c, context.Background(), []Target{target}, opt)
	assertGone(t, "leader", leader.pid, leader.tok)
	if err := proc.Verify(other.pid, other.tok); err != nil {
		t.Fatalf("another live server was stopped by its markers: %v", err)
	}
	opt.OtherServer = nil
	stop(t, c, context.Background(), []Target{target}, opt)
	assertGone(t, "the marked process once not named another server", other.pid, other.tok)
}
