package pluginpolicy

import (
	"fmt"

	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/egress"
)

// Impose turns the policy into what the core imposes on the handler: the
// confinement core/confine applies (nil when the user set unconfined),
// and the options of its egress point (core/egress) with the declared
// hosts, its only way to the network. eo carries what the caller adds to
// the egress point (Logger, Record); Plugin, Public and Allow are the
// policy's. A system that cannot confine (sup.Missing) is an error that
// names the setting which accepts the risk, unless the user accepted it.
// The loader starts every out-of-process plugin with this, and `carapace
// doctor --prove` its probe plugin (core/prove), so that the proof runs
// under the very confinement plugins get.
func (p Policy) Impose(sup confine.Support, eo egress.Options) (*confine.Policy, *egress.Options, error) {
	var cp *confine.Policy
	if !p.Unconfined {
		if err := sup.Missing(); err != nil {
			return nil, nil, fmt.Errorf("%w; to run plugin %s without confinement anyway (it can then read all your files, reach the core's sockets and any host), set [plugins.%s] unconfined = true in config.toml", err, p.Plugin, p.Plugin)
		}
		cp = &confine.Policy{Plugin: p.Plugin, Exec: p.Exec}
		for _, r := range p.Read {
			cp.Read = append(cp.Read, r.Path)
		}
		for _, w := range p.Write {
			cp.Write = append(cp.Write, w.Path)
		}
	}
	eo.Plugin, eo.Public, eo.Allow = p.Plugin, p.Public, nil
	for _, h := range p.Hosts {
		eo.Allow = append(eo.Allow, egress.Host{Name: h.Name, Port: h.Port})
	}
	return cp, &eo, nil
}
