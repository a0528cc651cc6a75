package prove

import (
	"context"

	"github.com/carapace-dev/carapace/core/api"
)

// Box runs the box side's container as a session's (core/agent's Runner).
type Box interface{}

// proveBox runs the box side; it returns the engine's name.
func (p *Prover) proveBox(ctx context.Context, r *run) string {
	r.check(api.ProveCheck{Name: "box: runs the probe", Side: api.ProveSideBox, Detail: "this core cannot prove the box yet", Control: "none"})
	return ""
}
