package server

import (
	"maps"
	"slices"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/runtime"
)

// rememberEngine keeps what the Check of the engine named name said, for
// Status. The caller holds s.ctrs.mu.
func (s *Server) rememberEngine(name string, info runtime.Info) {
	if s.ctrs.infos == nil {
		s.ctrs.infos = map[string]runtime.Info{}
	}
	s.ctrs.infos[name] = info
}

// engineStatus lists the engines that were checked and found ready, by
// name: which version, and which binary the core runs (on a Mac, the
// Apple container CLI may be Homebrew's or MacPorts' when the login
// item's PATH has neither).
func (s *Server) engineStatus() []control.EngineStatus {
	s.ctrs.mu.Lock()
	defer s.ctrs.mu.Unlock()
	var out []control.EngineStatus
	for _, name := range slices.Sorted(maps.Keys(s.ctrs.infos)) {
		i := s.ctrs.infos[name]
		out = append(out, control.EngineStatus{Name: name, Version: i.Version, Bin: i.Bin, BinFrom: i.BinFrom})
	}
	return out
}
