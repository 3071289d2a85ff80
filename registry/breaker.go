package registry

import "time"

// BreakerState is the persisted state of one server key's circuit breaker
// (package spawn's Breaker moves it; the store keeps it).
type BreakerState struct {
	Key        string    `json:"key"`
	Name       string    `json:"name"`
	Argv       []string  `json:"argv"`
	Cwd        string    `json:"cwd"`
	State      string    `json:"state"`
	Failures   int       `json:"failures"`
	LastReason string    `json:"last_reason,omitempty"`
	OpenedAt   time.Time `json:"opened_at,omitzero"`
	RetryAt    time.Time `json:"retry_at,omitzero"`
	CooldownMS int64     `json:"cooldown_ms,omitempty"`
	Trial      bool      `json:"trial,omitempty"` // a half-open trial is out
}
