package cli

import (
	"strings"

	"github.com/carapace-dev/carapace/core/config"
)

// checkNetwork reports the machine-wide network settings every plugin's
// egress point obeys: the fake-IP DNS ranges ([network] fake_ip).
func checkNetwork(cfg *config.Config) Check {
	c := Check{Name: "plugin network", Status: checkOK}
	if cfg == nil {
		c.Status, c.Message = checkWarn, "unknown: config.toml does not load"
		return c
	}
	if len(cfg.Network.FakeIP) == 0 {
		c.Message = "plugins reach public addresses and the ones declared to them; fake-IP DNS off (if names resolve into 198.18.0.0/15 here, set [network] fake_ip in config.toml)"
		return c
	}
	c.Message = "fake-IP DNS answers accepted for names (never literal addresses) in " + strings.Join(cfg.Network.FakeIP, ", ") + " ([network] fake_ip)"
	return c
}
