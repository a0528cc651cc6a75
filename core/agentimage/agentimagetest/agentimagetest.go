// Package agentimagetest builds Carapace's offline test agent image
// (Resources/agent/test) for the tests, `make image-test` (cmd/build-image)
// and the benchmarks: FROM scratch, so that nothing is pulled, with a
// static busybox, the scripted agent test-agent and the static linux ipc
// and ipc-relay binaries copied in. It builds with agentimage.Build, with the legacy
// builder for docker (DOCKER_BUILDKIT=0): BuildKit may want to pull its
// frontend image, and there may be no registry to pull it from. `podman
// build` (buildah) needs no such switch.
//
// It lives apart from agentimage so that the shipping carapace, which
// builds only the real agent image, does not carry the test image
// (cmd/carapace's TestDeps).
package agentimagetest

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"

	agenttest "github.com/carapace-dev/carapace/Resources/agent/test"
	"github.com/carapace-dev/carapace/core/agentimage"
	"github.com/carapace-dev/carapace/core/claudemd"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// TestTag is the tag of the test image that `make image-test` builds.
const TestTag = "carapace-agent-test:dev"

// DefaultBusybox is where Debian's busybox-static installs busybox.
const DefaultBusybox = "/bin/busybox"

// BuildTest builds the offline test image with the engine's CLI; o.Tag
// empty means TestTag, o.Busybox empty DefaultBusybox.
func BuildTest(ctx context.Context, o agentimage.Options) error {
	arch, err := agentimage.Prepare(ctx, &o, "test image", TestTag)
	if err != nil {
		return err
	}
	if o.Busybox == "" {
		o.Busybox = DefaultBusybox
	}
	if err := agentimage.CheckStatic(o.Busybox, arch); err != nil {
		return fmt.Errorf("build test image: busybox: %w (install Debian's static build: apt-get install busybox-static)", err)
	}
	return agentimage.Build(ctx, o, []agentimage.File{
		{Name: "Containerfile", Data: agenttest.Containerfile, Mode: 0o644},
		{Name: "test-agent", Data: agenttest.TestAgent, Mode: 0o755},
		{Name: "managed-settings.json", Data: claudemd.ManagedSettings(), Mode: 0o644},
		{Name: "busybox", Src: o.Busybox, Mode: 0o755},
		{Name: "ipc", Src: o.IPC, Mode: 0o755},
		{Name: "ipc-relay", Src: o.Relay, Mode: 0o755},
	}, "DOCKER_BUILDKIT=0")
}

// StaticBusybox returns DefaultBusybox, Debian's busybox-static, which CI
// installs: the image is built with it, and tests use it as a static
// binary of this machine. Without it the test is skipped, or fails under
// CI (testutil.RequireFile).
func StaticBusybox(t testing.TB) string {
	t.Helper()
	testutil.RequireFile(t, DefaultBusybox, "the image is built with it (apt-get install busybox-static)")
	return DefaultBusybox
}

// DynamicBinary returns a dynamically linked executable of this machine,
// which a build must refuse to copy into an image.
func DynamicBinary(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/ls", "/bin/ls", "/usr/bin/env"} {
		if err := agentimage.CheckStatic(p, goruntime.GOARCH); errors.Is(err, agentimage.ErrNotStatic) && strings.Contains(err.Error(), "dynamically linked") {
			return p
		}
	}
	t.Fatal("no dynamically linked executable found")
	return ""
}
