//go:build !linux

package leanrun

import (
	"errors"

	"github.com/seed-86a41135/supervisor/api"
)

// Exec in the shim's place is Linux-only (inplace_linux.go): here a shim
// never offers it, so no daemon orders it.

// InPlaceFd is -1: no offer.
func InPlaceFd() int { return -1 }

// Exec refuses: no daemon orders it here.
func Exec(c *api.Client, ex *ExecOrder) (int, error) {
	c.Close()
	return CodeSupervisorError, errors.New("the daemon ordered an exec in the shim's place, which is Linux-only")
}
