package plugintest

import (
	"encoding/json"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Payload encodes v as an event's payload, as a publisher does
// (plugin.NewEvent), for a test that builds an event by hand. It panics
// if v does not encode to a JSON object: a test's mistake.
func Payload(v any) json.RawMessage {
	ev, err := plugin.NewEvent("test.payload", "", v)
	if err != nil {
		panic(err)
	}
	return ev.Payload
}

// Member returns the member key of ev's payload, decoded as a handler
// decodes it (numbers as json.Number); nil if it is absent or the payload
// does not decode.
func Member(ev *plugin.Event, key string) any {
	var m map[string]any
	if ev.Decode(&m) != nil {
		return nil
	}
	return m[key]
}
