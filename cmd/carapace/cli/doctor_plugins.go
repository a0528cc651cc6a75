package cli

import (
	"context"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
)

// pluginCheckTimeout bounds one plugin's own check as doctor waits for
// it: the core gives the plugin 10 s (core/loader's VerifyTimeout).
const pluginCheckTimeout = 20 * time.Second

// checkPluginsOnline asks each serving plugin of the running core to check
// its own setup (plugin.Verifier, through POST /v1/plugins/NAME/verify):
// the calendar plugin logs in to its server and lists the calendars, the
// Telegram plugin asks the Bot API who the bot is. A check is named
// "plugin NAME"; a plugin without a check of its own adds none. The
// checks run in parallel, each bounded.
func (a *app) checkPluginsOnline(ctx context.Context, st *api.Status) []Check {
	c, _, err := a.client()
	if err != nil {
		return []Check{{Name: "plugin checks", Status: checkFail, Message: err.Error()}}
	}
	var serving []string
	for _, p := range st.Plugins {
		if p.Healthy || p.State == "degraded" {
			serving = append(serving, p.Name)
		}
	}
	found := make([]*Check, len(serving))
	var wg sync.WaitGroup
	for i, name := range serving {
		wg.Go(func() { found[i] = checkPluginOnline(ctx, c, name) })
	}
	wg.Wait()
	var out []Check
	for _, f := range found {
		if f != nil {
			out = append(out, *f)
		}
	}
	return out
}

// checkPluginOnline is plugin name's own check as a doctor check; nil for
// a plugin without one.
func checkPluginOnline(ctx context.Context, c *control.Client, name string) *Check {
	cctx, cancel := context.WithTimeout(ctx, pluginCheckTimeout)
	defer cancel()
	pc, err := c.VerifyPlugin(cctx, name)
	check := &Check{Name: "plugin " + name}
	switch {
	case err != nil:
		check.Status, check.Message = checkWarn, "its check did not run: "+oneLine(err.Error())
	case !pc.Checked:
		return nil
	case pc.OK:
		check.Status, check.Message = checkOK, pc.Message
	default:
		check.Status, check.Message, check.Fix = checkFail, pc.Message, pc.Fix
		if check.Fix == "" {
			check.Fix = "carapace plugin restart " + name + " once the setup is corrected (docs of the plugin; carapace plugin show " + name + ")"
		}
	}
	return check
}
