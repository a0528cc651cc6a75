package loader

import (
	"encoding/json"

	"github.com/carapace-dev/carapace/core/plugin"
)

// payloadOf encodes v as an event's payload, as a publisher does.
func payloadOf(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// fieldAny returns the payload's member key, decoded; nil if absent.
func fieldAny(ev *plugin.Event, key string) any {
	var m map[string]any
	if ev.Decode(&m) != nil {
		return nil
	}
	return m[key]
}

// field returns the payload's string member key; "" if absent.
func field(ev *plugin.Event, key string) string {
	s, _ := fieldAny(ev, key).(string)
	return s
}
