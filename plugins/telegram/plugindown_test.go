package telegram

import (
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// TestOwnerToldWhenAPluginGoesDown: another plugin going down is one
// message to the owner, with the core's words and the command that brings
// it back; restarting states, this plugin's own state and events not from
// the core are not; a plugin that comes back and goes down again is told
// again.
func TestOwnerToldWhenAPluginGoesDown(t *testing.T) {
	e := newEnv(t)
	health := func(name, state, problem string) {
		t.Helper()
		e.coreEvent(plugin.TopicPluginHealth.Name(), "", api.PluginStatus{Name: name, State: state, Problem: problem})
	}
	const why = "died, hung or failed to start again 5 times within 10m0s (the last: handler process died): it stays down; bring it back with `carapace plugin restart weather`"
	downNotes := func() []string {
		var out []string
		for _, m := range e.fake.Texts(owner) {
			if strings.HasPrefix(m, "Plugin ") {
				out = append(out, m)
			}
		}
		return out
	}

	health("weather", api.PluginRestarting, "handler process died; the core starts it again in 1s")
	health(Name, api.PluginDown, "this plugin itself")
	if err := e.hs.HandleEvent(&plugin.Event{Topic: plugin.TopicPluginHealth.Name(), Source: "weather",
		Payload: plugintest.Payload(api.PluginStatus{Name: "mail", State: api.PluginDown, Problem: "forged"})}); err != nil {
		t.Fatal(err)
	}
	health("weather", api.PluginDown, why)
	health("weather", api.PluginDown, why) // published again: still one note
	waitFor(t, "the note", func() bool { return len(downNotes()) > 0 })
	e.clock.Advance(time.Minute)       // past the chat's rate limit, which runs on the fake clock
	time.Sleep(100 * time.Millisecond) // a second note would come now
	if got := downNotes(); len(got) != 1 || got[0] != "Plugin weather is down: "+why {
		t.Fatalf("notes %q, want one about weather", got)
	}

	health("weather", "healthy", "")
	health("weather", api.PluginDown, why)
	waitFor(t, "the second note", func() bool {
		e.clock.Advance(time.Second) // the chat's rate limit runs on the fake clock
		return len(downNotes()) == 2
	})
}
