package agentimagetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

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
	err := agentimagetest.BuildTest(context.Background(), agentimage.Options{Engine: bin, Tag: "carapace-agent-test:unit", IPC: bb, Relay: bb, Version: "1.2.3"})
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
		"-rw-r--r-- Containerfile\n", "-rw-r--r-- managed-settings.json\n", "-rwxr-xr-x busybox\n", "-rwxr-xr-x ipc\n", "-rwxr-xr-x ipc-relay\n", "-rwxr-xr-x test-agent\n",
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
		"dynamic busybox":   {agentimage.Options{Engine: bin, IPC: bb, Relay: bb, Busybox: dyn}, "apt-get install busybox-static"},
		"dynamic ipc":       {agentimage.Options{Engine: bin, IPC: dyn, Relay: bb, Busybox: bb}, "CGO_ENABLED=0 GOOS=linux"},
		"dynamic ipc-relay": {agentimage.Options{Engine: bin, IPC: bb, Relay: dyn, Busybox: bb}, "./cmd/ipc-relay"},
		"no ipc-relay":      {agentimage.Options{Engine: bin, IPC: bb, Busybox: bb}, "ipc-relay, the model API relay"}, // none beside /bin/busybox
		"no ipc":            {agentimage.Options{Engine: bin, Busybox: bb}, "no ipc binary"},
		"bad version":       {agentimage.Options{Engine: bin, IPC: bb, Relay: bb, Busybox: bb, Version: "1 2"}, "bad version"},
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

// The scripted agent runs each line of its prompt and prints it with its
// status: "TOPIC JSON" as one ipc call, "sh SCRIPT" as a script, which may
// read a file and make a call of its own; one failed line makes it exit 1.
// Busybox is its shell, as in the image; ipc is a stand-in that prints its
// arguments.
func TestTestAgentRunsLines(t *testing.T) {
	bb := agentimagetest.StaticBusybox(t)
	dir := t.TempDir()
	for _, name := range []string{"sh", "cat"} {
		if err := os.Symlink(bb, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"test-agent": string(agenttest.TestAgent),
		"ipc":        "#!" + filepath.Join(dir, "sh") + "\necho \"ipc[$1][$2]\"\n",
		"word":       "planted\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prompt := "tool.invoke.echo {\"message\":\"hi\"}\n\n# a comment\n" + `sh w=$(cat word); ipc tool.invoke.x "{\"w\":\"$w\"}"; exit 3`
	cmd := exec.Command(filepath.Join(dir, "sh"), filepath.Join(dir, "test-agent"), "--prompt", prompt)
	cmd.Dir, cmd.Env = dir, []string{"PATH=" + dir}
	out, err := cmd.Output()
	want := `> tool.invoke.echo {"message":"hi"}
ipc[tool.invoke.echo][{"message":"hi"}]
exit 0
> sh w=$(cat word); ipc tool.invoke.x "{\"w\":\"$w\"}"; exit 3
ipc[tool.invoke.x][{"w":"planted"}]
exit 3
`
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || string(out) != want {
		t.Fatalf("test-agent: %v\ngot:\n%s\nwant:\n%s", err, out, want)
	}
}

// Remove waits for every build in progress, which may be reusing the
// untagged step images a removal would take with it: it does not run
// while a build holds on, and it runs once the build has ended.
func TestRemoveWaitsForBuilds(t *testing.T) {
	bb := agentimagetest.StaticBusybox(t)
	dir := t.TempDir()
	building, release, removed := filepath.Join(dir, "building"), filepath.Join(dir, "release"), filepath.Join(dir, "removed")
	script := `#!/bin/sh
case $1 in
version) echo ` + goruntime.GOARCH + ` ;;
build)
	: > ` + building + `
	i=0
	until [ -e ` + release + ` ] || [ $i -ge 3000 ]; do sleep 0.01; i=$((i + 1)); done
	;;
image) echo "$@" > ` + removed + ` ;;
*) exit 1 ;;
esac
`
	bin := filepath.Join(dir, "docker")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))

	built := make(chan error, 1)
	go func() {
		built <- agentimagetest.BuildTest(context.Background(), agentimage.Options{Engine: bin, Tag: "carapace-agent-test:lock", IPC: bb, Relay: bb})
	}()
	waitFile(t, building)
	done := make(chan error, 1)
	go func() { done <- agentimagetest.Remove("carapace-agent-test:lock") }()
	select {
	case err := <-done:
		t.Fatalf("Remove returned (%v) while a build was running", err)
	case <-time.After(time.Second):
	}
	if _, err := os.Stat(removed); err == nil {
		t.Fatal("the image was removed while a build was running")
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(removed); err != nil || string(got) != "image rm -f carapace-agent-test:lock\n" {
		t.Fatalf("the removal ran %q (%v); want image rm -f carapace-agent-test:lock", got, err)
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
