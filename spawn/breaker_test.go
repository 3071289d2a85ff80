package spawn

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The breaker is pure arithmetic over time: these tests run on every OS.

var t0 = time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)

func TestBreakerConfigDefaults(t *testing.T) {
	got := BreakerConfig{}.WithDefaults()
	want := BreakerConfig{Threshold: 3, Cooldown: time.Minute, Ceiling: 15 * time.Minute, StartPeriod: time.Second}
	if got != want {
		t.Errorf("WithDefaults(): got %+v, want %+v", got, want)
	}
	set := BreakerConfig{Threshold: 5, Cooldown: time.Second, Ceiling: time.Hour, StartPeriod: 2 * time.Second}
	if got := set.WithDefaults(); got != set {
		t.Errorf("WithDefaults() of a full config: got %+v, want it unchanged", got)
	}
}

func TestBreakerOpensAtThreshold(t *testing.T) {
	cfg := BreakerConfig{Threshold: 3, Cooldown: 10 * time.Second, Ceiling: time.Minute}
	var b Breaker
	for i := 1; i <= 2; i++ {
		b.Failure("exit 1", t0, cfg)
		if b.State != BreakerClosed || b.Failures != i {
			t.Fatalf("after %d failures: got state %q failures %d, want closed and %d", i, b.State, b.Failures, i)
		}
		if err := b.Allow(t0); err != nil {
			t.Fatalf("Allow after %d failures: %v", i, err)
		}
	}
	b.Failure("exit 1", t0, cfg)
	if b.State != BreakerOpen || !b.RetryAt.Equal(t0.Add(10*time.Second)) || !b.OpenedAt.Equal(t0) {
		t.Fatalf("after 3 failures: got %+v, want open until t0+10s", b)
	}
	err := b.Allow(t0.Add(9 * time.Second))
	var oe *OpenError
	if !errors.As(err, &oe) {
		t.Fatalf("Allow within the cooldown: got %v, want *OpenError", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "3 failures") || !strings.Contains(msg, "exit 1") {
		t.Errorf("OpenError: got %q, want the count and the last failure", msg)
	}
}

func TestBreakerHalfOpenTrial(t *testing.T) {
	cfg := BreakerConfig{Threshold: 1, Cooldown: 10 * time.Second, Ceiling: 25 * time.Second}
	var b Breaker
	b.Failure("crash", t0, cfg)
	now := t0.Add(10 * time.Second)
	if err := b.Allow(now); err != nil || b.State != BreakerHalfOpen || !b.Trial {
		t.Fatalf("Allow at the end of the cooldown: got %v with %+v, want one half-open trial", err, b)
	}
	if err := b.Allow(now); err == nil {
		t.Fatalf("second Allow during the trial: got nil, want *OpenError")
	}
	// The trial fails: the cooldown doubles, then stops at the ceiling.
	for i, want := range []time.Duration{20 * time.Second, 25 * time.Second, 25 * time.Second} {
		b.Failure("crash again", now, cfg)
		if b.State != BreakerOpen || time.Duration(b.CooldownMS)*time.Millisecond != want {
			t.Fatalf("failed trial %d: got %+v, want open for %v", i+1, b, want)
		}
		now = b.RetryAt
		if err := b.Allow(now); err != nil {
			t.Fatalf("Allow after cooldown %d: %v", i+1, err)
		}
	}
	b.Success()
	if b.State != BreakerClosed || b.Failures != 0 || b.CooldownMS != 0 || !b.RetryAt.IsZero() || b.Trial {
		t.Errorf("after Success: got %+v, want a closed, clean breaker", b)
	}
}

func TestBreakerAbandonedTrialExpires(t *testing.T) {
	cfg := BreakerConfig{Threshold: 1, Cooldown: 10 * time.Second}
	var b Breaker
	b.Failure("crash", t0, cfg)
	if err := b.Allow(b.RetryAt); err != nil {
		t.Fatal(err)
	}
	// The trial's outcome never comes back (its daemon crashed): after a
	// further cooldown another trial is let through.
	if err := b.Allow(b.RetryAt.Add(9 * time.Second)); err == nil {
		t.Errorf("Allow before the lease ends: got nil, want *OpenError")
	}
	if err := b.Allow(b.RetryAt.Add(10 * time.Second)); err != nil {
		t.Errorf("Allow once the lease ended: got %v, want nil", err)
	}
	b.Release()
	if b.Trial {
		t.Errorf("after Release: trial still out")
	}
	if err := b.Allow(b.RetryAt); err != nil {
		t.Errorf("Allow after Release: got %v, want nil", err)
	}
}

func TestBreakerKey(t *testing.T) {
	a := BreakerKey([]string{"node", "srv.js"}, "/w")
	tests := []struct {
		argv []string
		cwd  string
		same bool
	}{
		{[]string{"node", "srv.js"}, "/w", true},
		{[]string{"node", "srv.js"}, "/x", false},
		{[]string{"node srv.js"}, "/w", false},
		{[]string{"node", "srv.js", ""}, "/w", false},
	}
	for _, tt := range tests {
		if got := BreakerKey(tt.argv, tt.cwd) == a; got != tt.same {
			t.Errorf("BreakerKey(%q, %q) == BreakerKey(node srv.js, /w): got %v, want %v", tt.argv, tt.cwd, got, tt.same)
		}
	}
}
