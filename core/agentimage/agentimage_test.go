package agentimage_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	agentfiles "github.com/carapace-dev/carapace/Resources/agent"
	"github.com/carapace-dev/carapace/core/agentimage"
	"github.com/carapace-dev/carapace/core/agentimage/agentimagetest"
	"github.com/carapace-dev/carapace/internal/testutil"
)

func TestCheckStatic(t *testing.T) {
	bb := agentimagetest.StaticBusybox(t)
	if err := agentimage.CheckStatic(bb, goruntime.GOARCH); err != nil {
		t.Fatalf("busybox-static: %v", err)
	}
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[goruntime.GOARCH]
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ path, arch, want string }{
		"dynamic":    {agentimagetest.DynamicBinary(t), goruntime.GOARCH, "dynamically linked (interpreter /"},
		"other arch": {bb, other, "the engine runs " + other},
		"not ELF":    {script, goruntime.GOARCH, "not an ELF executable"},
	} {
		t.Run(name, func(t *testing.T) {
			err := agentimage.CheckStatic(tc.path, tc.arch)
			if !errors.Is(err, agentimage.ErrNotStatic) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckStatic(%s, %s): %v; want ErrNotStatic saying %q", tc.path, tc.arch, err, tc.want)
			}
		})
	}
	if err := agentimage.CheckStatic(bb, "riscv64"); err == nil {
		t.Fatal("an unsupported architecture was accepted")
	}
}

func TestEngineArch(t *testing.T) {
	bin, _ := agentEngine(t, false)
	arch, err := agentimage.EngineArch(context.Background(), bin)
	if err != nil || arch != goruntime.GOARCH {
		t.Fatalf("EngineArch: %q, %v", arch, err)
	}
	if _, err := agentimage.EngineArch(context.Background(), filepath.Join(t.TempDir(), "nothing")); err == nil {
		t.Fatal("EngineArch of a missing CLI succeeded")
	}
}

// agentEngine is a docker CLI whose build prints progress lines, records
// its arguments and the build context, and then fails as an engine
// without a registry does when failPull is set.
func agentEngine(t *testing.T, failPull bool) (bin, record string) {
	t.Helper()
	dir := t.TempDir()
	bin, record = filepath.Join(dir, "docker"), filepath.Join(dir, "record")
	fail := ""
	if failPull {
		fail = `echo 'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host' >&2; exit 1`
	}
	script := `#!/bin/sh
case $1 in
version) echo ` + goruntime.GOARCH + ` ;;
build)
	for last; do :; done
	{ printf '%s\n' "$@"; echo "DOCKER_BUILDKIT=$DOCKER_BUILDKIT"; ls -l "$last" | awk 'NR > 1 {print $1, $NF}'; cat "$last/Containerfile"; } > ` + record + `
	echo "Step 1/9 : FROM node:22-bookworm-slim"
	` + fail + `
	echo "Step 2/9 : RUN npm install"
	;;
*) exit 1 ;;
esac
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, record
}

func TestBuildAgent(t *testing.T) {
	bb := agentimagetest.StaticBusybox(t) // a static binary of this machine, as ipc is
	bin, record := agentEngine(t, false)
	var progress strings.Builder
	err := agentimage.BuildAgent(context.Background(), agentimage.Options{Engine: bin, IPC: bb, Relay: bb, Version: "1.2.3", Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"build\n--file\n", "--build-arg\nCARAPACE_VERSION=1.2.3\n", "--tag\ncarapace-agent:1.2.3\n",
		"DOCKER_BUILDKIT=\n", // BuildKit is fine: the build pulls anyway
		"-rw-r--r-- Containerfile\n", "-rwxr-xr-x entrypoint.sh\n", "-rw-r--r-- managed-settings.json\n", "-rwxr-xr-x ipc\n",
		"-rwxr-xr-x ipc-relay\n", "COPY ipc-relay /usr/local/bin/ipc-relay\n",
		string(agentfiles.Containerfile),
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("build lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "--quiet") {
		t.Error("a build with progress ran with --quiet")
	}
	if p := progress.String(); !strings.Contains(p, "Step 1/9") || !strings.Contains(p, "Step 2/9") {
		t.Errorf("progress %q lacks the engine's steps", p)
	}
}

func TestBuildAgentWithoutRegistry(t *testing.T) {
	bb := agentimagetest.StaticBusybox(t)
	bin, _ := agentEngine(t, true)
	err := agentimage.BuildAgent(context.Background(), agentimage.Options{Engine: bin, IPC: bb, Relay: bb, Tag: "carapace-agent:unit"})
	if err == nil {
		t.Fatal("a failed build succeeded")
	}
	for _, want := range []string{"no such host", "registry", "npm", "carapace config set runtime.image"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	dyn := agentimagetest.DynamicBinary(t)
	if err := agentimage.BuildAgent(context.Background(), agentimage.Options{Engine: bin, IPC: dyn, Relay: bb}); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("a dynamic ipc: %v", err)
	}
}

// The image needs ipc-relay too: by default the one beside ipc (where
// make build puts it), and a missing or dynamic one is refused with the
// way to build it.
func TestBuildAgentNeedsTheRelay(t *testing.T) {
	bb := agentimagetest.StaticBusybox(t)
	dyn := agentimagetest.DynamicBinary(t)
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ipc := filepath.Join(dir, "ipc")
	if err := os.WriteFile(ipc, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]agentimage.Options{
		"none beside ipc": {IPC: ipc},
		"dynamic":         {IPC: ipc, Relay: dyn},
	} {
		t.Run(name, func(t *testing.T) {
			bin, record := agentEngine(t, false)
			o.Engine = bin
			err := agentimage.BuildAgent(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), "ipc-relay") || !strings.Contains(err.Error(), "go build -o bin/linux-"+goruntime.GOARCH+"/ipc-relay ./cmd/ipc-relay") {
				t.Fatalf("BuildAgent: %v; want an error naming ipc-relay and how to build it", err)
			}
			if _, err := os.Stat(record); err == nil {
				t.Fatal("the engine was asked to build")
			}
		})
	}
	// The control: with ipc-relay beside ipc, it builds and copies it in.
	if err := os.WriteFile(filepath.Join(dir, "ipc-relay"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	bin, record := agentEngine(t, false)
	if err := agentimage.BuildAgent(context.Background(), agentimage.Options{Engine: bin, IPC: ipc}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(record); err != nil || !strings.Contains(string(got), "-rwxr-xr-x ipc-relay\n") {
		t.Fatalf("the build context lacks ipc-relay (%v):\n%s", err, got)
	}
}

// Exists against the real engine: the test image make test builds is
// there, a name nobody built is not, and a CLI that fails otherwise is an
// error rather than "missing".
func TestExists(t *testing.T) {
	testutil.RequireDocker(t, "Exists asks the real engine")
	ctx := context.Background()
	bb := agentimagetest.StaticBusybox(t)
	arch, err := agentimage.EngineArch(ctx, "docker")
	if err != nil {
		t.Fatal(err)
	}
	// A tiny image of its own, so that the test does not hang on others.
	tag := "carapace-agent-exists:unit"
	ipc := filepath.Join(t.TempDir(), "ipc")
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ipc, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(ipc), "ipc-relay"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if goruntime.GOARCH != arch {
		t.Fatalf("the engine runs %s, this test %s", arch, goruntime.GOARCH)
	}
	if err := agentimagetest.BuildTest(ctx, agentimage.Options{Tag: tag, IPC: ipc}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agentimagetest.Remove(tag) })
	if ok, err := agentimage.Exists(ctx, "docker", tag); !ok || err != nil {
		t.Errorf("Exists(%s) = %v, %v; want true", tag, ok, err)
	}
	if ok, err := agentimage.Exists(ctx, "docker", "carapace-never-built:none"); ok || err != nil {
		t.Errorf("Exists(never built) = %v, %v; want false, nil", ok, err)
	}
	broken := filepath.Join(t.TempDir(), "docker")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2; exit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if ok, err := agentimage.Exists(ctx, broken, tag); ok || err == nil {
		t.Errorf("Exists with an engine that does not answer = %v, %v; want an error", ok, err)
	}
}
