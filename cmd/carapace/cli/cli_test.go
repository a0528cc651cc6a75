package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/cmd/carapace/cli"
	"github.com/carapace-dev/carapace/cmd/wiring"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// result is what one command run printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// carapace runs the command line in process against home h.
func carapace(t *testing.T, h home.Dir, args ...string) result {
	t.Helper()
	var out, errb testutil.Buffer
	return carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb}, h, args...)
}

func carapaceWith(t *testing.T, cfg cli.Config, h home.Dir, args ...string) result {
	t.Helper()
	if cfg.Version == "" {
		cfg.Version = "9.9.9"
	}
	if cfg.Stdin == nil {
		cfg.Stdin = strings.NewReader("")
	}
	if cfg.NewEngine == nil {
		cfg.NewEngine = wiring.Engines(nil) // what main gives the command line
	}
	root := cli.New(cfg)
	root.SetArgs(append([]string{"--home", string(h)}, args...))
	code := cli.Execute(t.Context(), root)
	return result{stdout: fmt.Sprint(cfg.Stdout), stderr: fmt.Sprint(cfg.Stderr), code: code}
}

// fakeCore serves a fake backend on a fresh home.
type fakeCore struct {
	home home.Dir
	b    *controltest.Backend
	srv  *control.Server
}

func newFakeCore(t *testing.T) *fakeCore {
	t.Helper()
	h := controltest.TempHome(t)
	b := controltest.NewBackend(h)
	return &fakeCore{home: h, b: b, srv: controltest.Start(t, b, h.ControlSocket())}
}

func (r result) want(t *testing.T, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	for _, s := range stderr {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
}

func TestStatus(t *testing.T) {
	c := newFakeCore(t)
	carapace(t, c.home, "status").want(t, 0, []string{"engines                none checked yet"}, nil)
	c.b.SetStatus(api.Status{Version: "1.2.3", PID: 4242, Started: time.Now().Add(-90 * time.Minute), Tools: 12,
		Plugins: []api.PluginStatus{{Name: "telegram", Healthy: true}, {Name: "weather", Category: "NETWORK_ERROR"}},
		Engines: []api.EngineStatus{
			{Name: "apple", Version: "1.2.2", Bin: "/opt/homebrew/bin/container", BinFrom: "Homebrew, not on PATH"},
			{Name: "docker", Version: "20.10.24"},
		}})
	c.b.AddConfirmation(api.Confirmation{ID: "c1", Tool: "send_email", ArgsHash: "h"})

	r := carapace(t, c.home, "status")
	r.want(t, 0, []string{"version", "1.2.3", "4242", "1h30m0s", string(c.home), "12",
		"pending confirmations  1 (carapace confirm list)", "telegram", "healthy", "weather", "failed: NETWORK_ERROR",
		"draining               no",
		"engines                apple 1.2.2      /opt/homebrew/bin/container (Homebrew, not on PATH)\n",
		"                       docker 20.10.24  -\n"}, nil)

	r = carapace(t, c.home, "status", "--json")
	r.want(t, 0, []string{`"pending_confirmations": 1`, `"version": "1.2.3"`}, nil)
	var st api.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.PID != 4242 || len(st.Plugins) != 2 || len(st.Engines) != 2 || st.Engines[0].Bin != "/opt/homebrew/bin/container" {
		t.Errorf("status --json: %v %+v", err, st)
	}
}

func TestVersion(t *testing.T) {
	c := newFakeCore(t)
	carapace(t, c.home, "version").want(t, 0, []string{"carapace 9.9.9\n", fmt.Sprintf("core test (pid %d)", os.Getpid())}, nil)
	carapace(t, controltest.TempHome(t), "version").want(t, 0, []string{"carapace 9.9.9\n", "core not running at"}, nil)
	carapace(t, c.home, "--version").want(t, 0, []string{"carapace 9.9.9\n"}, nil)
}

func TestSessions(t *testing.T) {
	c := newFakeCore(t)
	carapace(t, c.home, "sessions").want(t, 0, []string{"no live sessions"}, nil)
	carapace(t, c.home, "sessions", "--json").want(t, 0, []string{"[]"}, nil)

	h, err := control.NewClient(c.home.ControlSocket()).OpenSession(t.Context(), "family")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	carapace(t, c.home, "sessions").want(t, 0, []string{"ID", "GROUP", h.Info().ID, "family", "none", h.Info().Socket}, nil)
	r := carapace(t, c.home, "sessions", "--json")
	var list []api.Session
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].Group != "family" {
		t.Errorf("sessions --json: %v %s", err, r.stdout)
	}
}

func TestConfirm(t *testing.T) {
	long := `{"to":"someone@example.com","subject":"` + strings.Repeat("x", 100) + "\u009b31m" + `"}`
	const c1, c2, c3 = "c1c1c1c1000000000000000000000000", "c2c2c2c2000000000000000000000000", "c2c2c2c2ffff00000000000000000000"
	pending := func() []api.Confirmation {
		now := time.Now()
		return []api.Confirmation{
			{ID: c1, Session: "s1", Group: "main", Tool: "send_email", ArgsHash: "sha256:one",
				Arguments: json.RawMessage("{\n  \"to\": \"a@example.com\"\n}"), CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(4 * time.Minute)},
			{ID: c2, Session: "s2", Group: "work", Tool: "delete_file", ArgsHash: "sha256:two",
				Arguments: json.RawMessage(long), CreatedAt: now, ExpiresAt: now.Add(5 * time.Minute)},
			{ID: c3, Session: "s3", Group: "work", Tool: "delete_file", ArgsHash: "sha256:three",
				Arguments: json.RawMessage(`{}`), CreatedAt: now, ExpiresAt: now.Add(5 * time.Minute)},
		}
	}
	me := "uid " + strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil && u.Username != "" {
		me = u.Username
	}
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr []string
		decisions      []controltest.Decision
	}{
		{
			name:   "list",
			args:   []string{"confirm", "list"},
			stdout: []string{"ID", "TOOL", "LEFT", c1[:8], "send_email", "main", "s1", `{"to":"a@example.com"}`, c2[:8], "delete_file", "…"},
		},
		{
			name:   "list json",
			args:   []string{"confirm", "list", "--json"},
			stdout: []string{`"args_hash": "sha256:two"`, strings.Repeat("x", 100), `"id": "` + c1 + `"`},
		},
		{
			name:      "approve by a unique prefix sends the shown hash",
			args:      []string{"confirm", "approve", "c2c2c2c20"},
			stdout:    []string{"Approving delete_file for group work (session s2", strings.Repeat("x", 100), `\u009b31m`, "digest:    sha256:two", "approved " + c2},
			decisions: []controltest.Decision{{ID: c2, Approve: true, ArgsHash: "sha256:two", Surface: "cli", Decider: me}},
		},
		{
			name:      "deny carries the hash too",
			args:      []string{"confirm", "deny", "c1c1c1"},
			stdout:    []string{"Denying send_email", "denied " + c1},
			decisions: []controltest.Decision{{ID: c1, ArgsHash: "sha256:one", Surface: "cli", Decider: me}},
		},
		{
			name:   "an ambiguous prefix is refused",
			args:   []string{"confirm", "approve", "c2c2c2"},
			code:   1,
			stderr: []string{"c2c2c2 is ambiguous", c2, c3},
		},
		{
			name:   "a prefix too short",
			args:   []string{"confirm", "approve", "c1c1"},
			code:   1,
			stderr: []string{"at least 6 hex characters"},
		},
		{
			name:   "approve unknown",
			args:   []string{"confirm", "approve", "abcdef"},
			code:   1,
			stderr: []string{"no confirmation abcdef"},
		},
		{
			name:   "approve needs an id",
			args:   []string{"confirm", "approve"},
			code:   2,
			stderr: []string{"carapace: accepts 1 arg(s), received 0 (see 'carapace confirm approve --help')"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCore(t)
			for _, p := range pending() {
				c.b.AddConfirmation(p)
			}
			r := carapace(t, c.home, tt.args...)
			r.want(t, tt.code, tt.stdout, tt.stderr)
			if strings.ContainsRune(r.stdout, '\u009b') {
				t.Error("a C1 control character reached the terminal")
			}
			if got := c.b.Decisions(); fmt.Sprint(got) != fmt.Sprint(tt.decisions) && (len(got) != 0 || len(tt.decisions) != 0) {
				t.Errorf("decisions = %+v, want %+v", got, tt.decisions)
			}
		})
	}
	t.Run("a decided confirmation says how", func(t *testing.T) {
		c := newFakeCore(t)
		for _, p := range pending() {
			c.b.AddConfirmation(p)
		}
		if _, err := c.b.Decide(t.Context(), api.Decision{ID: c1, Approve: true, ArgsHash: "sha256:one", Surface: "telegram", Decider: "owner"}); err != nil {
			t.Fatal(err)
		}
		carapace(t, c.home, "confirm", "deny", "c1c1c1").want(t, 1, nil, []string{"is already decided: approved on telegram by owner"})
		if len(c.b.Decisions()) != 1 {
			t.Errorf("decisions: %+v", c.b.Decisions())
		}
	})
	t.Run("list truncates arguments to one line", func(t *testing.T) {
		c := newFakeCore(t)
		for _, p := range pending() {
			c.b.AddConfirmation(p)
		}
		r := carapace(t, c.home, "confirm", "list")
		if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 4 {
			t.Errorf("want a header and one line per confirmation:\n%s", r.stdout)
		}
	})
	t.Run("empty", func(t *testing.T) {
		c := newFakeCore(t)
		carapace(t, c.home, "confirm", "list").want(t, 0, []string{"no pending confirmations"}, nil)
	})
}

func TestRun(t *testing.T) {
	c := newFakeCore(t)
	r := carapace(t, c.home, "run", "--group", "dev", "--runtime", "none", "--",
		"sh", "-c", "echo $CARAPACE_IPC_ENDPOINT; exit 3")
	r.want(t, 3, []string{"ipc://" + c.home.SessionSocket("s1") + "\n"},
		[]string{`warning: the "none" runtime runs the agent as a local process with no isolation`})
	if got := c.b.Closed(); len(got) != 1 || got[0] != "s1" {
		t.Errorf("closed sessions = %v, want [s1]", got)
	}
	if n := len(c.b.Sessions(t.Context())); n != 0 {
		t.Errorf("%d sessions left open", n)
	}

	t.Run("arguments after CMD are CMD's", func(t *testing.T) {
		carapace(t, c.home, "run", "--group", "dev", "--runtime", "none", "echo", "--group", "x").
			want(t, 0, []string{"--group x\n"}, nil)
	})

	t.Run("killed by a signal", func(t *testing.T) {
		carapace(t, c.home, "run", "--group", "dev", "--runtime", "none", "--", "sh", "-c", "kill -KILL $$").
			want(t, 128+9, nil, nil)
	})

	t.Run("SIGTERM is passed on", func(t *testing.T) {
		out := &readyWriter{ready: make(chan struct{})}
		done := make(chan result, 1)
		go func() {
			done <- carapaceWith(t, cli.Config{Stdout: out, Stderr: &testutil.Buffer{}}, c.home,
				"run", "--group", "dev", "--runtime", "none", "--",
				"sh", "-c", `trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done`)
		}()
		select {
		case <-out.ready:
		case <-time.After(10 * time.Second):
			t.Fatal("the agent command did not start")
		}
		// carapace run handles SIGTERM while the agent runs, so this
		// reaches the agent, not the test binary's default handler.
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			r.want(t, 7, nil, nil)
		case <-time.After(10 * time.Second):
			t.Fatal("the agent command did not stop")
		}
	})

	t.Run("the core ending the session is reported", func(t *testing.T) {
		c := newFakeCore(t)
		flag := filepath.Join(string(c.home), "go")
		stderr := &testutil.Buffer{}
		done := make(chan result, 1)
		go func() {
			done <- carapaceWith(t, cli.Config{Stdout: &testutil.Buffer{}, Stderr: stderr}, c.home,
				"run", "--group", "dev", "--runtime", "none", "--",
				"sh", "-c", `while [ ! -e "$0" ]; do sleep 0.02; done`, flag)
		}()
		waitFor(t, "the session to open", func() bool { return len(c.b.Sessions(t.Context())) == 1 })
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := c.srv.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the warning", func() bool { return strings.Contains(stderr.String(), "the core ended session s1") })
		if err := os.WriteFile(flag, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.code != 0 {
			t.Errorf("exit code %d: %s", r.code, r.stderr)
		}
	})
}

// readyWriter closes ready on the first write.
type readyWriter struct {
	testutil.Buffer
	once  sync.Once
	ready chan struct{}
}

func (w *readyWriter) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	w.once.Do(func() { close(w.ready) })
	return n, err
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunUsage(t *testing.T) {
	noRuntime := "pass --runtime container (or docker, podman, apple) to run the agent in a container, or --runtime none to run it without isolation"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no runtime", []string{"--group", "dev", "--", "true"}, "carapace: " + noRuntime + " (see 'carapace run --help')"},
		{"unknown runtime", []string{"--group", "dev", "--runtime", "lxc", "--", "true"}, `carapace: --runtime "lxc": ` + noRuntime},
		{"prompt without a container", []string{"--group", "dev", "--runtime", "none", "--prompt", "hi", "--", "true"}, "carapace: --prompt needs a container runtime"},
		{"prompt and command", []string{"--group", "dev", "--runtime", "docker", "--prompt", "hi", "--", "true"}, "carapace: give --prompt or a command, not both"},
		{"container with nothing to run", []string{"--group", "dev", "--runtime", "container"}, "carapace: give the agent a --prompt, or a command after --"},
		{"bad group", []string{"--group", "../x", "--runtime", "none", "--", "true"}, `carapace: --group: group "../x": group names are`},
		{"bad group comes first", []string{"--group", "a b", "--", "true"}, `group "a b": group names are`},
		{"no group", []string{"--runtime", "none", "--", "true"}, `carapace: --group: group "": group names are`},
		{"no command", []string{"--group", "dev", "--runtime", "none"}, "carapace: missing the agent command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCore(t)
			r := carapace(t, c.home, append([]string{"run"}, tt.args...)...)
			r.want(t, 2, nil, []string{tt.want})
			if strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("want one line on stderr:\n%s", r.stderr)
			}
			if n := len(c.b.Closed()) + len(c.b.Sessions(t.Context())); n != 0 {
				t.Error("a session was opened")
			}
		})
	}
	t.Run("bad group is checked before the core is needed", func(t *testing.T) {
		r := carapace(t, controltest.TempHome(t), "run", "--group", "x/y", "--runtime", "none", "--", "true")
		r.want(t, 2, nil, []string{"group names are"})
	})
}

func TestNoCore(t *testing.T) {
	h := controltest.TempHome(t)
	want := "carapace: no core is running at " + string(h) + " (start one with `carapace serve`)\n"
	for _, args := range [][]string{
		{"status"}, {"stop"}, {"sessions"}, {"confirm", "list"}, {"confirm", "approve", "c1c1c1"}, {"confirm", "deny", "c1c1c1"},
		{"run", "--group", "dev", "--runtime", "none", "--", "true"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := carapace(t, h, args...)
			if r.code != 1 || r.stderr != want {
				t.Errorf("exit code %d, stderr %q; want 1, %q", r.code, r.stderr, want)
			}
		})
	}
}

func TestStop(t *testing.T) {
	t.Run("waits until the core is gone", func(t *testing.T) {
		c := newFakeCore(t)
		c.b.OnStop = func() {
			time.Sleep(300 * time.Millisecond) // draining
			c.srv.Shutdown(context.Background())
		}
		carapace(t, c.home, "stop").want(t, 0, nil, []string{"stopping the core at " + string(c.home), "core stopped"})
		if c.b.Stops() != 1 {
			t.Errorf("Stop called %d times", c.b.Stops())
		}
	})
	t.Run("gives up after the timeout", func(t *testing.T) {
		c := newFakeCore(t)
		carapace(t, c.home, "stop", "--timeout", "300ms").
			want(t, 1, nil, []string{"carapace: the core at " + string(c.home) + " is still running after 300ms"})
	})
}

func TestServe(t *testing.T) {
	h := controltest.TempHome(t)
	var got home.Dir
	serve := func(ctx context.Context, h home.Dir, logger *slog.Logger) error {
		got = h
		logger.Debug("debug line")
		logger.Info("serving")
		if ctx.Err() != nil {
			return errors.New("context already done")
		}
		return nil
	}
	out, errb := &testutil.Buffer{}, &testutil.Buffer{}
	r := carapaceWith(t, cli.Config{Serve: serve, Stdout: out, Stderr: errb}, h, "serve")
	r.want(t, 0, nil, []string{"msg=serving"})
	if got != h || strings.Contains(r.stderr, "debug line") {
		t.Errorf("home %q, stderr %q", got, r.stderr)
	}
	r = carapaceWith(t, cli.Config{Serve: serve, Stdout: &testutil.Buffer{}, Stderr: &testutil.Buffer{}}, h, "serve", "--log-level", "debug")
	r.want(t, 0, nil, []string{"debug line"})

	failing := func(context.Context, home.Dir, *slog.Logger) error { return errors.New("a core is already running") }
	carapaceWith(t, cli.Config{Serve: failing, Stdout: &testutil.Buffer{}, Stderr: &testutil.Buffer{}}, h, "serve").
		want(t, 1, nil, []string{"carapace: a core is already running\n"})
	carapaceWith(t, cli.Config{Serve: serve, Stdout: &testutil.Buffer{}, Stderr: &testutil.Buffer{}}, h, "serve", "--log-level", "loud").
		want(t, 2, nil, []string{`carapace: --log-level "loud"`})
}

func TestAudit(t *testing.T) {
	h := controltest.TempHome(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	entries := []audit.Entry{
		{Time: t0, Source: "core", Stage: audit.StageCore, Outcome: audit.OutcomeStarted},
		{Time: t0.Add(time.Second), Session: "s1", Group: "main", Source: "agent", Topic: "tool.invoke.echo", Correlation: "k1",
			Stage: audit.StageRoute, Outcome: audit.OutcomeOK, DurationMS: 12.34},
		{Time: t0.Add(2 * time.Second), Session: "s1", Group: "main", Source: "agent", Topic: "tool.invoke.send_email", Correlation: "k2",
			Stage: audit.StageAuthorize, Outcome: audit.OutcomeRejected, Code: "RATE_LIMITED", Reason: "too many\x1b[2J calls"},
		{Time: t0.Add(3 * time.Second), Session: "s2", Group: "work", Source: "agent", Topic: "tool.invoke.fetch", Correlation: "k3",
			Stage: audit.StageHandler, Outcome: audit.OutcomeError, Code: "PLUGIN_ERROR"},
	}
	if err := os.MkdirAll(h.LogsDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	for _, e := range entries {
		b, _ := json.Marshal(e)
		file.Write(append(b, '\n'))
	}
	if err := os.WriteFile(h.AuditLog(), file.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		code  int
		lines []string // a substring of each output line, in order
	}{
		{"all", nil, 0, []string{"started", "tool.invoke.echo", "tool.invoke.send_email", "tool.invoke.fetch"}},
		{"session", []string{"--session", "s1"}, 0, []string{"tool.invoke.echo", "tool.invoke.send_email"}},
		{"group", []string{"--group", "work"}, 0, []string{"tool.invoke.fetch"}},
		{"correlation", []string{"--correlation", "k2"}, 0, []string{`RATE_LIMITED       "too many\x1b[2J calls"`}},
		{"failures", []string{"--outcome", "error"}, 0, []string{"rejected", "PLUGIN_ERROR"}},
		{"last", []string{"--last", "1"}, 0, []string{"s2"}},
		{"session and last", []string{"--session", "s1", "--last", "1"}, 0, []string{"send_email"}},
		{"duration", []string{"--correlation", "k1"}, 0, []string{"s1               main         tool.invoke.echo           route     ok        -                  - 12.3ms"}},
		{"no match", []string{"--session", "nope"}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := carapace(t, h, append([]string{"audit"}, tt.args...)...)
			if r.code != tt.code {
				t.Fatalf("exit code %d: %s", r.code, r.stderr)
			}
			var lines []string
			if s := strings.TrimSuffix(r.stdout, "\n"); s != "" {
				lines = strings.Split(s, "\n")
			}
			if len(lines) != len(tt.lines) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(tt.lines), r.stdout)
			}
			for i, want := range tt.lines {
				if !strings.Contains(lines[i], want) {
					t.Errorf("line %d %q lacks %q", i, lines[i], want)
				}
			}
			if strings.Contains(r.stdout, "\x1b") {
				t.Error("an escape character reached the terminal")
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		r := carapace(t, h, "audit", "--json", "--outcome", "error")
		var got []audit.Entry
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		for dec.More() {
			var e audit.Entry
			if err := dec.Decode(&e); err != nil {
				t.Fatal(err)
			}
			got = append(got, e)
		}
		if len(got) != 2 || got[0].Code != "RATE_LIMITED" || got[1].Code != "PLUGIN_ERROR" || !got[0].Time.Equal(entries[2].Time) {
			t.Errorf("entries = %+v", got)
		}
	})
	t.Run("no log yet", func(t *testing.T) {
		r := carapace(t, controltest.TempHome(t), "audit")
		r.want(t, 0, nil, []string{"no matching audit entries"})
	})
	t.Run("follow", func(t *testing.T) {
		out := &readyWriter{ready: make(chan struct{})}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan int, 1)
		go func() {
			root := cli.New(cli.Config{Stdout: out, Stderr: &testutil.Buffer{}})
			root.SetArgs([]string{"--home", string(h), "audit", "--follow", "--last", "1", "--session", "s1"})
			done <- cli.Execute(ctx, root)
		}()
		select {
		case <-out.ready:
		case <-time.After(10 * time.Second):
			t.Fatal("--follow --last 1 printed nothing")
		}
		f, err := os.OpenFile(h.AuditLog(), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(audit.Entry{Time: t0.Add(time.Minute), Session: "s1", Source: "agent", Topic: "tool.invoke.later",
			Stage: audit.StageRoute, Outcome: audit.OutcomeOK})
		f.Write(append(b, '\n'))
		f.Close()
		waitFor(t, "the new entry", func() bool { return strings.Contains(out.String(), "tool.invoke.later") })
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit code %d", code)
		}
		if lines := strings.Count(out.String(), "\n"); lines != 2 {
			t.Errorf("%d lines, want the last old one and the new one:\n%s", lines, out.String())
		}
	})
	t.Run("bad outcome", func(t *testing.T) {
		carapace(t, h, "audit", "--outcome", "failed").want(t, 2, nil, []string{`carapace: --outcome "failed": want one of`})
	})
}

func TestUsageErrors(t *testing.T) {
	h := controltest.TempHome(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `carapace: unknown command "bogus" for "carapace"`},
		{[]string{"status", "--bogus"}, "carapace: unknown flag: --bogus (see 'carapace status --help')"},
		{[]string{"status", "extra"}, `carapace: unknown command "extra" for "carapace status"`},
		{[]string{"confirm", "bogus"}, `carapace: unknown command "bogus" for "carapace confirm"`},
		{[]string{"audit", "--last", "x"}, `carapace: invalid argument "x" for "--last" flag`},
		{[]string{"stop", "--timeout", "0s"}, "carapace: --timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := carapace(t, h, tt.args...)
			r.want(t, 2, nil, []string{tt.want})
			if strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
				t.Errorf("want one line on stderr and nothing on stdout:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			}
		})
	}
}

// TestHelp checks that every command documents itself.
func TestHelp(t *testing.T) {
	root := cli.New(cli.Config{Stdout: &testutil.Buffer{}, Stderr: &testutil.Buffer{}})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Short == "" || c.Long == "" || c.Example == "" {
			t.Errorf("%s: want Short, Long and Example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	out := &testutil.Buffer{}
	carapaceWith(t, cli.Config{Stdout: out, Stderr: &testutil.Buffer{}}, controltest.TempHome(t), "completion", "bash").want(t, 0, nil, nil)
	if !strings.Contains(out.String(), "bash completion") {
		t.Error("no bash completion script")
	}
}

// A container session prints the agent's output and exits with its status.
func TestRunContainer(t *testing.T) {
	c := newFakeCore(t)
	r := carapace(t, c.home, "run", "--group", "dev", "--runtime", "docker", "--", "echo", "hi")
	r.want(t, 0, []string{"echo hi"}, []string{"to stderr", "running in docker"})
	r = carapace(t, c.home, "run", "--group", "dev", "--runtime", "container", "--prompt", "what time is it")
	r.want(t, 0, []string{"prompt: what time is it"}, nil)
	r = carapace(t, c.home, "run", "--group", "dev", "--runtime", "docker", "--", "exit", "7")
	r.want(t, 7, nil, nil)
}

// carapace watch prints the snapshot, then each change as it comes, with
// the command that approves a waiting call, and exits 1 when the core ends
// the stream.
func TestWatch(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			c := newFakeCore(t)
			c.b.SetStatus(api.Status{Version: "1.2.3", PID: 7, Plugins: []api.PluginStatus{{Name: "echo", Healthy: true, State: "healthy"}}})
			var out, errb testutil.Buffer
			args := []string{"watch"}
			if asJSON {
				args = append(args, "--json")
			}
			done := make(chan result, 1)
			go func() { done <- carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb}, c.home, args...) }()
			waitOut := func(want string) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for !strings.Contains(out.String(), want) {
					if time.Now().After(deadline) {
						t.Fatalf("watch output lacks %q:\n%s\nstderr: %s", want, out.String(), errb.String())
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			if asJSON {
				waitOut(`"type":"snapshot"`)
			} else {
				waitOut("core 1.2.3 (pid 7): 0 sessions, 0 pending confirmations, 1 of 1 plugins healthy")
			}
			const id = "d00dfeed000000000000000000000000"
			c.b.AddConfirmation(api.Confirmation{ID: id, Tool: "send_email", Group: "main", Session: "s1", ArgsHash: "h",
				Arguments: json.RawMessage(`{"to":"a@example.com"}`), CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)})
			if asJSON {
				waitOut(`"type":"confirmation.requested"`)
			} else {
				waitOut(`confirmation d00dfeed waits: send_email for group main (session s1): {"to":"a@example.com"} — carapace confirm approve d00dfeed`)
			}
			if _, err := c.b.Decide(t.Context(), api.Decision{ID: id, ArgsHash: "h", Surface: "telegram", Decider: "owner"}); err != nil {
				t.Fatal(err)
			}
			if asJSON {
				waitOut(`"decision":"denied","surface":"telegram","decider":"owner"`)
			} else {
				waitOut("confirmation d00dfeed send_email: denied on telegram by owner")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = c.srv.Shutdown(ctx)
			r := <-done
			r.want(t, 1, nil, []string{"the core ended the watch: the core is stopping"})
			if asJSON {
				for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
					if !json.Valid([]byte(l)) {
						t.Errorf("not a JSON line: %q", l)
					}
				}
			}
		})
	}
}

func TestPauseResume(t *testing.T) {
	c := newFakeCore(t)
	carapace(t, c.home, "pause").want(t, 0, []string{"paused: no session starts for events"}, nil)
	carapace(t, c.home, "status").want(t, 0, []string{"paused", "carapace resume"}, nil)
	carapace(t, c.home, "resume").want(t, 0, []string{"resumed"}, nil)
	if r := carapace(t, c.home, "status"); strings.Contains(r.stdout, "paused") {
		t.Errorf("status after resume:\n%s", r.stdout)
	}
}
