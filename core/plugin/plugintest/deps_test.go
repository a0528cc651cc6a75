package plugintest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/plugins/echo"
)

// goList runs go list on this package with the given format.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to check dependencies: %v", err)
	}
	out, err := exec.Command(goTool, append([]string{"list"}, append(args, ".")...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// TestDependencies keeps the harness a library a plugin's tests can import
// cheaply: none of the core's server side, and no transport of its own.
func TestDependencies(t *testing.T) {
	const mod = "github.com/carapace-dev/carapace/"
	for _, dep := range goList(t, "-deps") {
		for _, bad := range []string{mod + "core/server", mod + "core/session", mod + "core/pipeline", mod + "core/pluginhost", mod + "core/intrinsics"} {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("plugintest depends on %s", dep)
			}
		}
	}
	for _, imp := range goList(t, "-f", `{{join .Imports " "}}`) {
		if strings.Contains(imp, "zmq") || strings.HasSuffix(imp, "/zmtp") || imp == "net/http" || imp == "os/exec" {
			t.Errorf("plugintest imports %s", imp)
		}
	}
}

// TestEchoConforms runs Conformance on the built-in echo plugin: the
// harness against a real plugin, and the plugin against its manifest.
func TestEchoConforms(t *testing.T) {
	Conformance(t, "../../../plugins/echo", &echo.Handler{})
}
