package leanrun

// EnvFrontFd names the fd from which `supervisor run` reads what the lean
// entry's front left (FrontState), and is taken out of the environment
// before anything else sees it.
const EnvFrontFd = "SUPERVISOR_FRONT_FD"

// envLazyFront is settings.EnvLazyFront (off: no front).
const envLazyFront = "SUPERVISOR_LAZY_FRONT"

// FrontState is what a front left, as `supervisor run` reads it.
type FrontState struct {
	Replay []byte `json:"replay,omitempty"`
	Rest   []byte `json:"rest,omitempty"`
}
