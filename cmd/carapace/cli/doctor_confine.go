package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/confine"
)

// checkConfinement reports how out-of-process plugins are confined: by
// what on this system, which ones the user runs unconfined, and — with a
// running core — each plugin's mode as the core imposes it.
func checkConfinement(cfg *config.Config, st *api.Status, s confine.Support) Check {
	c := Check{Name: "plugin confinement"}
	var unconfined []string
	if cfg != nil {
		for name, p := range cfg.Plugins {
			if p.Unconfined {
				unconfined = append(unconfined, name)
			}
		}
	}
	slices.Sort(unconfined)
	var confined []string
	if st != nil {
		for _, p := range st.Plugins {
			if p.Confinement != nil && p.Confinement.Mode == api.ConfinementConfined {
				confined = append(confined, p.Name)
			}
		}
	}
	if err := s.Missing(); err != nil {
		c.Status, c.Message = checkFail, oneLine(err.Error())+": out-of-process plugins do not start"
		c.Fix = "run a kernel with Landlock (Linux 5.13 or later, landlock in the lsm= list), or accept the risk per plugin with [plugins.NAME] unconfined = true"
		if len(unconfined) > 0 {
			c.Message += " (except the ones you run unconfined: " + strings.Join(unconfined, ", ") + ")"
		}
		return c
	}
	c.Status, c.Message = checkOK, s.String()
	if len(confined) > 0 {
		c.Message += fmt.Sprintf("; confined now: %s", strings.Join(confined, ", "))
	}
	if len(unconfined) > 0 {
		c.Status = checkWarn
		c.Message += "; UNCONFINED by your config (they can read all your files and reach any host): " + strings.Join(unconfined, ", ")
		var fix []string
		for _, n := range unconfined {
			fix = append(fix, "carapace config set plugins."+n+".unconfined false")
		}
		c.Fix = strings.Join(fix, " && ") + " (then carapace stop && carapace serve)"
	}
	return c
}
