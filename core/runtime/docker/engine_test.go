package docker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/core/runtime/docker"
)

func TestCheck(t *testing.T) {
	if engInfo.Engine != "docker" || engInfo.Version == "" {
		t.Fatalf("Check: %+v", engInfo)
	}
	t.Logf("engine %s %s; test image built in %s", engInfo.Engine, engInfo.Version, buildTime.Round(time.Millisecond))
}

// fakeCLI writes an executable shell script named name that records its
// arguments in a file and then runs body.
func fakeCLI(t *testing.T, name, body string) (bin, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	bin, argsFile = filepath.Join(dir, name), filepath.Join(dir, "args")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argsFile + "\n" + body + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argsFile
}

func TestCheckUnavailable(t *testing.T) {
	ctx := context.Background()
	notRunning, _ := fakeCLI(t, "docker", `echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2; exit 1`)
	denied, _ := fakeCLI(t, "docker", `echo "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock" >&2; exit 1`)
	for name, tc := range map[string]struct{ bin, advice string }{
		"not installed": {filepath.Join(t.TempDir(), "docker"), "not installed"},
		"not in PATH":   {"carapace-no-such-docker", "not installed"},
		"not running":   {notRunning, "not running"},
		"no permission": {denied, "docker group"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := docker.New(docker.Options{Bin: tc.bin}).Check(ctx)
			if !errors.Is(err, runtime.ErrUnavailable) || !strings.Contains(err.Error(), tc.advice) {
				t.Fatalf("Check: %v; want ErrUnavailable saying %q", err, tc.advice)
			}
		})
	}
}

// Podman shares the code; its version comes from the client part (a
// local Podman has no server).
func TestPodmanName(t *testing.T) {
	bin, argsFile := fakeCLI(t, "podman", `echo 5.4.2`)
	e := docker.New(docker.Options{Bin: bin})
	if e.Name() != "podman" || docker.New(docker.Options{}).Name() != "docker" {
		t.Fatalf("names: %q, %q", e.Name(), docker.New(docker.Options{}).Name())
	}
	info, err := e.Check(context.Background())
	if err != nil || info != (runtime.Info{Engine: "podman", Version: "5.4.2", Bin: bin}) {
		t.Fatalf("Check: %+v, %v", info, err)
	}
	if args, _ := os.ReadFile(argsFile); string(args) != "version\n--format\n{{.Client.Version}}\n" {
		t.Fatalf("podman called with %q", args)
	}
}

func TestStopAndListMissing(t *testing.T) {
	ctx := context.Background()
	if err := eng.Stop(ctx, "carapace-e2e-missing-"+randHex(4)); err != nil {
		t.Fatalf("Stop of a missing container: %v", err)
	}
	names, err := eng.List(ctx, runtime.LabelSession, "missing-"+randHex(4))
	if err != nil || len(names) != 0 {
		t.Fatalf("List with no match: %q, %v", names, err)
	}
	if err := eng.Stop(ctx, "--all"); !errors.Is(err, runtime.ErrInvalidSpec) {
		t.Fatalf("Stop(--all): %v, want ErrInvalidSpec", err)
	}
	for _, kv := range [][2]string{{"", "x"}, {"a=b", "x"}, {"k", "a\nb"}} {
		if _, err := eng.List(ctx, kv[0], kv[1]); !errors.Is(err, runtime.ErrInvalidSpec) {
			t.Fatalf("List(%q, %q): %v, want ErrInvalidSpec", kv[0], kv[1], err)
		}
	}
}

func TestRunRefusesBadSpecs(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "gone.sock")
	for name, b := range map[string]box{
		"missing mount source": {Script: "true", Mounts: []runtime.Mount{{Source: missing, Target: runtime.SocketPath}}},
		"user by name":         {Script: "true", User: "agent"},
	} {
		t.Run(name, func(t *testing.T) {
			s := spec(t, b)
			exit, err := eng.Run(ctx, s, runtime.IO{})
			if err == nil || exit != -1 {
				t.Fatalf("Run: exit %d, %v; want a refusal", exit, err)
			}
			if names, _ := eng.List(ctx, runtime.LabelSession, s.Name); len(names) != 0 {
				t.Fatalf("a container was created: %q", names)
			}
		})
	}
	// `-v` would have created the missing source as a folder.
	if _, err := os.Lstat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the missing mount source was created: %v", err)
	}
	s := spec(t, box{Script: "true"})
	s.Name = "-bad"
	if _, err := eng.Run(ctx, s, runtime.IO{}); !errors.Is(err, runtime.ErrInvalidSpec) {
		t.Fatalf("Run with a bad name: %v", err)
	}
}

// An image that is not in the engine's store is an error at once: no pull.
func TestRunMissingImageDoesNotPull(t *testing.T) {
	r := run(t, context.Background(), box{Image: "carapace-e2e-absent:" + randHex(4), Cmd: []string{"true"}})
	if !errors.Is(r.Err, runtime.ErrNoImage) || r.Exit != 125 || !strings.Contains(r.Err.Error(), "No such image") {
		t.Fatalf("missing image: exit %d, %v; want exit 125 and \"No such image\"\n%s", r.Exit, r.Err, r.Output())
	}
	if strings.Contains(r.Output(), "Pulling") || strings.Contains(r.Output(), "Unable to find image") {
		t.Fatalf("the engine tried to pull:\n%s", r.Output())
	}
}

// An engine older than MinDockerVersion is refused with what to install.
func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"28.1.1": true, "20.10.24+dfsg1": true, "20.10.0": true, "27.0.0-rc.2": true, "dev": true,
		"19.03.15": false, "20.9.1": false, "1.13.1": false, "17.06.2-ce": false,
	} {
		bin, _ := fakeCLI(t, "docker", "echo "+v)
		info, err := docker.New(docker.Options{Bin: bin}).Check(context.Background())
		if ok && (err != nil || info.Version != v) {
			t.Errorf("%s: %+v, %v; want accepted", v, info, err)
		}
		if !ok && (!errors.Is(err, runtime.ErrUnavailable) || !strings.Contains(err.Error(), "too old: Carapace needs "+docker.MinDockerVersion)) {
			t.Errorf("%s: %v; want too old", v, err)
		}
	}
}
