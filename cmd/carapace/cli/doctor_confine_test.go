package cli

import (
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/confine"
)

func TestCheckConfinement(t *testing.T) {
	landlock := confine.Support{OS: "linux", Landlock: 7, Seccomp: true}
	none := confine.Support{OS: "linux"}
	trusting := &config.Config{Plugins: map[string]config.Plugin{"legacy": {Unconfined: true}, "telegram": {}}}
	running := &api.Status{Plugins: []api.PluginStatus{
		{Name: "telegram", Confinement: &api.Confinement{Mode: api.ConfinementConfined}},
		{Name: "legacy", Confinement: &api.Confinement{Mode: api.ConfinementUnconfined}},
		{Name: "echo"}, // in process
	}}
	for _, tc := range []struct {
		name   string
		cfg    *config.Config
		st     *api.Status
		s      confine.Support
		status string
		want   []string
	}{
		{"confined", &config.Config{}, running, landlock, checkOK, []string{"landlock ABI 7", "confined now: telegram"}},
		{"unconfined by config", trusting, running, landlock, checkWarn, []string{"UNCONFINED", "legacy", "plugins.legacy.unconfined false"}},
		{"no landlock", &config.Config{}, nil, none, checkFail, []string{"Landlock", "do not start", "unconfined = true"}},
		{"no landlock, one accepted", trusting, nil, none, checkFail, []string{"except the ones you run unconfined: legacy"}},
	} {
		c := checkConfinement(tc.cfg, tc.st, tc.s)
		text := c.Message + " | " + c.Fix
		if c.Status != tc.status {
			t.Errorf("%s: status %s, want %s: %s", tc.name, c.Status, tc.status, text)
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: %q does not say %q", tc.name, text, w)
			}
		}
	}
}
