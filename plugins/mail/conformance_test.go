package mail

import (
	"log/slog"
	"net"
	"testing"

	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// TestConformance loads the manifest and skills as the core does, checks
// a config against config_schema, and calls every tool as the agent
// would, from a group that may use no account (each call is refused
// before any server or credential is touched: a group is granted mail,
// never assumed to have it). The inbox watch is off here: it reads the
// account's password, whose key is the account's name, which the manifest
// cannot list (install.credentials names fixed keys).
func TestConformance(t *testing.T) {
	f := newServers(t)
	var d net.Dialer
	cfg := f.config(func(_, cfg map[string]any) { cfg["recipient_allowlist"] = []any{"@example.org"} })
	plugintest.Conformance(t, ".", New(Options{Dial: d.DialContext, DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}),
		plugintest.WithConfig(cfg),
		plugintest.WithServices(&plugintest.Services{Plugin: Name, Channel: true,
			Credentials: plugintest.NewFakeCredentials(map[string]string{})}))
}
