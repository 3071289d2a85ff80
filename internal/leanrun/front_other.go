//go:build !linux

package leanrun

import (
	"errors"
	"io"
	"strings"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/lazycache"
)

// Fronts are served by the lean entry on Linux alone, where it offers to
// exec in place (it hands every run over before asking elsewhere).

type frontHandover struct{ h lazycache.Handover }

func (*frontHandover) Error() string { return "the front hands the run over" }

var errFrontEnded = errors.New("the host ended its input")

func serveFront(api.Msg) error { return errors.New("no lazy front here") }

func handOverFront(args, env []string, h lazycache.Handover, stderr io.Writer) int {
	return CodeSupervisorError
}

// TakeFrontState: only the lean entry on Linux leaves a front's state.
func TakeFrontState(env []string) (st FrontState, rest []string, ok bool, err error) {
	for i, kv := range env {
		if strings.HasPrefix(kv, EnvFrontFd+"=") {
			rest = append(append([]string{}, env[:i]...), env[i+1:]...)
			return st, rest, true, errors.New(EnvFrontFd + " is set, and only the lean run entry on Linux sets it")
		}
	}
	return st, env, false, nil
}
