package telegram

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
)

// TestConformance loads the manifest and skills as the core does, checks
// the config against config_schema, and calls send_telegram as the agent
// would.
func TestConformance(t *testing.T) {
	f := fakebot.New(t)
	plugintest.Conformance(t, ".", New(Options{DataDir: t.TempDir(), Logger: testLogger(t), PollTimeout: time.Second}),
		plugintest.WithConfig(map[string]any{"owner_id": json.Number("4242"), "owner_group": "main", "api_url": f.URL(),
			"chats": map[string]any{"-100777": "family"}, "debounce_ms": json.Number("1500")}),
		plugintest.WithServices(&plugintest.Services{Channel: true, Surface: true,
			Credentials: plugintest.NewFakeCredentials(map[string]string{CredentialKey: fakebot.Token})}),
		plugintest.WithSampleArgs("send_telegram", map[string]any{"text": "hello"}))
}

func TestConfigSchemaMatchesTheParser(t *testing.T) {
	// Settings the schema refuses are refused by the handler too, so a
	// handler run outside the core stays as strict.
	cases := []struct {
		name string
		cfg  map[string]any
		ok   bool
	}{
		{"all set", map[string]any{"owner_id": 1, "owner_group": "g", "chats": map[string]any{"-1": "g"}, "api_url": "https://x.example", "debounce_ms": 0}, true},
		{"unknown key", map[string]any{"owner": 1}, false},
		{"bad group", map[string]any{"owner_group": "no spaces"}, false},
		{"chat id not a number", map[string]any{"chats": map[string]any{"family": "g"}}, false},
		{"debounce too long", map[string]any{"debounce_ms": 60000}, false},
		{"http off the loopback", map[string]any{"api_url": "http://10.0.0.1"}, false},
		{"http on the loopback", map[string]any{"api_url": "http://127.0.0.1:8081"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.cfg)
			if (err == nil) != tc.ok {
				t.Errorf("parseConfig: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
