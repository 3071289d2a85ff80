package loghub

import (
	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/api"
)

// Hubs: Windows has no log hub. Shared servers write their logs
// themselves (rotated by copy and truncate) and stdio servers' stderr is
// not captured.
type Hubs struct{}

// New returns nil: no hub can run here.
func New(hclog.Logger, int, Spawn) *Hubs { return nil }

func (h *Hubs) Closing() {}

func (h *Hubs) Close() {}

func (h *Hubs) Status() []api.LogHubStatus { return nil }
