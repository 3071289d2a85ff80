//go:build !linux

package leanrun

import (
	"errors"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Exec in the shim's place is Linux-only (inplace_linux.go): here a shim
// never offers it, so no daemon orders it.

// cloexecAbove2 sets close-on-exec on every fd above 2.
func cloexecAbove2() error {
	_, err := proc.MarkInheritedCloexec()
	return err
}

// InPlaceFd is -1: no offer.
func InPlaceFd() int { return -1 }

// Exec refuses: no daemon orders it here.
func Exec(c *api.Client, ex *ExecOrder) (int, error) {
	c.Close()
	return CodeSupervisorError, errors.New("the daemon ordered an exec in the shim's place, which is Linux-only")
}
