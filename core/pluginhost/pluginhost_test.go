package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/testutil/leaktest"
	"go.uber.org/goleak"
)

func TestHappyPath(t *testing.T) {
	f := newFixture(t, bin.plugin, "happy")
	p := f.startInit(t, map[string]any{"greeting": "hi"}, nil)
	ctx := hangCtx(t)

	args := map[string]any{"n": 42, "f": 1.5, "s": "x", "list": []any{1, "a"}, "obj": map[string]any{"k": true}}
	out, err := p.Invoke(ctx, request("echo", args))
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := map[string]any{"n": "json.Number", "f": "json.Number", "s": "string", "list": "[]interface {}", "obj": "map[string]interface {}"}
	if !reflect.DeepEqual(out["types"], wantTypes) {
		t.Errorf("argument types in the plugin = %v, want %v", out["types"], wantTypes)
	}
	gotArgs := out["arguments"].(map[string]any)
	if gotArgs["n"] != json.Number("42") || gotArgs["f"] != json.Number("1.5") || gotArgs["s"] != "x" {
		t.Errorf("arguments came back as %#v", gotArgs)
	}
	for k, want := range map[string]string{"tool": "echo", "group": "main", "session": "s-1", "correlation": "c-1",
		"envelope_id": "e-1", "time": "2026-03-04T05:06:07.89Z"} {
		if out[k] != want {
			t.Errorf("%s = %v, want %q", k, out[k], want)
		}
	}

	for i := 1; i <= 2; i++ {
		if err := p.HandleEvent(ctx, &plugin.Event{Topic: "message.inbound", Group: "main", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := p.Invoke(ctx, request("events", nil)); err != nil || !reflect.DeepEqual(out["events"], []any{"message.inbound:1", "message.inbound:2"}) {
		t.Errorf("events seen by the plugin: %v, %v", out, err)
	}
	if v, err := p.Verify(ctx); err != nil || v == nil || !v.OK || v.Message != "all good" {
		t.Errorf("Verify = %+v, %v", v, err)
	}
	pv, err := p.Preview(ctx, request("echo", map[string]any{"n": 1}))
	if err != nil || pv.Text != "would run echo with {\"n\":1}\nand digest " || pv.Digest != plugin.Digest([]byte(`{"n":1}`)) {
		t.Errorf("Preview = %+v, %v", pv, err)
	}
	if pv, err := p.Preview(ctx, request("blank", nil)); err == nil {
		t.Errorf("a null preview: %+v; want an error", pv)
	}
	dreq := request("echo", nil)
	dreq.PreviewDigest = "sha256:abc"
	if out, err := p.Invoke(ctx, dreq); err != nil || out["preview_digest"] != "sha256:abc" {
		t.Errorf("the approved digest did not reach the handler: %v, %v", out, err)
	}
	b, err := p.MemoryBrief(ctx, "family")
	if err != nil || b == nil || len(b.Entries) != 1 || b.Entries[0].Content != "brief for family" || b.EntryCount != 3 || b.BriefCount != 2 ||
		!b.GeneratedAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("MemoryBrief = %+v, %v", b, err)
	}

	pid := p.PID()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	waitDone(t, p)
	processGone(t, pid)
	if p.Alive() || p.ExitErr() != nil {
		t.Errorf("after Shutdown: Alive %v, ExitErr %v", p.Alive(), p.ExitErr())
	}
	if _, err := os.Stat(filepath.Join(f.spec.SocketDir, "happy.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file left behind: %v", err)
	}
	if _, err := p.Invoke(ctx, request("echo", nil)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Invoke after Shutdown = %v, want ErrUnavailable", err)
	}
	if err := p.Shutdown(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("second Shutdown = %v, want ErrUnavailable", err)
	}
	if len(f.exits) != 0 {
		t.Errorf("OnExit called after Shutdown: %v", <-f.exits)
	}
}

func TestShutdown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  map[string]any
		timeout time.Duration
		wantErr string // "" for success
	}{
		{"clean", nil, hang, ""},
		{"handler error", map[string]any{"fail_shutdown": true}, hang, "could not flush"},
		{"hangs: killed after ctx", map[string]any{"hang_shutdown": true}, 300 * time.Millisecond, "killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, bin.plugin, "shut")
			p := f.startInit(t, tc.config, nil)
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			err := p.Shutdown(ctx)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Shutdown = %v, want %q", err, tc.wantErr)
			}
			select {
			case <-p.Done(): // Shutdown returns only once the process is gone
			default:
				t.Fatal("Shutdown returned before the process was cleaned up")
			}
			processGone(t, p.PID())
			if len(f.exits) != 0 {
				t.Error("OnExit called after Shutdown")
			}
		})
	}
}

func TestConcurrentInvokes(t *testing.T) {
	f := newFixture(t, bin.plugin, "concurrent")
	p := f.startInit(t, nil, nil)
	ctx := hangCtx(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each call returns only once all n are in the plugin at once.
			out, err := p.Invoke(ctx, request("barrier", map[string]any{"n": n}))
			if err == nil && out["ok"] != true {
				err = fmt.Errorf("result %v", out)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("barrier call: %v (calls did not overlap?)", err)
		}
	}
}

func TestTimeoutCancelsTheCall(t *testing.T) {
	f := newFixture(t, bin.plugin, "timeout")
	p := f.startInit(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := p.Invoke(ctx, request("block", map[string]any{"id": "first"}))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Invoke = %v, want context.DeadlineExceeded", err)
	}
	// The plugin saw its ctx cancelled, and is still serving.
	deadline := time.Now().Add(hang)
	for {
		out, err := p.Invoke(hangCtx(t), request("cancelled", nil))
		if err != nil {
			t.Fatal(err)
		}
		if reflect.DeepEqual(out["cancelled"], []any{"first"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin never saw the cancel: %v", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !p.Alive() {
		t.Fatal("process not alive after a timed-out call")
	}
}

func TestCrashMidCall(t *testing.T) {
	f := newFixture(t, bin.plugin, "crashy")
	p := f.startInit(t, nil, nil)
	ctx := hangCtx(t)
	_, err := p.Invoke(ctx, request("crash", nil))
	if !errors.Is(err, ErrCrashed) || !strings.Contains(err.Error(), "exited with status 3") {
		t.Fatalf("in-flight call = %v, want ErrCrashed with the exit status", err)
	}
	if _, err := p.Invoke(ctx, request("echo", nil)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("later call = %v, want ErrUnavailable", err)
	}
	waitDone(t, p)
	if len(f.exits) != 1 {
		t.Fatalf("OnExit called %d times, want 1", len(f.exits))
	}
	if err := <-f.exits; !errors.Is(err, ErrCrashed) {
		t.Errorf("OnExit(%v), want ErrCrashed", err)
	}
	if !errors.Is(p.ExitErr(), ErrCrashed) || p.Alive() {
		t.Errorf("ExitErr %v, Alive %v", p.ExitErr(), p.Alive())
	}
	p.Kill() // after the fact: no effect, no OnExit
	if len(f.exits) != 0 {
		t.Error("OnExit called again")
	}
}

func TestProcessGroupDies(t *testing.T) {
	for _, stop := range []string{"kill", "shutdown"} {
		t.Run(stop, func(t *testing.T) {
			f := newFixture(t, bin.plugin, "spawner")
			p := f.startInit(t, nil, nil)
			out, err := p.Invoke(hangCtx(t), request("spawn", nil))
			if err != nil {
				t.Fatal(err)
			}
			child, err := strconv.Atoi(string(out["pid"].(json.Number)))
			if err != nil {
				t.Fatal(err)
			}
			if stop == "kill" {
				p.Kill()
				p.Kill() // idempotent
			} else if err := p.Shutdown(hangCtx(t)); err != nil {
				t.Fatal(err)
			}
			waitDone(t, p)
			processGone(t, p.PID())
			processGone(t, child)
			if len(f.exits) != 0 {
				t.Error("OnExit called after", stop)
			}
		})
	}
}

func TestKillFailsInFlightCalls(t *testing.T) {
	f := newFixture(t, bin.plugin, "killed")
	p := f.startInit(t, nil, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := p.Invoke(hangCtx(t), request("block", map[string]any{"id": "x"}))
		errc <- err
	}()
	// Wait until the call is in flight, then kill.
	for deadline := time.Now().Add(hang); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		n := len(p.calls)
		p.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("call never in flight")
		}
	}
	p.Kill()
	if err := <-errc; !errors.Is(err, ErrCrashed) {
		t.Fatalf("in-flight call after Kill = %v, want ErrCrashed", err)
	}
	if _, err := p.Invoke(hangCtx(t), request("echo", nil)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("call after Kill = %v, want ErrUnavailable", err)
	}
}

func TestGarbageCutsOff(t *testing.T) {
	for _, tc := range []struct{ name, reason string }{
		{"garbage-json", "not a protocol message"},
		{"oversized", "frame too large"},
		{"second-hello", "said hello twice"},
		{"unknown-type", `type "surprise"`},
		{"bad-reply-id", "a call never made"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, bin.raw, tc.name)
			p := f.start(t)
			// The peer answers its first call (init) with the garbage.
			err := p.Init(hangCtx(t), nil, &fakeServices{})
			if !errors.Is(err, ErrCrashed) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("in-flight call = %v, want ErrCrashed mentioning %q", err, tc.reason)
			}
			waitDone(t, p)
			processGone(t, p.PID())
			select {
			case err := <-f.exits:
				if !errors.Is(err, ErrCrashed) || !strings.Contains(err.Error(), tc.reason) {
					t.Errorf("OnExit(%v)", err)
				}
			default:
				t.Error("OnExit not called")
			}
			if _, err := p.Invoke(hangCtx(t), request("x", nil)); !errors.Is(err, ErrUnavailable) {
				t.Errorf("call after the cut-off = %v, want ErrUnavailable", err)
			}
			if len(f.logs.find("plugin cut off for breaking the protocol")) != 1 {
				t.Error("cut-off not logged")
			}
		})
	}
}

func TestStartFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		exe     string
		wantErr string
	}{
		{"wrong-token", bin.raw, "no hello within 300ms"},
		{"wrong-version", bin.raw, "protocol version 99"},
		{"exit-early", bin.raw, "exited with status 7 before saying hello"},
		{"missing-exec", "/nonexistent/handler", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.exe, tc.name)
			f.spec.HelloTimeout = 300 * time.Millisecond
			p, err := Start(hangCtx(t), f.spec)
			if err == nil {
				p.Kill()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Start = %v, want it to say %q", err, tc.wantErr)
			}
			if b, err := os.ReadFile(filepath.Join(f.spec.DataDir, "pid")); err == nil {
				pid, _ := strconv.Atoi(string(b))
				processGone(t, pid)
			} else if tc.exe == bin.raw {
				t.Fatalf("the handler never ran: %v", err)
			}
			if _, err := os.Stat(filepath.Join(f.spec.SocketDir, tc.name+".sock")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("socket left behind: %v", err)
			}
			if len(f.exits) != 0 {
				t.Error("OnExit called for a failed start")
			}
		})
	}
}

func TestStartTwice(t *testing.T) {
	f := newFixture(t, bin.plugin, "twice")
	f.start(t)
	if p, err := Start(hangCtx(t), f.spec); err == nil || !strings.Contains(err.Error(), "already running") {
		if p != nil {
			p.Kill()
		}
		t.Fatalf("second Start = %v, want already running", err)
	}
}

func TestResultShapes(t *testing.T) {
	f := newFixture(t, bin.raw, "results")
	p := f.startInit(t, nil, nil)
	for _, tc := range []struct {
		raw     string
		want    map[string]any
		badType string
	}{
		{raw: `{"a":1,"b":{"c":[2.5]}}`, want: map[string]any{"a": json.Number("1"), "b": map[string]any{"c": []any{json.Number("2.5")}}}},
		{raw: `{}`, want: map[string]any{}},
		{raw: `null`},
		{raw: ``}, // no result at all: null
		{raw: `[1,2]`, badType: "array"},
		{raw: `"text"`, badType: "string"},
		{raw: `-3.5`, badType: "number"},
		{raw: `true`, badType: "boolean"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			out, err := p.Invoke(hangCtx(t), request("x", map[string]any{"raw": tc.raw}))
			if tc.badType != "" {
				var re *ResultError
				if !errors.As(err, &re) || re.JSONType != tc.badType {
					t.Fatalf("Invoke = %v, %v; want ResultError %s", out, err, tc.badType)
				}
				if want := "handler returned a JSON " + tc.badType + ", not an object"; err.Error() != want {
					t.Errorf("message %q, want %q", err, want)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(out, tc.want) {
				t.Fatalf("Invoke = %#v, %v; want %#v", out, err, tc.want)
			}
		})
	}
}

func TestHandlerErrors(t *testing.T) {
	f := newFixture(t, bin.plugin, "errors")
	p := f.startInit(t, nil, nil)
	for _, tc := range []struct {
		tool     string
		args     map[string]any
		wantTool *plugin.ToolError // a ToolError the agent sees
		wantText string            // else: an internal error containing this
	}{
		{tool: "toolerror", wantTool: &plugin.ToolError{Code: "HANDLER_ERROR", Message: "the date is in the past", Retriable: true, Field: "date", RetryAfter: 7}},
		{tool: "nosuchtool", wantTool: &plugin.ToolError{Code: "HANDLER_ERROR", Message: "unknown tool nosuchtool"}},
		{tool: "big", args: map[string]any{"n": pluginproto.MaxResult}, wantTool: &plugin.ToolError{Code: "HANDLER_ERROR", Message: "Response exceeded maximum size (1048576 bytes)"}},
		{tool: "internal", wantText: "secret detail"},
		{tool: "panic", wantText: "handler panicked: boom"},
		{tool: "unencodable", wantText: "not encodable as JSON"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			out, err := p.Invoke(hangCtx(t), request(tc.tool, tc.args))
			if out != nil || err == nil {
				t.Fatalf("Invoke = %v, %v", out, err)
			}
			te, isTool := plugin.AsToolError(err)
			if tc.wantTool != nil {
				if !isTool || !reflect.DeepEqual(te, tc.wantTool) {
					t.Fatalf("Invoke error = %#v, want %#v", err, tc.wantTool)
				}
				return
			}
			if isTool || !strings.Contains(err.Error(), tc.wantText) || errors.Is(err, ErrCrashed) {
				t.Fatalf("Invoke error = %v, want an internal error with %q", err, tc.wantText)
			}
		})
	}
	if out, err := p.Invoke(hangCtx(t), request("null", nil)); out != nil || err != nil {
		t.Errorf("null result = %v, %v; want nil, nil", out, err)
	}
	if _, err := p.Invoke(hangCtx(t), request("echo", nil)); err != nil || !p.Alive() {
		t.Fatalf("after the panic: %v, alive %v", err, p.Alive())
	}
}

func TestInitErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		config   map[string]any
		category string
		text     string
	}{
		{"categorised", map[string]any{"fail": true}, plugin.CategoryAuth, "token rejected"},
		{"credential missing", map[string]any{"read_credential": "nope"}, plugin.CategoryConfig, "credential not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, bin.plugin, "init")
			p := f.start(t)
			err := p.Init(hangCtx(t), tc.config, &fakeServices{})
			var ie *plugin.InitError
			if !errors.As(err, &ie) || plugin.CategoryOf(err) != tc.category || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Init = %v, want an InitError %s with %q", err, tc.category, tc.text)
			}
		})
	}
	// A service call made within Init is scoped to the Init call, as one
	// made within Invoke is to the Invoke: it carries the Init ctx's
	// values (the core marks them so that a call that would wait for the
	// core to finish starting fails at once instead).
	t.Run("a call within init carries the init ctx", func(t *testing.T) {
		f := newFixture(t, bin.plugin, "init")
		p := f.start(t)
		svc := &fakeServices{}
		if err := p.Init(context.WithValue(hangCtx(t), sessionKey{}, "the-init-call"), map[string]any{"read_credential": "api_key"}, svc); err != nil {
			t.Fatal(err)
		}
		if got := svc.calls(); !slices.Equal(got, []string{"ReadCredential@the-init-call"}) {
			t.Fatalf("services saw %v, want the call scoped to Init", got)
		}
	})
	t.Run("credential during init", func(t *testing.T) {
		f := newFixture(t, bin.plugin, "init")
		svc := &fakeServices{}
		f.startInit(t, map[string]any{"read_credential": "api_key"}, svc)
		if got := svc.calls(); !slices.Equal(got, []string{"ReadCredential@-"}) {
			t.Fatalf("services saw %v", got)
		}
	})
}

func TestPin(t *testing.T) {
	exe, err := os.ReadFile(bin.plugin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(exe)
	other := sha256.Sum256([]byte("another build"))
	for _, tc := range []struct {
		name, pin string
		ok        bool
	}{
		{"matches", hex.EncodeToString(sum[:]), true},
		{"upper-case hex", strings.ToUpper(hex.EncodeToString(sum[:])), true},
		{"another file's", hex.EncodeToString(other[:]), false},
		{"not hex", "sha256:" + hex.EncodeToString(sum[:]), false},
		{"truncated", hex.EncodeToString(sum[:16]), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, bin.plugin, "pinned")
			f.spec.SHA256 = tc.pin
			p, err := Start(hangCtx(t), f.spec)
			starts, _ := os.ReadFile(filepath.Join(f.spec.DataDir, "starts"))
			if !tc.ok {
				if !errors.Is(err, ErrPinMismatch) {
					t.Fatalf("Start = %v, want ErrPinMismatch", err)
				}
				if len(starts) != 0 {
					t.Fatal("the executable ran despite the pin")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p.Kill()
			waitDone(t, p)
			if n := strings.Count(string(starts), "\n"); n != 1 {
				t.Fatalf("executable started %d times", n)
			}
		})
	}
}

func TestMinimalEnvironment(t *testing.T) {
	t.Setenv("CARAPACE_TEST_CANARY", "must not leak")
	f := newFixture(t, bin.plugin, "env")
	p := f.startInit(t, nil, nil)
	out, err := p.Invoke(hangCtx(t), request("env", nil))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range out["env"].([]any) {
		k, v, _ := strings.Cut(kv.(string), "=")
		env[k] = v
	}
	sock := filepath.Join(f.spec.SocketDir, "env.sock")
	want := map[string]string{
		"PATH":                  "/usr/local/bin:/usr/bin:/bin",
		"HOME":                  f.spec.DataDir,
		"TMPDIR":                filepath.Join(f.spec.DataDir, "tmp"),
		"LANG":                  "C.UTF-8",
		"GOMAXPROCS":            "1",
		pluginproto.EnvEndpoint: "zipc://" + sock,
		pluginproto.EnvName:     "env",
		pluginproto.EnvData:     f.spec.DataDir,
		pluginproto.EnvToken:    env[pluginproto.EnvToken],
		pluginproto.EnvConnFD:   "3",
	}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("environment = %v\nwant %v", env, want)
	}
	if tok, err := hex.DecodeString(env[pluginproto.EnvToken]); err != nil || len(tok) != 32 {
		t.Errorf("token %q is not 64 hex characters", env[pluginproto.EnvToken])
	}
	if wd, _ := filepath.EvalSymlinks(out["cwd"].(string)); wd != mustEval(t, f.spec.Dir) {
		t.Errorf("cwd = %v, want %s", out["cwd"], f.spec.Dir)
	}
	for path, mode := range map[string]os.FileMode{
		f.spec.DataDir: 0o700 | os.ModeDir, filepath.Join(f.spec.DataDir, "tmp"): 0o700 | os.ModeDir,
		f.spec.SocketDir: 0o700 | os.ModeDir, sock: 0o600 | os.ModeSocket,
	} {
		if fi, err := os.Lstat(path); err != nil || fi.Mode() != mode {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, mode)
		}
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestServiceCalls(t *testing.T) {
	f := newFixture(t, bin.plugin, "services")
	svc := &fakeServices{}
	p := f.startInit(t, nil, svc)
	ctx := context.WithValue(hangCtx(t), sessionKey{}, "s-alpha")
	out, err := p.Invoke(ctx, request("services", nil))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"session_info":          map[string]any{"id": "s-alpha", "group": "main", "err": ""},
		"credential":            map[string]any{"value": "sekrit", "err": ""},
		"credential_missing":    "ErrNoCredential",
		"credential_unscoped":   map[string]any{"value": "sekrit", "err": ""},
		"session_info_unscoped": "ErrNoRequest",
		"catalog":               map[string]any{"names": []any{"echo"}, "err": ""},
		"audit":                 map[string]any{"topics": []any{"tool.invoke.x"}, "err": ""},
		"publish":               "ErrNotChannel",
		"publish_elsewhere":     "ErrGroupNotGranted: " + plugin.ErrGroupNotGranted.Error() + `: test is not granted group "elsewhere"; it is granted main`,
		"paused":                map[string]any{"paused": true, "err": ""},
		"dropped":               "",
		"health":                "",
		"decide":                "",
		"decide_decided":        "ErrAlreadyDecided: the confirmation is already decided: approved on cli",
		"status":                map[string]any{"version": "test", "paused": true, "err": ""},
		"set_paused":            "ErrNotSurface",
		"stop_session":          "",
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("plugin saw %v\nwant %v", out, want)
	}
	// The core's services ran with the call's ctx, or none.
	wantSeen := []string{"GetSessionInfo@s-alpha", "ReadCredential@s-alpha", "ReadCredential@s-alpha", "ReadCredential@-",
		"GetToolCatalog@s-alpha", "GetAuditLog@s-alpha", "PublishEvent@s-alpha", "PublishEvent@s-alpha", "Paused@s-alpha", "AuditDropped:update 7 (message) from user 9@s-alpha",
		"ReportHealth:true:cannot reach the service@s-alpha",
		"Decide@s-alpha", "Decide@s-alpha", "CoreStatus@s-alpha", "SetPaused@s-alpha", "StopSession@s-alpha"}
	if got := svc.calls(); !slices.Equal(got, wantSeen) {
		t.Errorf("services saw %v\nwant %v", got, wantSeen)
	}

	// A scope that is no longer in flight is refused, whatever the method.
	if _, err := p.Invoke(ctx, request("keepctx", nil)); err != nil {
		t.Fatal(err)
	}
	n := len(svc.calls())
	out, err = p.Invoke(ctx, request("stalectx", nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"session_info": "ErrNoRequest", "read_credential": "ErrNoRequest"}; !reflect.DeepEqual(out, want) {
		t.Errorf("stale scope: plugin saw %v, want %v", out, want)
	}
	if got := svc.calls(); len(got) != n {
		t.Errorf("services called for a stale scope: %v", got[n:])
	}
}

func TestServiceRateLimit(t *testing.T) {
	f := newFixture(t, bin.plugin, "greedy")
	f.spec.serviceRate, f.spec.serviceBurst = 1, 5
	p := f.startInit(t, nil, nil)
	out, err := p.Invoke(hangCtx(t), request("svcflood", map[string]any{"n": 20}))
	if err != nil {
		t.Fatal(err)
	}
	ok, _ := out["ok"].(json.Number).Int64()
	limited, _ := out["limited"].(json.Number).Int64()
	// The burst passes; the rest is refused with an error, not a cut-off
	// (a slow machine may earn a token or two back meanwhile).
	if ok < 5 || limited < 5 || ok+limited != 20 {
		t.Fatalf("%d calls answered, %d refused; want the burst of 5 answered and most of the rest refused", ok, limited)
	}
	if _, err := p.Invoke(hangCtx(t), request("echo", nil)); err != nil || !p.Alive() {
		t.Fatalf("after the flood: %v, alive %v", err, p.Alive())
	}
}

func TestStderrFlood(t *testing.T) {
	f := newFixture(t, bin.plugin, "chatty")
	p := f.startInit(t, nil, nil)
	out, err := p.Invoke(hangCtx(t), request("flood", nil))
	if err != nil || out["lines"] != json.Number("100000") {
		t.Fatalf("flood = %v, %v", out, err)
	}
	if _, err := p.Invoke(hangCtx(t), request("echo", nil)); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(hangCtx(t)); err != nil {
		t.Fatal(err)
	}
	logged := f.logs.find("plugin output")
	if len(logged) == 0 || len(logged) >= 100000 {
		t.Fatalf("%d output lines logged of 100000", len(logged))
	}
	if r := logged[0]; r.attrs["plugin"] != "chatty" || r.attrs["stream"] != "stderr" || r.attrs["line"] != strings.Repeat("y", 80) {
		t.Errorf("first output record %v", r.attrs)
	}
	total := 0
	for _, r := range f.logs.find("plugin output suppressed") {
		n, _ := strconv.Atoi(r.attrs["lines"])
		total += n
	}
	if total+len(logged) != 100001 {
		t.Errorf("%d lines logged + %d suppressed, want 100001", len(logged), total)
	}
}

func TestOutputLines(t *testing.T) {
	f := newFixture(t, bin.plugin, "lines")
	p := &Process{spec: f.spec, log: f.spec.Logger.With("plugin", "lines")}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.output.Add(1)
	go p.pump("stdout", r, newTestLimiter())
	long := strings.Repeat("é", 2000) // 4000 bytes
	fmt.Fprintf(w, "one\r\n%s\nbad \xff byte\nlast without newline", long)
	w.Close()
	p.output.Wait()
	r.Close()
	got := f.logs.find("plugin output")
	if len(got) != 4 {
		t.Fatalf("%d records: %v", len(got), got)
	}
	if got[0].attrs["line"] != "one" || got[2].attrs["line"] != "bad \uFFFD byte" || got[3].attrs["line"] != "last without newline" {
		t.Errorf("records %v", got)
	}
	if l := got[1].attrs["line"]; len(l) > maxLine || got[1].attrs["truncated"] != "true" || !strings.HasPrefix(long, strings.TrimSuffix(l, "\uFFFD")) {
		t.Errorf("long line logged as %d bytes, truncated=%s", len(l), got[1].attrs["truncated"])
	}
}

func TestStrangerIgnored(t *testing.T) {
	f := newFixture(t, bin.raw, "stranger")
	p := f.startInit(t, nil, nil)
	out, err := p.Invoke(hangCtx(t), request("x", map[string]any{"raw": `{"ok":true}`}))
	if err != nil || out["ok"] != true {
		t.Fatalf("Invoke = %v, %v", out, err)
	}
	if len(f.logs.find("plugin socket message ignored")) == 0 {
		t.Error("the stranger's messages were not logged as ignored")
	}
	if !p.Alive() {
		t.Error("plugin cut off because of a stranger")
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	before := goleak.IgnoreCurrent()
	for _, stop := range []string{"shutdown", "kill", "crash"} {
		f := newFixture(t, bin.plugin, "leak")
		p, err := Start(hangCtx(t), f.spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Init(hangCtx(t), nil, &fakeServices{}); err != nil {
			t.Fatal(err)
		}
		tools := []string{"echo", "services"}
		if stop == "kill" {
			tools = append(tools, "flood") // output pumps busy to the end
		}
		for _, tool := range tools {
			if _, err := p.Invoke(hangCtx(t), request(tool, nil)); err != nil {
				t.Fatal(err)
			}
		}
		switch stop {
		case "shutdown":
			if err := p.Shutdown(hangCtx(t)); err != nil {
				t.Fatal(err)
			}
		case "kill":
			p.Kill()
		case "crash":
			p.Invoke(hangCtx(t), request("crash", nil))
		}
		waitDone(t, p)
	}
	leaktest.Check(t, before)
}

func BenchmarkInvoke(b *testing.B) {
	f := newFixture(b, bin.plugin, "bench")
	p := f.startInit(b, nil, nil)
	ctx := context.Background()
	req := request("echo", map[string]any{"text": "hello", "n": 1})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := p.Invoke(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInvokeRaw is BenchmarkInvoke against a handler that answers on
// its receiving goroutine without the SDK (rawpeer): the difference is
// what the SDK costs per call.
func BenchmarkInvokeRaw(b *testing.B) {
	f := newFixture(b, bin.raw, "results")
	p := f.startInit(b, nil, nil)
	ctx := context.Background()
	req := request("x", map[string]any{"raw": `{"text":"hello","n":1}`})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := p.Invoke(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
