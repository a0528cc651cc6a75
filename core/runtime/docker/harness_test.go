package docker_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/cmd/wiring/coretest"
	"github.com/carapace-dev/carapace/core/agentimage"
	"github.com/carapace-dev/carapace/core/agentimage/agentimagetest"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/core/runtime/docker"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// What TestMain prepares for every test.
var (
	eng       *docker.Engine
	engInfo   runtime.Info
	testImage string        // the offline test image, built for this run
	runID     string        // LabelInstance of every container this run starts
	buildTime time.Duration // how long the image took to build
)

// TestMain builds the static linux ipc and the test image with the
// engine's own architecture, runs the tests and removes the image and any
// container left behind. Without a Docker engine (or Debian's static
// busybox, which the image is built with) the package fails in the
// project's CI and its tests are skipped elsewhere, saying why
// (testutil.MissingMain).
func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	flag.Parse()
	ctx := context.Background()
	eng = docker.New(docker.Options{})
	var err error
	if engInfo, err = eng.Check(ctx); err != nil {
		return testutil.MissingMain(fmt.Sprintf("the Docker engine is unreachable, and these tests run containers: %v", err))
	}
	if _, err := os.Stat(agentimagetest.DefaultBusybox); err != nil {
		return testutil.MissingMain(fmt.Sprintf("the test image is built with Debian's static busybox (apt-get install busybox-static): %v", err))
	}
	arch, err := agentimage.EngineArch(ctx, "docker")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "cpdocker")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ipcBin, relayBin := filepath.Join(dir, "ipc"), filepath.Join(dir, "ipc-relay")
	for out, pkg := range map[string]string{ipcBin: "github.com/carapace-dev/carapace/cmd/ipc", relayBin: "github.com/carapace-dev/carapace/cmd/ipc-relay"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if b, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: build %s for linux/%s: %v\n%s", filepath.Base(out), arch, err, b)
			return 1
		}
	}
	runID = "e2e-" + randHex(6)
	testImage = "carapace-agent-test:" + runID
	start := time.Now()
	if err := agentimagetest.BuildTest(ctx, agentimage.Options{Engine: "docker", Tag: testImage, IPC: ipcBin, Relay: relayBin}); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	buildTime = time.Since(start)
	defer func() {
		// Containers this run left (none, if every test cleaned up), then
		// the image: only what this run created.
		names, _ := eng.List(ctx, runtime.LabelInstance, runID)
		for _, n := range names {
			fmt.Fprintf(os.Stderr, "removing container %s left by a test\n", n)
			_ = eng.Stop(ctx, n)
		}
		if err := agentimagetest.Remove(testImage); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return m.Run()
}

// randHex returns n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// box is one container run by the Engine under test.
type box struct {
	Script  string   // run as /bin/sh -c Script (through test-agent --exec)
	Cmd     []string // the command, when Script is empty
	Image   string   // empty: the test image
	Mounts  []runtime.Mount
	Env     []string
	User    string
	Limits  *runtime.Limits // nil: runtime.DefaultLimits
	Stdout  io.Writer       // also receives the output, as it comes
	Timeout time.Duration   // 0: 2 minutes
}

// result is what a container run produced.
type result struct {
	Name           string
	Exit           int
	Err            error
	Stdout, Stderr string
}

// Output is stdout and stderr, for messages.
func (r result) Output() string { return r.Stdout + r.Stderr }

// run starts b with the Engine and waits for it; the container is removed
// (by label) when the test ends, whatever happened.
func run(t *testing.T, ctx context.Context, b box) result {
	t.Helper()
	s := spec(t, b)
	if b.Timeout == 0 {
		b.Timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	var stdout, stderr testutil.Buffer
	var w io.Writer = &stdout
	if b.Stdout != nil {
		w = io.MultiWriter(&stdout, b.Stdout)
	}
	exit, err := eng.Run(ctx, s, runtime.IO{Stdout: w, Stderr: &stderr})
	r := result{Name: s.Name, Exit: exit, Err: err, Stdout: stdout.String(), Stderr: stderr.String()}
	if testing.Verbose() {
		t.Logf("container %s: exit %d, err %v\n--- stdout\n%s--- stderr\n%s", s.Name, exit, err, r.Stdout, r.Stderr)
	}
	return r
}

// spec makes the Spec of b, named and labelled for this run, and registers
// its removal.
func spec(t *testing.T, b box) runtime.Spec {
	t.Helper()
	name := "carapace-e2e-" + randHex(6)
	s := runtime.Spec{
		Name:   name,
		Image:  b.Image,
		Labels: map[string]string{runtime.LabelSession: name, runtime.LabelInstance: runID, runtime.LabelVersion: "test"},
		Mounts: b.Mounts,
		Env:    b.Env,
		Cmd:    b.Cmd,
		User:   b.User,
		Limits: runtime.DefaultLimits,
	}
	if s.Image == "" {
		s.Image = testImage
	}
	if b.Script != "" {
		s.Cmd = []string{"--exec", "/bin/sh", "-c", b.Script}
	}
	if b.Limits != nil {
		s.Limits = *b.Limits
	}
	t.Cleanup(func() { removeByLabel(t, runtime.LabelSession, name) })
	return s
}

// removeByLabel removes every container whose label key is value.
func removeByLabel(t *testing.T, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names, err := eng.List(ctx, key, value)
	if err != nil {
		t.Errorf("cleanup: %v", err)
	}
	for _, n := range names {
		if err := eng.Stop(ctx, n); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// lines returns the lines of s that start with prefix, without it.
func lines(s, prefix string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			out = append(out, rest)
		}
	}
	return out
}

// workspace makes a host folder the agent (uid 1000) can write to.
func workspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startCore starts a core, with server.Run as `carapace serve` does, on a
// fresh home with config as config.toml; setup runs on the home before the
// core starts. The core stops when the test ends, and an error it stops
// with fails the test.
func startCore(t *testing.T, config string, setup func(home.Dir)) *coretest.Core {
	t.Helper()
	c := coretest.MustStart(t, coretest.Options{Config: config, Setup: setup})
	t.Cleanup(func() {
		if err := c.Stop(t); err != nil {
			t.Errorf("core stopped with %v", err)
		}
	})
	return c
}

// socketMount mounts a session's socket where ipc looks for it.
func socketMount(s api.Session) runtime.Mount {
	return runtime.Mount{Source: s.Socket, Target: runtime.SocketPath}
}

// lineWriter calls fn with each complete line written to it, as it comes.
type lineWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	fn  func(line string, at time.Time)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf.Next(i + 1))
		w.fn(strings.TrimSuffix(line, "\n"), now)
	}
}
