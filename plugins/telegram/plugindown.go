package telegram

import (
	"context"
	"fmt"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// maxDownProblem bounds the core's words about a plugin that went down
// in the owner's note.
const maxDownProblem = 1000

// onPluginHealth tells the owner, in one message, when another plugin
// goes down: the core has stopped starting it again after its crashes,
// and only `carapace plugin restart NAME` on the computer brings it back.
// A plugin that is only restarting is not worth a message; one that goes
// down again after coming back is told again. When this plugin is the one
// down it cannot tell: the other surfaces (plugin list, doctor, the menu)
// do.
func (h *Handler) onPluginHealth(_ context.Context, ev *plugin.Event) error {
	p, err := plugin.TopicPluginHealth.Decode(ev)
	if err != nil {
		return err
	}
	if p.Name == Name {
		return nil
	}
	down := p.State == api.PluginDown
	h.mu.Lock()
	was := h.down[p.Name]
	if down {
		h.down[p.Name] = true
	} else {
		delete(h.down, p.Name)
	}
	owner := h.owner
	h.mu.Unlock()
	if !down || was || owner == 0 {
		return nil
	}
	h.notify(owner, fmt.Sprintf("Plugin %s is down: %s", textutil.Printable(p.Name), textutil.Clip(textutil.Printable(p.Problem), maxDownProblem)))
	return nil
}
