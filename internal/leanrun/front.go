package leanrun

// FrontFdFlag is the flag of `supervisor run` that names the fd from
// which it reads what the lean entry's front left (FrontState).
const FrontFdFlag = "front-fd"

// envLazyFront is settings.EnvLazyFront (off: no front).
const envLazyFront = "SUPERVISOR_LAZY_FRONT"

// FrontState is what a front left, as `supervisor run` reads it.
type FrontState struct {
	Replay []byte `json:"replay,omitempty"`
	Rest   []byte `json:"rest,omitempty"`
}
