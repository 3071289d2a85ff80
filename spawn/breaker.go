package spawn

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/registry"
)

// BreakerConfig holds the circuit breaker's parameters (design §5).
type BreakerConfig struct {
	Threshold   int           // consecutive failures that open it; default 3
	Cooldown    time.Duration // first open period; default 60 s
	Ceiling     time.Duration // the cooldown doubles up to this; default 15 min
	StartPeriod time.Duration // an exit within it is a failed start; default 1 s
}

// WithDefaults fills zero fields.
func (c BreakerConfig) WithDefaults() BreakerConfig {
	if c.Threshold <= 0 {
		c.Threshold = 3
	}
	if c.Cooldown <= 0 {
		c.Cooldown = 60 * time.Second
	}
	if c.Ceiling <= 0 {
		c.Ceiling = 15 * time.Minute
	}
	if c.StartPeriod <= 0 {
		c.StartPeriod = time.Second
	}
	return c
}

// Breaker states.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half-open"
)

// Breaker is one server key's circuit breaker: its persisted state (a
// registry record, which the wire protocol carries too) and the rules
// that move it.
type Breaker struct {
	registry.BreakerState
}

// BreakerKey names a server by command, arguments and working directory.
func BreakerKey(argv []string, cwd string) string {
	h := sha256.Sum256([]byte(strings.Join(argv, "\x00") + "\x00\x00" + cwd))
	return hex.EncodeToString(h[:6])
}

// OpenError is the fast refusal of an open breaker.
type OpenError struct {
	B   Breaker
	Now time.Time // when the start was refused: the retry time is told from it
}

func (e *OpenError) Error() string {
	reset := fmt.Sprintf("`supervisor breaker reset %s` closes it now", e.B.resetTarget())
	if e.B.State == BreakerHalfOpen {
		return fmt.Sprintf("circuit half-open for %s: %d failures in a row, last: %s; one trial start is under way; %s",
			e.B.Name, e.B.Failures, e.B.LastReason, reset)
	}
	return fmt.Sprintf("circuit open for %s: %d failures in a row, last: %s; retry in %s (at %s), or %s",
		e.B.Name, e.B.Failures, e.B.LastReason, untilRetry(e.B.RetryAt.Sub(e.Now)), e.B.RetryAt.Local().Format(time.TimeOnly), reset)
}

// shellSafe says whether name can be pasted into a shell as it is: one or
// more of A-Z a-z 0-9 . _ @ + -.
func shellSafe(name string) bool {
	for _, c := range []byte(name) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '_' || c == '@' || c == '+' || c == '-':
		default:
			return false
		}
	}
	return name != ""
}

// resetTarget is what `breaker reset` is told to close b: its name, or
// its key when the name is empty or would need quoting.
func (b *Breaker) resetTarget() string {
	if shellSafe(b.Name) {
		return b.Name
	}
	return b.Key
}

// untilRetry says d coarsely, in its largest unit (25s, 4m, 2h); seconds
// are rounded up, so a retry still to come is never "in 0s".
func untilRetry(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int((d+time.Second-1)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	return fmt.Sprintf("%dh", int(d/time.Hour))
}

// Allow says whether a start may go ahead now. An open breaker whose
// cooldown is over lets exactly one trial through (half-open).
func (b *Breaker) Allow(now time.Time) error {
	switch b.State {
	case BreakerOpen:
		if now.Before(b.RetryAt) {
			return &OpenError{B: *b, Now: now}
		}
		b.State, b.Trial = BreakerHalfOpen, true
		return nil
	case BreakerHalfOpen:
		// A trial whose outcome never came back (its daemon crashed, say)
		// is given up after a further cooldown, so the breaker cannot stick.
		lease := b.RetryAt.Add(time.Duration(b.CooldownMS) * time.Millisecond)
		if b.Trial && now.Before(lease) {
			return &OpenError{B: *b, Now: now}
		}
		b.Trial = true
	}
	return nil
}

// Release gives a half-open trial back without an outcome (its start was
// aborted or it was stopped before it could prove anything).
func (b *Breaker) Release() { b.Trial = false }

// Success closes the breaker.
func (b *Breaker) Success() {
	b.State, b.Failures, b.LastReason, b.Trial = BreakerClosed, 0, "", false
	b.CooldownMS, b.OpenedAt, b.RetryAt = 0, time.Time{}, time.Time{}
}

// Failure counts a failed start and opens the breaker at the threshold (or
// re-opens it with a doubled cooldown after a failed trial).
func (b *Breaker) Failure(reason string, now time.Time, cfg BreakerConfig) {
	cfg = cfg.WithDefaults()
	b.Failures++
	b.LastReason = reason
	b.Trial = false
	switch {
	case b.State == BreakerHalfOpen:
		b.CooldownMS = min(2*b.CooldownMS, cfg.Ceiling.Milliseconds())
	case b.Failures >= cfg.Threshold:
		b.CooldownMS = cfg.Cooldown.Milliseconds()
	default:
		b.State = BreakerClosed
		return
	}
	b.State = BreakerOpen
	b.OpenedAt = now
	b.RetryAt = now.Add(time.Duration(b.CooldownMS) * time.Millisecond)
}

// Reset closes the breaker by hand.
func (b *Breaker) Reset() { b.Success() }
