package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/carapace-dev/carapace/core/agentimage/agentimagetest"
)

// version is the version the test binary is built with.
const version = "0.0.0-tmuxtest"

// bins are the binaries the tests run, built once.
var bins struct{ carapace string }

// TestMain builds carapace as make build lays it out: the binary, and
// beside it linux-<arch>/ipc and ipc-relay, the static binaries an agent
// image is built with (here Debian's static busybox stands in for both:
// nothing runs them).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "carapace-main-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		bins.carapace = filepath.Join(dir, "carapace")
		cmd := exec.Command("go", "build", "-tags", "sqlite_fts5", "-ldflags", "-X main.version="+version, "-o", bins.carapace, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build carapace: %v\n%s", err, out)
			return 1
		}
		if data, err := os.ReadFile(agentimagetest.DefaultBusybox); err == nil {
			ipc := filepath.Join(dir, "linux-"+goruntime.GOARCH, "ipc")
			relay := filepath.Join(dir, "linux-"+goruntime.GOARCH, "ipc-relay")
			if err := os.MkdirAll(filepath.Dir(ipc), 0o755); err != nil || os.WriteFile(ipc, data, 0o755) != nil || os.WriteFile(relay, data, 0o755) != nil {
				fmt.Fprintln(os.Stderr, "could not place the ipc and ipc-relay stand-ins")
				return 1
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}
