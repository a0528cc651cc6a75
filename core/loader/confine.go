package loader

import (
	"context"
	"fmt"
	"net"
	"sync"

	"golang.org/x/time/rate"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/egress"
	"github.com/carapace-dev/carapace/core/pluginhost"
	"github.com/carapace-dev/carapace/core/pluginpolicy"
)

// confineSpec sets what the operating system imposes on an out-of-process
// plugin's handler, and its egress point, on spec. A kernel that cannot
// confine fails the plugin unless the user accepted running it
// unconfined ([plugins.NAME] unconfined = true).
func (l *Loader) confineSpec(st *pluginState, spec *pluginhost.Spec) error {
	if st.policy == nil {
		return nil
	}
	spec.Env = st.policy.Env
	eo := egress.Options{Logger: l.log.With("plugin", st.name), Record: l.egressAudit(st.name)}
	if n := l.opts.EgressNet; n != nil {
		eo.Resolver, eo.Dialer = n.Resolver, n.Dialer
	}
	if l.cfg != nil {
		eo.FakeIP = l.cfg.Network.FakeIPPrefixes()
	}
	cp, peo, err := st.policy.Impose(l.support(), eo)
	if err != nil {
		return err
	}
	spec.Confine, spec.Egress = cp, peo
	return nil
}

// EgressNet is the network under the plugins' egress points, replaced
// (Options.EgressNet): egress.Options' Resolver and Dialer.
type EgressNet struct {
	Resolver egress.Resolver
	Dialer   func(ctx context.Context, network, addr string) (net.Conn, error)
}

// support is what this system can confine with (core/confine), unless a
// test replaced it.
func (l *Loader) support() confine.Support {
	if l.opts.ConfineSupport != nil {
		return *l.opts.ConfineSupport
	}
	return confine.Probe()
}

// egressAudit audits every connection of plugin through its egress point
// (host, port, address, bytes; never content) and every refusal, the
// refusals rate-limited so that a flooding plugin cannot fill the log.
func (l *Loader) egressAudit(plugin string) func(egress.Record) {
	var mu sync.Mutex
	refusals := rate.NewLimiter(5, 50)
	skipped := 0
	return func(r egress.Record) {
		e := &audit.Entry{Source: plugin, Stage: audit.StageEgress, DurationMS: float64(r.Duration.Microseconds()) / 1000}
		target := fmt.Sprintf("%s:%d", r.Host, r.Port)
		if r.Refused != "" || r.Code != "" {
			mu.Lock()
			if !refusals.Allow() {
				skipped++
				mu.Unlock()
				return
			}
			n := skipped
			skipped = 0
			mu.Unlock()
			e.Outcome, e.Code = audit.OutcomeRejected, r.Code
			e.Reason = "refused " + target + ": " + r.Refused
			if n > 0 {
				e.Reason += fmt.Sprintf(" (and %d refusals before it not written: too many)", n)
			}
			l.log.Warn("plugin egress refused", "plugin", plugin, "host", target, "code", r.Code, "why", r.Refused)
		} else {
			e.Outcome = audit.OutcomeClosed
			e.Reason = fmt.Sprintf("%s via %s: %d bytes out, %d bytes in", target, r.Addr, r.BytesOut, r.BytesIn)
			if r.FakeIP {
				e.Reason += " (a fake-IP DNS answer: [network] fake_ip)"
			}
		}
		if err := l.audit.Write(e); err != nil {
			l.log.Error("audit egress", "plugin", plugin, "err", err)
		}
	}
}

// mechanism names what confines plugins here, for the control API.
func (l *Loader) mechanism() string { return l.support().String() }

// confinement reports an out-of-process plugin's policy for the control
// API (plugin list and show, doctor, the watch stream); nil in process.
func (l *Loader) confinement(p *pluginpolicy.Policy) *api.Confinement {
	if p == nil {
		return nil
	}
	c := &api.Confinement{Mode: api.ConfinementConfined, Mechanism: l.mechanism(), Public: p.Public}
	if p.Unconfined {
		c.Mode, c.Mechanism = api.ConfinementUnconfined, ""
	}
	for _, r := range p.Read {
		c.Read = append(c.Read, r.Path+" ("+r.Why+")")
	}
	for _, w := range p.Write {
		c.Write = append(c.Write, w.Path+" ("+w.Why+")")
	}
	for _, h := range p.Hosts {
		c.Hosts = append(c.Hosts, h.String()+" ("+h.From+")")
	}
	return c
}
