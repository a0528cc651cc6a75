package agentimagetest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	agenttest "github.com/carapace-dev/carapace/Resources/agent/test"
	"github.com/carapace-dev/carapace/core/agentimage"
	"github.com/carapace-dev/carapace/core/agentimage/agentimagetest"
)

// fakeEngine is a docker CLI that reports this machine's architecture and,
// for build, records its arguments, its DOCKER_BUILDKIT and a listing of
// the build context.
func fakeEngine(t *testing.T) (bin, record string) {
	t.Helper()
	dir := t.TempDir()
	bin, record = filepath.Join(dir, "docker"), filepath.Join(dir, "record")
	script := `#!/bin/sh
case $1 in
version) echo ` + goruntime.GOARCH + ` ;;
build)
	for last; do :; done
	{ printf '%s\n' "$@"; echo "DOCKER_BUILDKIT=$DOCKER_BUILDKIT"; ls -l "$last" | awk 'NR > 1 {print $1, $NF}'; } > ` + record + `
	cmp -s "$last/Containerfile" ` + filepath.Join(dir, "want-containerfile") + ` || { echo "Containerfile differs" >&2; exit 1; }
	;;
*) exit 1 ;;
esac
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "want-containerfile"), agenttest.Containerfile, 0o644); err != nil {
		t.Fatal(err)
	}
	return bin, record
}

func TestBuildTestAssemblesTheContext(t *testing.T) {
	bb := agentimagetest.StaticBusybox(t)
	bin, record := fakeEngine(t)
	err := agentimagetest.BuildTest(context.Background(), agentimage.Options{Engine: bin, Tag: "carapace-agent-test:unit", IPC: bb, Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"build\n--quiet\n", "--build-arg\nCARAPACE_VERSION=1.2.3\n", "--tag\ncarapace-agent-test:unit\n",
		"DOCKER_BUILDKIT=0\n", // the legacy builder: BuildKit may pull its frontend
		"-rw-r--r-- Containerfile\n", "-rw-r--r-- managed-settings.json\n", "-rwxr-xr-x busybox\n", "-rwxr-xr-x ipc\n", "-rwxr-xr-x test-agent\n",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("build lacks %q:\n%s", want, got)
		}
	}
}

func TestBuildTestRefusesDynamicBinaries(t *testing.T) {
	bb := agentimagetest.StaticBusybox(t)
	dyn := agentimagetest.DynamicBinary(t)
	bin, record := fakeEngine(t)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		o    agentimage.Options
		want string
	}{
		"dynamic busybox": {agentimage.Options{Engine: bin, IPC: bb, Busybox: dyn}, "apt-get install busybox-static"},
		"dynamic ipc":     {agentimage.Options{Engine: bin, IPC: dyn, Busybox: bb}, "CGO_ENABLED=0 GOOS=linux"},
		"no ipc":          {agentimage.Options{Engine: bin, Busybox: bb}, "no ipc binary"},
		"bad version":     {agentimage.Options{Engine: bin, IPC: bb, Busybox: bb, Version: "1 2"}, "bad version"},
	} {
		t.Run(name, func(t *testing.T) {
			err := agentimagetest.BuildTest(ctx, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("BuildTest: %v; want an error saying %q", err, tc.want)
			}
			if _, err := os.Stat(record); err == nil {
				t.Fatal("the engine was asked to build")
			}
		})
	}
}

// The scripted agent is POSIX sh that busybox accepts.
func TestTestAgentParses(t *testing.T) {
	bb := agentimagetest.StaticBusybox(t)
	p := filepath.Join(t.TempDir(), "test-agent")
	if err := os.WriteFile(p, agenttest.TestAgent, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bb, "sh", "-n", p).CombinedOutput(); err != nil {
		t.Fatalf("busybox sh -n test-agent: %v\n%s", err, out)
	}
}
