package agent

import (
	"maps"
	"slices"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/runtime"
)

// rememberEngine keeps what the Check of the engine named name said, for
// Status. The caller holds r.ctrs.mu.
func (r *Runner) rememberEngine(name string, info runtime.Info) {
	if r.ctrs.infos == nil {
		r.ctrs.infos = map[string]runtime.Info{}
	}
	r.ctrs.infos[name] = info
}

// engineStatus lists the engines that were checked and found ready, by
// name: which version, and which binary the core runs (on a Mac, the
// Apple container CLI may be Homebrew's or MacPorts' when the login
// item's PATH has neither).
func (r *Runner) engineStatus() []api.EngineStatus {
	r.ctrs.mu.Lock()
	defer r.ctrs.mu.Unlock()
	var out []api.EngineStatus
	for _, name := range slices.Sorted(maps.Keys(r.ctrs.infos)) {
		i := r.ctrs.infos[name]
		out = append(out, api.EngineStatus{Name: name, Version: i.Version, Bin: i.Bin, BinFrom: i.BinFrom})
	}
	return out
}
