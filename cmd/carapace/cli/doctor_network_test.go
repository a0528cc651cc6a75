package cli

import (
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/config"
)

func TestCheckNetwork(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    *config.Config
		status string
		want   string
	}{
		{"fake-IP off", &config.Config{}, checkOK, "fake-IP DNS off (if names resolve into 198.18.0.0/15 here, set [network] fake_ip in config.toml)"},
		{"fake-IP on", &config.Config{Network: config.Network{FakeIP: []string{"198.18.0.0/15", "fdfe::/16"}}}, checkOK, "in 198.18.0.0/15, fdfe::/16 ([network] fake_ip)"},
		{"no config", nil, checkWarn, "config.toml does not load"},
	} {
		c := checkNetwork(tc.cfg)
		if c.Status != tc.status || !strings.Contains(c.Message, tc.want) {
			t.Errorf("%s: %s %q, want %s %q", tc.name, c.Status, c.Message, tc.status, tc.want)
		}
	}
}
