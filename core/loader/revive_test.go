package loader

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/outcome"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/pluginhost"
	"github.com/carapace-dev/carapace/keychain"
)

// hang bounds every wait in these tests: a guard against a hang, never an
// assertion about speed.
const hang = 20 * time.Second

// flakyBin is testdata/flaky, built on first use.
var flakyBin struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if flakyBin.dir != "" {
		os.RemoveAll(flakyBin.dir)
	}
	os.Exit(code)
}

func flakyHandler(t *testing.T) string {
	t.Helper()
	flakyBin.once.Do(func() {
		flakyBin.dir, flakyBin.err = os.MkdirTemp("", "loader-bin-")
		if flakyBin.err != nil {
			return
		}
		flakyBin.path = filepath.Join(flakyBin.dir, "flaky")
		// go test puts its own toolchain first on the PATH of the test binary.
		cmd := exec.Command("go", "build", "-o", flakyBin.path, "./testdata/flaky")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			flakyBin.err = fmt.Errorf("build testdata/flaky: %v\n%s", err, out)
		}
	})
	if flakyBin.err != nil {
		t.Fatal(flakyBin.err)
	}
	return flakyBin.path
}

const flakyManifest = `{
  "description": "the loader's crash and hang test plugin", "version": "1.0.0", "app_compat": ">=0.1.0", "author": {"name": "tests"},
  "provides": {"channels": [], "tools": [
    {"name": "flaky_echo", "description": "its pid", "risk_level": "low", "arguments_schema": {"type": "object", "additionalProperties": false, "properties": {}}},
    {"name": "flaky_crash", "description": "exit", "risk_level": "low", "arguments_schema": {"type": "object", "additionalProperties": false, "properties": {}}},
    {"name": "flaky_hang", "description": "never reply", "risk_level": "low", "arguments_schema": {"type": "object", "additionalProperties": false, "properties": {}}},
    {"name": "flaky_slow", "description": "reply once cancelled", "risk_level": "low", "arguments_schema": {"type": "object", "additionalProperties": false, "properties": {}}}]},
  "subscribes": []
}`

// fakeClock runs the revivals' timers when a test fires them.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	at   time.Time
	wait time.Duration
	f    func()
	done bool // fired or stopped
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), wait: d, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// pending returns the timers neither fired nor stopped.
func (c *fakeClock) pending() []*fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*fakeTimer
	for _, t := range c.timers {
		if !t.done {
			out = append(out, t)
		}
	}
	return out
}

// fire moves the clock to t and runs it in its own goroutine, as a timer
// would.
func (c *fakeClock) fire(t *fakeTimer) {
	c.mu.Lock()
	if t.at.After(c.now) {
		c.now = t.at
	}
	t.done = true
	c.mu.Unlock()
	go t.f()
}

// revFixture is a loader with the flaky plugin, bundled and enabled.
type revFixture struct {
	l      *Loader
	home   home.Dir
	clock  *fakeClock
	cat    *catalog.Catalog
	mu     sync.Mutex
	states []string // the flaky plugin's states, as plugin.health published them
	log    *strings.Builder
}

// newRevFixture loads the flaky plugin with rev; clock nil is the real
// one. markers are in its data folder from its first start (mark).
func newRevFixture(t *testing.T, rev Revival, clock *fakeClock, markers ...string) *revFixture {
	t.Helper()
	exe := flakyHandler(t)
	base, err := os.MkdirTemp("", "lv") // short: the sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	h := home.Dir(filepath.Join(base, "home"))
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(base, "flaky")
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{"manifest.json": []byte(flakyManifest), "skills/flaky.md": []byte("# flaky\n"), "handler": bin} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, path)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, path), data, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256(bin)
	if err := os.WriteFile(h.Config(), []byte("[plugins.flaky]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(h.Config())
	if err != nil {
		t.Fatal(err)
	}
	al, err := audit.Open(h.AuditLog(), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = al.Close() })
	bus, err := events.Open(filepath.Join(h.RunDir(), "events.sock"), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	f := &revFixture{home: h, clock: clock, cat: catalog.New(), log: &strings.Builder{}}
	sub, err := bus.Subscribe(plugin.TopicPluginHealth.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	go func() {
		for ev := range sub.C() {
			if ps, err := plugin.TopicPluginHealth.Decode(ev); err == nil && ps.Name == "flaky" {
				f.mu.Lock()
				f.states = append(f.states, ps.State)
				f.mu.Unlock()
			}
		}
	}()
	o := Options{Home: h, Version: "test", Config: cfg, Audit: al, Catalog: f.cat, Bus: bus,
		Credentials: keychain.NewFileStore(h.CredentialsDir()), Revival: rev, InitTimeout: hang,
		Bundled: []Bundled{{Name: "flaky", Dir: src, SHA256: hex.EncodeToString(sum[:])}},
		Logger:  slog.New(slog.NewTextHandler(&lockedWriter{b: f.log, mu: &f.mu}, nil))}
	if clock != nil {
		o.Clock = clock
	}
	for _, m := range markers {
		if err := os.MkdirAll(h.DataDir("flaky"), 0o700); err != nil {
			t.Fatal(err)
		}
		f.mark(t, m, true)
	}
	f.l = New(o)
	if err := f.l.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.l.CoreReady()
	t.Cleanup(func() {
		f.l.Shutdown()
		if t.Failed() {
			f.mu.Lock()
			t.Logf("the loader's log:\n%s", f.log.String())
			f.mu.Unlock()
		}
	})
	if st := f.status(t); len(markers) == 0 && (st.State != stateHealthy || st.PID == 0) {
		t.Fatalf("flaky after Load: %+v", st)
	}
	return f
}

type lockedWriter struct {
	b  *strings.Builder
	mu *sync.Mutex
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (f *revFixture) status(t *testing.T) api.PluginStatus {
	t.Helper()
	for _, p := range f.l.Statuses() {
		if p.Name == "flaky" {
			return p
		}
	}
	t.Fatal("no flaky plugin")
	return api.PluginStatus{}
}

// call invokes one of flaky's tools through the catalogue, as the
// pipeline does.
func (f *revFixture) call(ctx context.Context, tool string) (map[string]any, error) {
	tl := f.cat.Lookup(tool)
	if tl == nil {
		return nil, fmt.Errorf("%s is not catalogued", tool)
	}
	return tl.Handler.Invoke(ctx, &plugin.Request{Tool: tool, Arguments: map[string]any{}, Group: "main"})
}

// starts returns the pids of every start of the handler.
func (f *revFixture) starts(t *testing.T) []int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(f.home.DataDir("flaky"), "starts"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, s := range strings.Fields(string(raw)) {
		n, _ := strconv.Atoi(s)
		out = append(out, n)
	}
	return out
}

// mark makes every later start of the handler do what marker says.
func (f *revFixture) mark(t *testing.T, marker string, on bool) {
	t.Helper()
	path := filepath.Join(f.home.DataDir("flaky"), marker)
	var err error
	if on {
		err = os.WriteFile(path, nil, 0o600)
	} else {
		err = os.Remove(path)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// seen returns the states published so far.
func (f *revFixture) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.states...)
}

// waitFor polls cond until it holds (bounded by hang).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// alive reports whether pid runs (and is no zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && !strings.HasPrefix(string(b[i:]), ") Z")
}

// TestRevivedAfterSIGKILL: a handler killed from outside comes back by
// itself and answers again; the call it was in fails.
func TestRevivedAfterSIGKILL(t *testing.T) {
	f := newRevFixture(t, Revival{Backoff: time.Millisecond}, nil) // the real clock
	pid := f.status(t).PID
	inflight := make(chan error, 1)
	go func() {
		_, err := f.call(context.Background(), "flaky_hang")
		inflight <- err
	}()
	waitFor(t, "the call to reach the handler", func() bool {
		_, err := os.Stat(filepath.Join(f.home.DataDir("flaky"), "hanging"))
		return err == nil
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-inflight:
		if !errors.Is(err, pluginhost.ErrCrashed) {
			t.Errorf("the call in flight: %v, want ErrCrashed", err)
		}
	case <-time.After(hang):
		t.Fatal("the call in flight never ended")
	}
	var st api.PluginStatus
	waitFor(t, "flaky to be back", func() bool {
		st = f.status(t)
		return st.State == stateHealthy && st.PID != 0 && st.PID != pid
	})
	res, err := f.call(context.Background(), "flaky_echo")
	if err != nil || fmt.Sprint(res["pid"]) != strconv.Itoa(st.PID) {
		t.Fatalf("echo after the revival: %v %v, want pid %d", res, err, st.PID)
	}
	if s := f.starts(t); len(s) != 2 || s[1] != st.PID {
		t.Errorf("starts %v, want the first and %d", s, st.PID)
	}
	if st.Restarts != 1 || !st.NextTry.IsZero() {
		t.Errorf("status %+v, want 1 restart and no next try", st)
	}
	waitFor(t, "the revival to be published", func() bool { return len(f.seen()) >= 3 && f.seen()[len(f.seen())-1] == stateHealthy })
	if got := strings.Join(f.seen(), ","); !strings.Contains(got, "healthy,restarting,") || !strings.HasSuffix(got, ",healthy") {
		t.Errorf("states published %s, want healthy, restarting, ..., healthy", got)
	}
}

// TestDownAfterRepeatedCrashes: a handler that dies at every start —
// during its Init, or right after it — is tried again with a doubling
// wait and ends down after exactly MaxCrashes starts; a manual restart
// forgets the crashes.
func TestDownAfterRepeatedCrashes(t *testing.T) {
	for _, marker := range []string{"die-in-init", "die-after-init"} {
		t.Run(marker, func(t *testing.T) {
			clock := newFakeClock()
			f := newRevFixture(t, Revival{}, clock) // the defaults: 5 crashes, 1 s doubling
			f.mark(t, marker, true)
			if _, err := f.call(context.Background(), "flaky_crash"); !errors.Is(err, pluginhost.ErrCrashed) {
				t.Fatalf("crash: %v", err)
			}
			waits := f.untilDown(t)
			if got := fmt.Sprint(waits); got != "[1s 2s 4s 8s]" {
				t.Errorf("waits %s, want [1s 2s 4s 8s]", got)
			}
			if n := len(f.starts(t)); n != DefaultMaxCrashes {
				t.Errorf("%d starts, want %d", n, DefaultMaxCrashes)
			}
			st := f.status(t)
			if st.Restarts != DefaultMaxCrashes-1 || !strings.Contains(st.Problem, "5 times within 10m0s") ||
				!strings.Contains(st.Problem, "carapace plugin restart flaky") || st.PID != 0 {
				t.Errorf("down: %+v", st)
			}
			if _, err := f.call(context.Background(), "flaky_echo"); !errors.Is(err, outcome.ErrUnavailable) {
				t.Errorf("a call to a down plugin: %v, want unavailable", err)
			}
			waitFor(t, "down to be published", func() bool { return slices.Contains(f.seen(), stateDown) })
			var marks []string
			for _, s := range f.seen() {
				if s == stateRestarting || s == stateDown {
					marks = append(marks, s)
				}
			}
			if got := strings.Join(marks, ","); got != "restarting,restarting,restarting,restarting,down" {
				t.Errorf("states published %s", got)
			}

			// A manual restart starts it afresh: healthy, no restarts,
			// and the next crash waits the first wait again.
			f.mark(t, marker, false)
			st, err := f.l.Restart(t.Context(), "flaky")
			if err != nil || st.State != stateHealthy || st.Restarts != 0 {
				t.Fatalf("manual restart: %+v %v", st, err)
			}
			if _, err := f.call(context.Background(), "flaky_crash"); !errors.Is(err, pluginhost.ErrCrashed) {
				t.Fatalf("crash: %v", err)
			}
			waitFor(t, "a try to wait", func() bool { return len(clock.pending()) == 1 })
			if p := clock.pending(); p[0].wait != time.Second || !strings.Contains(f.status(t).Problem, "crash 1 within") {
				t.Errorf("after a manual restart: a wait of %v, %+v; want 1s, crash 1", p[0].wait, f.status(t))
			}
		})
	}
}

// untilDown fires each try as it comes to wait, checking the plugin is
// restarting and unavailable meanwhile, until it is down; it returns the
// waits.
func (f *revFixture) untilDown(t *testing.T) []time.Duration {
	t.Helper()
	var waits []time.Duration
	for {
		var p []*fakeTimer
		waitFor(t, "a try to wait, or flaky down", func() bool {
			p = f.clock.pending()
			return len(p) > 0 || f.status(t).State == stateDown
		})
		if len(p) == 0 {
			return waits
		}
		if len(p) != 1 {
			t.Fatalf("%d tries wait at once", len(p))
		}
		st := f.status(t)
		if st.State != stateRestarting || !st.NextTry.Equal(p[0].at) {
			t.Fatalf("waiting: %+v, want restarting, next try at %v", st, p[0].at)
		}
		if _, err := f.call(context.Background(), "flaky_echo"); !errors.Is(err, outcome.ErrUnavailable) {
			t.Fatalf("a call while restarting: %v, want unavailable", err)
		}
		waits = append(waits, p[0].wait)
		if len(waits) > DefaultMaxCrashes {
			t.Fatalf("still trying after %v", waits)
		}
		f.clock.fire(p[0])
		waitFor(t, "the try to end", func() bool { return len(f.clock.pending()) > 0 || f.status(t).State == stateDown })
	}
}

// TestDiesRightAfterItsFirstStart: a handler that dies just after its
// first Init, while the core loads, is a crash like any other: tried
// again, then down.
func TestDiesRightAfterItsFirstStart(t *testing.T) {
	clock := newFakeClock()
	f := newRevFixture(t, Revival{}, clock, "die-after-init")
	if waits := f.untilDown(t); len(waits) != DefaultMaxCrashes-1 {
		t.Errorf("waits %v, want %d", waits, DefaultMaxCrashes-1)
	}
	if n := len(f.starts(t)); n != DefaultMaxCrashes {
		t.Errorf("%d starts, want %d", n, DefaultMaxCrashes)
	}
}

// TestHungHandlerIsKilledAndRevived: calls that run into their timeout
// make a handler hung only if it sends no reply to any call in between;
// then its process is killed and it comes back.
func TestHungHandlerIsKilledAndRevived(t *testing.T) {
	f := newRevFixture(t, Revival{Backoff: time.Millisecond, HungCalls: 3}, nil)
	pid := f.status(t).PID
	proc := f.l.find("flaky").proc
	timeout := func(tool string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := f.call(ctx, tool); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v, want its timeout", tool, err)
		}
	}
	// A slow handler that answers late is not hung.
	for range 4 {
		before := proc.Replies()
		timeout("flaky_slow")
		waitFor(t, "the late reply", func() bool { return proc.Replies() > before })
	}
	// One that never answers: hung at the third.
	for range 2 {
		timeout("flaky_hang")
	}
	if st := f.status(t); st.State != stateHealthy || st.PID != pid || !alive(pid) {
		t.Fatalf("after 4 late replies and 2 hangs: %+v; want the same process, healthy", st)
	}
	timeout("flaky_hang")
	var st api.PluginStatus
	waitFor(t, "flaky to be back", func() bool {
		st = f.status(t)
		return st.State == stateHealthy && st.PID != pid && st.PID != 0
	})
	waitFor(t, "the hung process to be gone", func() bool { return !alive(pid) })
	if res, err := f.call(context.Background(), "flaky_echo"); err != nil || fmt.Sprint(res["pid"]) != strconv.Itoa(st.PID) {
		t.Fatalf("echo after the revival: %v %v", res, err)
	}
	if n := len(f.starts(t)); n != 2 {
		t.Errorf("%d starts, want 2", n)
	}
	if !strings.Contains(f.log.String(), "plugin hung") {
		t.Error("the hang was not logged")
	}
}

// TestNoRevivalOnceTheCoreStops: a try that waits when the core begins to
// stop (Drain) or stops (Shutdown) never starts the plugin, even if its
// timer fires; the same try before it does.
func TestNoRevivalOnceTheCoreStops(t *testing.T) {
	for _, stop := range []string{"drain", "shutdown"} {
		t.Run(stop, func(t *testing.T) {
			clock := newFakeClock()
			f := newRevFixture(t, Revival{}, clock)
			crashAndWait := func() *fakeTimer {
				t.Helper()
				if _, err := f.call(context.Background(), "flaky_crash"); !errors.Is(err, pluginhost.ErrCrashed) {
					t.Fatalf("crash: %v", err)
				}
				waitFor(t, "a try to wait", func() bool { return len(clock.pending()) == 1 })
				return clock.pending()[0]
			}
			// Positive control: the try starts it.
			clock.fire(crashAndWait())
			waitFor(t, "flaky to be back", func() bool { return f.status(t).State == stateHealthy })
			if n := len(f.starts(t)); n != 2 {
				t.Fatalf("%d starts, want 2", n)
			}

			try := crashAndWait()
			if stop == "drain" {
				f.l.Drain()
			} else {
				f.l.Shutdown()
			}
			if len(clock.pending()) != 0 {
				t.Fatal("the try still waits once the core stops")
			}
			try.f() // as if the timer had fired just as it was stopped
			want := map[string]string{"drain": stateCrashed, "shutdown": stateStopping}[stop]
			if st := f.status(t); st.State != want || !strings.Contains(st.Problem, "the core is stopping") {
				t.Errorf("after the stop: %+v, want %s", st, want)
			}
			if n := len(f.starts(t)); n != 2 {
				t.Errorf("%d starts, want 2: a plugin was started after the core began to stop", n)
			}
			if _, err := f.l.Restart(t.Context(), "flaky"); stop == "shutdown" && !errors.Is(err, api.ErrConflict) {
				t.Errorf("a restart after Shutdown: %v, want refused", err)
			}
		})
	}
}

// TestShutdownDuringARevival: a try that starts as the core shuts down
// leaves no process behind.
func TestShutdownDuringARevival(t *testing.T) {
	clock := newFakeClock()
	f := newRevFixture(t, Revival{}, clock)
	if _, err := f.call(context.Background(), "flaky_crash"); !errors.Is(err, pluginhost.ErrCrashed) {
		t.Fatalf("crash: %v", err)
	}
	waitFor(t, "a try to wait", func() bool { return len(clock.pending()) == 1 })
	clock.fire(clock.pending()[0])
	f.l.Shutdown()
	for _, pid := range f.starts(t) {
		waitFor(t, fmt.Sprintf("process %d to be gone", pid), func() bool { return !alive(pid) })
	}
}

// TestRefusedRestartKeepsTheWait: a manual restart refused before
// anything was stopped (config.toml broken) leaves a restarting plugin
// with a try still to come, which starts it once the file is fixed.
func TestRefusedRestartKeepsTheWait(t *testing.T) {
	clock := newFakeClock()
	f := newRevFixture(t, Revival{}, clock)
	if _, err := f.call(context.Background(), "flaky_crash"); !errors.Is(err, pluginhost.ErrCrashed) {
		t.Fatalf("crash: %v", err)
	}
	waitFor(t, "a try to wait", func() bool { return len(clock.pending()) == 1 })
	if err := os.WriteFile(f.home.Config(), []byte("[plugins.flaky\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.Restart(t.Context(), "flaky"); !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("restart with a broken config.toml: %v", err)
	}
	p := clock.pending()
	if st := f.status(t); len(p) != 1 || st.State != stateRestarting || !strings.Contains(st.Problem, "not restarted") {
		t.Fatalf("after the refused restart: %d tries wait, %+v", len(p), st)
	}
	if err := os.WriteFile(f.home.Config(), []byte("[plugins.flaky]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.fire(p[0])
	waitFor(t, "flaky to be back", func() bool { return f.status(t).State == stateHealthy })
	if n := len(f.starts(t)); n != 2 {
		t.Errorf("%d starts, want 2", n)
	}
}
