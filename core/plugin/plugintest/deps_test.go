package plugintest

import (
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
	"github.com/carapace-dev/carapace/plugins/echo"
)

// TestDependencies keeps the harness a library a plugin's tests can import
// cheaply: none of the core's server side, and no transport of its own.
func TestDependencies(t *testing.T) {
	const mod = "github.com/carapace-dev/carapace/"
	const server = "the harness runs a handler in-process, without the core's server side"
	const transport = "the harness calls the handler directly, not over a socket or a process"
	deptest.Checker{
		Forbidden: map[string]string{
			mod + "core/server/...":     server,
			mod + "core/session/...":    server,
			mod + "core/pipeline/...":   server,
			mod + "core/pluginhost/...": server,
			mod + "core/intrinsics/...": server,
		},
		ForbiddenImports: map[string]string{
			"github.com/go-zeromq/...": transport,
			mod + "ipc/zmtp":           transport,
			"net/http":                 transport,
			"os/exec":                  transport,
		},
		Want: []string{mod + "core/plugin"},
	}.Check(t)
}

// TestEchoConforms runs Conformance on the built-in echo plugin: the
// harness against a real plugin, and the plugin against its manifest.
func TestEchoConforms(t *testing.T) {
	Conformance(t, "../../../plugins/echo", &echo.Handler{})
}
