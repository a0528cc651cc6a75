package applecontainer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeBin is the fake `container` (testdata/fakecontainer), built once by
// TestMain.
var fakeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakecontainer")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeBin = filepath.Join(dir, "container")
	cmd := exec.Command("go", "build", "-o", fakeBin, "./testdata/fakecontainer")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the fake container: %v\n%s", err, b)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fake is one test's fake `container`: a symbolic link to it in a
// directory of the test's, next to its environment (fake.env), so that
// tests can run in parallel.
type fake struct {
	bin   string // the script: Options.Bin
	log   string // the argv log
	state string // the containers the fake pretends to run
}

// newFake returns a fake `container` that replays version's recorded
// outputs, with the extra FAKE_CONTAINER_* variables in env.
func newFake(t *testing.T, version string, env map[string]string) *fake {
	t.Helper()
	dir := t.TempDir()
	data, err := filepath.Abs("testdata/versions")
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{bin: filepath.Join(dir, "container"), log: filepath.Join(dir, "argv.log"), state: filepath.Join(dir, "state")}
	if err := os.Mkdir(f.state, 0o755); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"FAKE_CONTAINER_LOG":     f.log,
		"FAKE_CONTAINER_VERSION": version,
		"FAKE_CONTAINER_DATA":    data,
		"FAKE_CONTAINER_STATE":   f.state,
	}
	// A version without an appRoot/ of its own reports one with a kernel
	// installed, as a Mac that has run containers before has.
	if _, err := os.Stat(filepath.Join(data, version, "appRoot")); err != nil {
		vars["FAKE_CONTAINER_APP_ROOT"] = appRootWithKernel(t)
	}
	maps.Copy(vars, env)
	b, err := json.Marshal(vars)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fake.env"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fakeBin, f.bin); err != nil {
		t.Fatal(err)
	}
	return f
}

// appRootWithKernel returns an appRoot whose kernels/ holds the default
// kernel, as `container system kernel set --recommended` leaves it: a
// symbolic link to the kernel file.
func appRootWithKernel(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "com.apple.container")
	kernels := filepath.Join(root, "kernels")
	if err := os.MkdirAll(kernels, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kernels, "vmlinux-6.12.28-153"), []byte("not a kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("vmlinux-6.12.28-153", filepath.Join(kernels, "default.kernel-arm64")); err != nil {
		t.Fatal(err)
	}
	return root
}

// engine returns an Engine that runs f, with short waits.
func (f *fake) engine(t *testing.T) *Engine {
	t.Helper()
	e := New(Options{Bin: f.bin, Logger: testLogger(t)})
	e.stopRetry = 100 * time.Millisecond
	return e
}

// calls returns the argv of every call of the fake so far.
func (f *fake) calls(t *testing.T) [][]string {
	t.Helper()
	file, err := os.Open(f.log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var calls [][]string
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var argv []string
		if err := json.Unmarshal(sc.Bytes(), &argv); err != nil {
			t.Fatalf("argv log: %v: %s", err, sc.Bytes())
		}
		calls = append(calls, argv)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return calls
}

// commands returns the subcommand of every call, e.g. "run", "stop".
func (f *fake) commands(t *testing.T) []string {
	t.Helper()
	var cmds []string
	for _, argv := range f.calls(t) {
		if len(argv) > 0 {
			cmds = append(cmds, argv[0])
		}
	}
	return cmds
}

// containers returns the containers the fake thinks exist.
func (f *fake) containers(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(f.state)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".stop") {
			names = append(names, e.Name())
		}
	}
	return names
}

// testLogger logs to t.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
