package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/carapace-dev/carapace/core/plugin"
)

// hang bounds every wait in these tests. It is a guard against a hang,
// never an assertion about speed.
const hang = 20 * time.Second

// bin holds the test handlers, built once by TestMain.
var bin struct {
	plugin string // testdata/testplugin: on plugin.Serve
	raw    string // testdata/rawpeer: zmq4 directly, misbehaves on request
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pluginhost-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.plugin = filepath.Join(dir, "testplugin")
	bin.raw = filepath.Join(dir, "rawpeer")
	// go test puts its own toolchain first on the PATH of the test binary.
	gotool, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintf(os.Stderr, "the go command is needed to build the test handlers: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, b := range []struct{ out, pkg string }{{bin.plugin, "./testdata/testplugin"}, {bin.raw, "./testdata/rawpeer"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(gotool, "build", "-o", b.out, b.pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("build %s: %v\n%s", b.pkg, err, out)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fixture is one plugin's spec with what its hooks saw.
type fixture struct {
	spec  Spec
	logs  *logRecorder
	exits chan error // OnExit calls
}

// newFixture prepares a spec for exe under temporary directories. The
// socket directory is short: t.TempDir paths can exceed sun_path.
func newFixture(t testing.TB, exe, name string) *fixture {
	t.Helper()
	sockBase, err := os.MkdirTemp("", "ph")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockBase) })
	base := t.TempDir()
	dir := filepath.Join(base, "plugin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fixture{logs: &logRecorder{}, exits: make(chan error, 8)}
	f.spec = Spec{
		Name:      name,
		Dir:       dir,
		Exec:      exe,
		DataDir:   filepath.Join(base, "data"),
		SocketDir: filepath.Join(sockBase, "run"),
		Logger:    slog.New(&logHandler{rec: f.logs}),
		OnExit:    func(err error) { f.exits <- err },
	}
	return f
}

// start starts f's plugin; the test's cleanup kills it and waits.
func (f *fixture) start(t testing.TB) *Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	p, err := Start(ctx, f.spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		p.Kill()
		waitDone(t, p)
	})
	return p
}

func waitDone(t testing.TB, p *Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(hang):
		t.Fatalf("process %d not cleaned up", p.PID())
	}
}

// startInit starts f's plugin and inits it.
func (f *fixture) startInit(t testing.TB, config map[string]any, svc plugin.Services) *Process {
	t.Helper()
	p := f.start(t)
	if svc == nil {
		svc = &fakeServices{}
	}
	if err := p.Init(hangCtx(t), config, svc); err != nil {
		t.Fatalf("Init: %v", err)
	}
	return p
}

// hangCtx is a ctx that only guards against hangs.
func hangCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	t.Cleanup(cancel)
	return ctx
}

func request(tool string, args map[string]any) *plugin.Request {
	return &plugin.Request{
		Tool: tool, Arguments: args, Group: "main", Session: "s-1", Correlation: "c-1", EnvelopeID: "e-1",
		Time: time.Date(2026, 3, 4, 5, 6, 7, 890000000, time.UTC),
	}
}

// processGone waits until pid no longer runs (gone, or a zombie waiting to
// be reaped by whoever inherited it).
func processGone(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return
		}
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i:]), ") Z") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---- a recording slog handler ----

type logRecord struct {
	msg   string
	attrs map[string]string
}

type logRecorder struct {
	mu   sync.Mutex
	recs []logRecord
}

func (r *logRecorder) find(msg string) []logRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logRecord
	for _, rec := range r.recs {
		if rec.msg == msg {
			out = append(out, rec)
		}
	}
	return out
}

type logHandler struct {
	rec   *logRecorder
	attrs []slog.Attr
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.rec.mu.Lock()
	h.rec.recs = append(h.rec.recs, rec)
	h.rec.mu.Unlock()
	return nil
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{rec: h.rec, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *logHandler) WithGroup(string) slog.Handler { return h }

// ---- fake core services ----

// sessionKey is how the fake core scopes a ctx to a session, as the real
// core does with its own key.
type sessionKey struct{}

type fakeServices struct {
	mu   sync.Mutex
	seen []string // "Method@session", "-" for a ctx of no session
}

func (s *fakeServices) record(ctx context.Context, method string) (string, bool) {
	sess, ok := ctx.Value(sessionKey{}).(string)
	who := sess
	if !ok {
		who = "-"
	}
	s.mu.Lock()
	s.seen = append(s.seen, method+"@"+who)
	s.mu.Unlock()
	return sess, ok
}

func (s *fakeServices) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// The surface services: recorded; Decide on "decided" answers as a
// confirmation decided elsewhere first.
func (s *fakeServices) Decide(ctx context.Context, d plugin.Decision) error {
	s.record(ctx, "Decide")
	if d.ID == "decided" {
		return fmt.Errorf("%w: approved on cli", plugin.ErrAlreadyDecided)
	}
	return nil
}

func (s *fakeServices) CoreStatus(ctx context.Context) (plugin.CoreStatus, error) {
	s.record(ctx, "CoreStatus")
	return plugin.CoreStatus{Version: "test", Paused: true}, nil
}

func (s *fakeServices) SetPaused(ctx context.Context, _ bool) error {
	s.record(ctx, "SetPaused")
	return plugin.ErrNotSurface
}

func (s *fakeServices) StopSession(ctx context.Context, _ string) error {
	s.record(ctx, "StopSession")
	return nil
}

func (s *fakeServices) GetAuditLog(ctx context.Context, f plugin.AuditFilter) ([]plugin.AuditEntry, error) {
	sess, ok := s.record(ctx, "GetAuditLog")
	if !ok {
		return nil, plugin.ErrNoRequest
	}
	return []plugin.AuditEntry{{Session: sess, Topic: f.Topic, Stage: "done", Outcome: "ok"}}, nil
}

func (s *fakeServices) GetToolCatalog(ctx context.Context) ([]plugin.ToolInfo, error) {
	s.record(ctx, "GetToolCatalog")
	return []plugin.ToolInfo{{Name: "echo", Plugin: "test", RiskLevel: "low"}}, nil
}

func (s *fakeServices) GetSessionInfo(ctx context.Context) (plugin.SessionInfo, error) {
	sess, ok := s.record(ctx, "GetSessionInfo")
	if !ok {
		return plugin.SessionInfo{}, plugin.ErrNoRequest
	}
	return plugin.SessionInfo{ID: sess, Group: "main"}, nil
}

func (s *fakeServices) ReadCredential(ctx context.Context, key string) (string, error) {
	s.record(ctx, "ReadCredential")
	if key == "api_key" {
		return "sekrit", nil
	}
	return "", plugin.ErrNoCredential
}

func (s *fakeServices) PublishEvent(ctx context.Context, ev *plugin.Event) error {
	s.record(ctx, "PublishEvent")
	if ev.Group != "" {
		return fmt.Errorf("%w: test is not granted group %q; it is granted main", plugin.ErrGroupNotGranted, ev.Group)
	}
	return plugin.ErrNotChannel
}

func (s *fakeServices) Paused(ctx context.Context) (bool, error) {
	s.record(ctx, "Paused")
	return true, nil
}

func (s *fakeServices) AuditDropped(ctx context.Context, what string) error {
	s.record(ctx, "AuditDropped:"+what)
	return nil
}

func (s *fakeServices) ReportHealth(ctx context.Context, degraded bool, why string) error {
	s.record(ctx, fmt.Sprintf("ReportHealth:%v:%s", degraded, why))
	return nil
}

// newTestLimiter lets every line through.
func newTestLimiter() *rate.Limiter { return rate.NewLimiter(rate.Inf, 0) }
