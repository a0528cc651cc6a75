package cli_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the command line a client: it reaches the core through
// the control API, so it must not link the core's packages (cmd/carapace's
// main links core/server for `carapace serve`, and nothing else does).
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/carapace-dev/carapace/cmd/carapace/cli").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, forbidden := range []string{
		"github.com/carapace-dev/carapace/core/server",
		"github.com/carapace-dev/carapace/core/pipeline",
		"github.com/carapace-dev/carapace/core/session",
	} {
		for _, dep := range strings.Fields(string(out)) {
			if dep == forbidden {
				t.Errorf("package cli depends on %s", forbidden)
			}
		}
	}
}
