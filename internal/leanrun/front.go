package leanrun

import (
	"errors"

	"github.com/seed-86a41135/supervisor/internal/lazycache"
)

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

// frontHandover is fastPath's word that the front is done and the run
// goes to `supervisor run` with h.
type frontHandover struct{ h lazycache.Handover }

func (*frontHandover) Error() string { return "the front hands the run over" }

// errFrontEnded: the host ended its input while the front served it.
var errFrontEnded = errors.New("the host ended its input")
