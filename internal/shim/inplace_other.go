//go:build !linux

package shim

import (
	"errors"

	"github.com/seed-86a41135/supervisor/api"
)

// Exec in the shim's place is Linux-only (inplace_linux.go): here a shim
// never offers it, so no daemon orders it.

func inPlaceFd() int { return -1 }

func execServer(c *api.Client, ex *execOrder) (int, error) {
	c.Close()
	return fail(CodeSupervisorError, errors.New("the daemon ordered an exec in the shim's place, which is Linux-only"))
}
