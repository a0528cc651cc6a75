package loader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// VerifyTimeout bounds a plugin's own check (plugin.Verifier).
const VerifyTimeout = 10 * time.Second

// verifyTimeout is VerifyTimeout; tests shorten it.
var verifyTimeout = VerifyTimeout

// Verify asks plugin name to check its own setup (plugin.Verifier: log
// in, list what it reaches, change nothing), for carapace doctor --online.
// A plugin whose handler has no check answers Checked false. A plugin
// that is not serving is refused (api.ErrConflict): its status already
// says why. What the plugin says is cut to one printable line of at most
// api.MaxPluginCheckText bytes; it goes to the user, never to the agent.
func (l *Loader) Verify(ctx context.Context, name string) (api.PluginCheck, error) {
	out := api.PluginCheck{Name: name}
	l.mu.Lock()
	st := l.find(name)
	var state string
	if st != nil {
		state = st.state
	}
	l.mu.Unlock()
	switch {
	case st == nil:
		return out, fmt.Errorf("plugin %s: %w", name, api.ErrNotFound)
	case state != stateHealthy:
		return out, fmt.Errorf("plugin %s is %s, not serving (carapace plugin list says why): %w", name, state, api.ErrConflict)
	}
	if !st.calls.enter() {
		return out, fmt.Errorf("plugin %s is restarting: %w", name, api.ErrConflict)
	}
	defer st.calls.leave()
	v, ok := st.handler.(plugin.Verifier)
	if !ok {
		return out, nil
	}
	vctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	res, err := v.Verify(vctx)
	switch {
	case errors.Is(err, plugin.ErrNotImplemented):
		return out, nil
	case vctx.Err() != nil && ctx.Err() == nil:
		l.log.Warn("plugin check did not answer in time", "plugin", name, "timeout", verifyTimeout)
		out.Checked, out.Message = true, fmt.Sprintf("the plugin's check did not answer within %s", verifyTimeout)
		return out, nil
	case err != nil:
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		l.log.Warn("plugin check failed", "plugin", name, "err", textutil.Clip(textutil.OneLine(err.Error()), api.MaxPluginCheckText))
		out.Checked, out.Message = true, "the plugin's check failed: "+checkText(err.Error())
		return out, nil
	case res == nil:
		out.Checked, out.Message = true, "the plugin's check answered nothing"
		return out, nil
	}
	out.Checked, out.OK, out.Message = true, res.OK, checkText(res.Message)
	if !res.OK {
		out.Fix = checkText(res.Fix)
	}
	return out, nil
}

// checkText is a plugin's text made fit for the user's terminal: one
// line, printable, bounded.
func checkText(s string) string {
	return textutil.Clip(textutil.Printable(textutil.OneLine(s)), api.MaxPluginCheckText)
}
