//go:build !linux

package leanrun

import (
	"errors"
	"io"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/lazycache"
)

// Fronts are served by the lean entry on Linux alone, where it offers to
// exec in place (it hands every run over before asking elsewhere).

func serveFront(api.Msg) error { return errors.New("no lazy front here") }

func handOverFront(args, env []string, h lazycache.Handover, stderr io.Writer) int {
	return CodeSupervisorError
}

// TakeFrontState: only the lean entry on Linux leaves a front's state.
func TakeFrontState(fd int) (FrontState, error) {
	return FrontState{}, errors.New("--" + FrontFdFlag + " is set, and only the lean run entry on Linux sets it")
}
