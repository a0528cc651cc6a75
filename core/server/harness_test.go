package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/cmd/wiring/coretest"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/prove"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/core/server"
	"github.com/carapace-dev/carapace/internal/clock"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/plugins"
)

// bins are the real binaries under test, built once by TestMain. relay,
// the model API relay, is beside ipc, where the test image's build looks
// for it.
var bins struct{ ipc, relay, carapace, oopkit, rawpeer, probe string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cpbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.ipc, bins.carapace, bins.oopkit = filepath.Join(dir, "ipc"), filepath.Join(dir, "carapace"), filepath.Join(dir, "oopkit")
	bins.relay, bins.rawpeer = filepath.Join(dir, "ipc-relay"), filepath.Join(dir, "rawpeer")
	bins.probe = filepath.Join(dir, "linux-"+goruntime.GOARCH, "carapace-probe")
	for out, pkg := range map[string]string{bins.probe: "../../cmd/carapace-probe", bins.ipc: "../../cmd/ipc", bins.relay: "../../cmd/ipc-relay", bins.carapace: "../../cmd/carapace", bins.oopkit: "./testdata/oopkit",
		bins.rawpeer: "../pluginhost/testdata/rawpeer"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out == bins.probe { // the box's probe: static linux, as make build puts it
			cmd.Env = append(cmd.Env, "GOOS=linux")
		}
		if out == bins.carapace { // the core links the memory plugin: SQLite with FTS5
			cmd = exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", out, pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, b)
			os.Exit(1)
		}
	}
	code := m.Run()
	removeTestImage()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testkit is a plugin for the end-to-end tests: it counts calls and can
// fail in every way a handler can.
type testkit struct {
	calls    atomic.Int64
	shutdown atomic.Int64
}

const testkitManifest = `{
  "description": "test plugin", "version": "1.0.0", "app_compat": ">=0.1.0", "author": {"name": "tests"},
  "provides": {"channels": [], "tools": [
    {"name": "tk_count", "description": "count calls; optionally sleep first", "risk_level": "low",
     "arguments_schema": {"type": "object", "additionalProperties": false, "properties": {"sleep_ms": {"type": "integer", "minimum": 0, "maximum": 60000}}}},
    {"name": "tk_fail", "description": "fail in the given way", "risk_level": "low",
     "arguments_schema": {"type": "object", "additionalProperties": false, "required": ["mode"], "properties": {
       "mode": {"type": "string", "enum": ["tool_error", "reserved_code", "panic", "error", "nil", "huge", "hang", "unserializable", "secret"]}}}}
  ]},
  "subscribes": []
}`

var _ plugin.Handler = (*testkit)(nil)

func (k *testkit) Init(context.Context, map[string]any, plugin.Services) error { return nil }
func (k *testkit) Shutdown(context.Context) error                              { k.shutdown.Add(1); return nil }

func (k *testkit) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	switch req.Tool {
	case "tk_count":
		if n, ok := req.Arguments["sleep_ms"].(json.Number); ok {
			ms, _ := n.Int64()
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return map[string]any{"count": k.calls.Add(1)}, nil
	case "tk_fail":
		switch req.Arguments["mode"] {
		case "tool_error":
			return nil, &plugin.ToolError{Code: "HANDLER_ERROR", Message: "the widget is out of stock", Retriable: true}
		case "reserved_code":
			return nil, &plugin.ToolError{Code: "RATE_LIMITED", Message: "upstream API said slow down", Retriable: true, RetryAfter: 7}
		case "panic":
			panic("testkit exploded at /home/secret/path.go")
		case "error":
			return nil, errors.New("dial tcp 10.0.0.7:5432: connection refused; password=hunter2")
		case "nil":
			return nil, nil
		case "huge":
			return map[string]any{"blob": strings.Repeat("x", ipc.MaxResponseBytes)}, nil
		case "hang":
			select {} // ignores its context on purpose
		case "unserializable":
			return map[string]any{"ch": make(chan int)}, nil
		case "secret":
			return map[string]any{
				"note":   "use key sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA for that",
				"nested": map[string]any{"authorization": "Bearer abc.def.ghi", "list": []any{"ghp_0123456789abcdefghij0123456789abcdef"}},
			}, nil
		}
	}
	return nil, plugin.NewToolError("no such tool", false)
}

// testCore is a core started in process with server.Run — the same code
// `carapace serve` runs — plus the testkit plugin.
type testCore struct {
	*coretest.Core
	Kit *testkit
}

// coreOptions vary startCoreWith.
type coreOptions struct {
	Config      string         // config.toml
	Setup       func(home.Dir) // runs on the fresh home before the core starts
	InitTimeout time.Duration  // 0: the default
	NoTestkit   bool           // leave the in-process testkit plugin out
	// Builtins, if set, edits the list of built-in plugins.
	Builtins     func([]loader.Builtin) []loader.Builtin
	BriefTimeout time.Duration // 0: the default
	NoShadows    bool          // no shadow mounts (server.Options.NoShadows)
	// NewEngine replaces the real container engines (nil: the real ones).
	NewEngine func(name string) (runtime.Engine, error)
	// Bundled are first-party out-of-process plugins shipped beside the core.
	Bundled []loader.Bundled
	// ConfineSupport replaces what the kernel can confine plugins with.
	ConfineSupport *confine.Support
	// EgressNet replaces the network under the plugins' egress points.
	EgressNet *loader.EgressNet
	// Revival says how crashed plugins are started again (zero: the defaults).
	Revival loader.Revival
	// ProbeBinary and ProveFaults are server.Options'.
	ProbeBinary string
	ProveFaults prove.Faults
	// Clock is server.Options' (nil: the system clock).
	Clock clock.Clock
}

// startCore runs a core in a fresh short home with config as config.toml.
func startCore(t *testing.T, config string) *testCore {
	t.Helper()
	return startCoreWith(t, coreOptions{Config: config})
}

// newHome makes a fresh short home, removed at the end of the test.
func newHome(t testing.TB) home.Dir { return coretest.NewHome(t) }

func startCoreWith(t testing.TB, o coreOptions) *testCore {
	t.Helper()
	c, err := runCore(t, newHome(t), o)
	if err != nil {
		t.Fatalf("core did not start: %v", err)
	}
	return c
}

// runCore starts a core on an existing home; it returns Run's error if the
// core stops before it is ready.
func runCore(t testing.TB, h home.Dir, o coreOptions) (*testCore, error) {
	t.Helper()
	kit := &testkit{}
	builtins := plugins.Builtins()
	if !o.NoTestkit {
		builtins = append(builtins, loader.Builtin{Name: "testkit", Manifest: []byte(testkitManifest), New: func(loader.Env) plugin.Handler { return kit }})
	}
	if o.Builtins != nil {
		builtins = o.Builtins(builtins)
	}
	c, err := coretest.Start(t, h, coretest.Options{Config: o.Config, Setup: o.Setup, Server: server.Options{NewEngine: o.NewEngine, Bundled: o.Bundled,
		Builtins: builtins, InitTimeout: o.InitTimeout, BriefTimeout: o.BriefTimeout, NoShadows: o.NoShadows,
		ConfineSupport: o.ConfineSupport, EgressNet: o.EgressNet, Revival: o.Revival, ProbeBinary: o.ProbeBinary, ProveFaults: o.ProveFaults,
		Clock: o.Clock,
	}})
	if err != nil {
		return nil, err
	}
	return &testCore{Core: c, Kit: kit}, nil
}

// ipcRun is what one run of bin/ipc produced.
type ipcRun struct {
	Stdout, Stderr string
	Code           int
	Result         map[string]any // stdout parsed, exit 0
	Err            *ipc.Error     // stderr's last line parsed, exit 1
}

// runIPC runs the real bin/ipc against a session socket. env adds variables.
func runIPC(t *testing.T, socket string, env []string, args ...string) ipcRun {
	t.Helper()
	return runIPCStdin(t, socket, env, nil, args...)
}

func runIPCStdin(t *testing.T, socket string, env []string, stdin []byte, args ...string) ipcRun {
	t.Helper()
	cmd := exec.Command(bins.ipc, args...)
	cmd.Env = append([]string{"CARAPACE_IPC_ENDPOINT=ipc://" + socket, "PATH=/usr/bin:/bin"}, env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := ipcRun{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		t.Fatalf("run ipc: %v", err)
	}
	parseIPCRun(t, &r)
	return r
}

// parseIPCRun fills r.Result (exit 0) or r.Err (exit 1, the last line of
// stderr), failing the test on output that breaks the ipc contract or on a
// Go stack trace.
func parseIPCRun(t *testing.T, r *ipcRun) {
	t.Helper()
	switch r.Code {
	case 0:
		if err := json.Unmarshal([]byte(r.Stdout), &r.Result); err != nil {
			t.Fatalf("ipc exit 0 but stdout is not a JSON object: %q", r.Stdout)
		}
	case 1:
		lines := scanLines(r.Stderr)
		r.Err = &ipc.Error{}
		if len(lines) == 0 || json.Unmarshal([]byte(lines[len(lines)-1]), r.Err) != nil || r.Err.Code == "" {
			t.Fatalf("ipc exit 1 but stderr's last line is not an error object: %q", r.Stderr)
		}
	}
	if stackTrace.MatchString(r.Stderr) {
		t.Fatalf("stack trace on stderr: %q", r.Stderr)
	}
}

// stackTrace matches what a Go panic prints.
var stackTrace = regexp.MustCompile(`(?m)^(panic: |goroutine \d+ \[)`)

// runCLI runs the real carapace binary against home.
func runCLI(t *testing.T, h home.Dir, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bins.carapace, append([]string{"--home", string(h)}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run carapace: %v", err)
	}
	return out.String(), errb.String(), code
}

// waitFor polls cond until it holds or 15s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, 15*time.Second, what, cond)
}

// waitWithin is waitFor with a bound of the caller's: for a wait that
// includes an agent container's run.
func waitWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wantError checks an ipc run failed with code, and stage/field when given.
func wantError(t *testing.T, r ipcRun, code ipc.Code, stage int, field string) {
	t.Helper()
	if r.Code != 1 || r.Err == nil {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 with %s", r.Code, r.Stdout, r.Stderr, code)
	}
	if r.Err.Code != code || r.Err.Stage != stage || r.Err.Field != field {
		t.Fatalf("error %+v; want code %s stage %d field %q", r.Err, code, stage, field)
	}
}

// scanLines returns the non-empty lines of s.
func scanLines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}
