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
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
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
	unlock, err := lockImages(syscall.LOCK_SH)
	if err != nil {
		return err
	}
	defer unlock()
	return agentimage.Build(ctx, o, []agentimage.File{
		{Name: "Containerfile", Data: agenttest.Containerfile, Mode: 0o644},
		{Name: "test-agent", Data: agenttest.TestAgent, Mode: 0o755},
		{Name: "managed-settings.json", Data: claudemd.ManagedSettings(), Mode: 0o644},
		{Name: "busybox", Src: o.Busybox, Mode: 0o755},
		{Name: "ipc", Src: o.IPC, Mode: 0o755},
		{Name: "ipc-relay", Src: o.Relay, Mode: 0o755},
	}, "DOCKER_BUILDKIT=0")
}

// Remove removes the test images tags from docker, forced, once no
// BuildTest of any test binary on this machine is running. The legacy
// builder keeps each step of a build as an untagged image, the cache of
// the next build of the same steps; removing a tagged image removes its
// untagged parents with it, and a build that was just reusing one of
// them as its cache then fails ("failed to get digest"). Test packages
// run in parallel, so builds hold a shared lock and Remove an exclusive
// one (lockImages).
func Remove(tags ...string) error {
	unlock, err := lockImages(syscall.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	if out, err := exec.Command("docker", append([]string{"image", "rm", "-f"}, tags...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("remove test images %s: %w\n%s", strings.Join(tags, " "), err, out)
	}
	return nil
}

// lockImages takes how (syscall.LOCK_SH or LOCK_EX) on the machine's
// lock file of the test images, waiting for it, and returns its release.
func lockImages(how int) (func(), error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "carapace-test-images.lock"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("lock the test images: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the test images: %w", err)
	}
	return func() { f.Close() }, nil
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
