package control_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// The test binary re-executes itself as a client in another process: with
// peerEnv set it asks the core at that socket for its status and exits 0 on
// success; with sessionEnv set it opens a session, prints its id and waits
// to be killed.
const (
	peerEnv    = "CARAPACE_CONTROL_TEST_PEER"
	sessionEnv = "CARAPACE_CONTROL_TEST_SESSION"
)

func TestMain(m *testing.M) {
	if socket := os.Getenv(peerEnv); socket != "" {
		os.Exit(peerChild(socket))
	}
	if socket := os.Getenv(sessionEnv); socket != "" {
		os.Exit(sessionChild(socket))
	}
	os.Exit(m.Run())
}

func peerChild(socket string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := control.NewClient(socket).Status(ctx)
	if err != nil {
		fmt.Printf("status failed: %v\n", err)
		return 1
	}
	fmt.Printf("status ok: version %s\n", st.Version)
	return 0
}

func sessionChild(socket string) int {
	h, err := control.NewClient(socket).OpenSession(context.Background(), "crashy")
	if err != nil {
		fmt.Printf("open failed: %v\n", err)
		return 1
	}
	fmt.Println(h.Info().ID)
	select {} // until killed
}

// fixture is a fake core serving on a temporary home.
type fixture struct {
	b      *controltest.Backend
	srv    *control.Server
	socket string
	c      *control.Client
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	h := controltest.TempHome(t)
	b := controltest.NewBackend(h)
	srv := controltest.Start(t, b, h.ControlSocket())
	return &fixture{b: b, srv: srv, socket: h.ControlSocket(), c: control.NewClient(h.ControlSocket())}
}

func TestEndpoints(t *testing.T) {
	const c1 = "c1c1c1c1aaaaaaaaaaaaaaaaaaaaaaaa"
	confirmation := api.Confirmation{
		ID: c1, Session: "s9", Group: "main", Tool: "send_email", Correlation: "corr",
		ArgsHash: "sha256:abc", Arguments: json.RawMessage(`{"to":"a@example.com"}`),
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(5 * time.Minute),
	}
	approve := func(id, hash string) func(ctx context.Context, c *control.Client) error {
		return func(ctx context.Context, c *control.Client) error {
			_, err := c.Decide(ctx, api.Decision{ID: id, Approve: true, ArgsHash: hash, Surface: "cli", Decider: "alice"})
			return err
		}
	}
	deny := func(id string) func(ctx context.Context, c *control.Client) error {
		return func(ctx context.Context, c *control.Client) error {
			_, err := c.Decide(ctx, api.Decision{ID: id, ArgsHash: "sha256:abc", Surface: "cli"})
			return err
		}
	}
	tests := []struct {
		name    string
		setup   func(b *controltest.Backend)
		call    func(ctx context.Context, c *control.Client) error
		wantErr error  // errors.Is target; nil for success
		wantMsg string // a substring of the error message
		check   func(t *testing.T, b *controltest.Backend)
	}{
		{
			name: "status",
			setup: func(b *controltest.Backend) {
				b.SetStatus(api.Status{Version: "1.2.3", PID: 42, Tools: 7, Plugins: []api.PluginStatus{
					{Name: "telegram", Healthy: true}, {Name: "weather", Category: "NETWORK_ERROR"},
				}})
				b.AddConfirmation(confirmation)
			},
			call: func(ctx context.Context, c *control.Client) error {
				st, err := c.Status(ctx)
				if err != nil {
					return err
				}
				if st.Version != "1.2.3" || st.PID != 42 || st.Tools != 7 || st.PendingConfirmations != 1 ||
					len(st.Plugins) != 2 || st.Plugins[1].Category != "NETWORK_ERROR" || st.Home == "" {
					return fmt.Errorf("unexpected status %+v", st)
				}
				return nil
			},
		},
		{
			name: "stop",
			call: func(ctx context.Context, c *control.Client) error { return c.Stop(ctx) },
			check: func(t *testing.T, b *controltest.Backend) {
				if b.Stops() != 1 {
					t.Errorf("Stop called %d times, want 1", b.Stops())
				}
			},
		},
		{
			name: "sessions",
			call: func(ctx context.Context, c *control.Client) error {
				h, err := c.OpenSession(ctx, "main")
				if err != nil {
					return err
				}
				defer h.Close()
				list, err := c.Sessions(ctx)
				if err != nil {
					return err
				}
				if len(list) != 1 || list[0].ID != h.Info().ID || list[0].Group != "main" || list[0].Runtime != "none" {
					return fmt.Errorf("sessions = %+v, want the one opened (%+v)", list, h.Info())
				}
				return nil
			},
		},
		{
			name: "no sessions is an empty list",
			call: func(ctx context.Context, c *control.Client) error {
				list, err := c.Sessions(ctx)
				if err == nil && (list == nil || len(list) != 0) {
					return fmt.Errorf("sessions = %#v, want empty", list)
				}
				return err
			},
		},
		{
			name:  "confirmations",
			setup: func(b *controltest.Backend) { b.AddConfirmation(confirmation) },
			call: func(ctx context.Context, c *control.Client) error {
				list, err := c.Confirmations(ctx, false)
				if err != nil {
					return err
				}
				if len(list) != 1 || list[0].ID != c1 || list[0].ArgsHash != "sha256:abc" ||
					string(list[0].Arguments) != `{"to":"a@example.com"}` {
					return fmt.Errorf("confirmations = %+v", list)
				}
				return nil
			},
		},
		{
			name:  "approve",
			setup: func(b *controltest.Backend) { b.AddConfirmation(confirmation) },
			call:  approve(c1, "sha256:abc"),
			check: func(t *testing.T, b *controltest.Backend) {
				want := []controltest.Decision{{ID: c1, Approve: true, ArgsHash: "sha256:abc", Surface: "cli", Decider: "alice"}}
				if d := b.Decisions(); len(d) != 1 || d[0] != want[0] {
					t.Errorf("decisions = %+v, want %+v", d, want)
				}
			},
		},
		{
			name: "a second decision is refused as already decided",
			setup: func(b *controltest.Backend) {
				b.AddConfirmation(confirmation)
			},
			call: func(ctx context.Context, c *control.Client) error {
				if err := approve(c1, "sha256:abc")(ctx, c); err != nil {
					return fmt.Errorf("first decision: %w", err)
				}
				return deny(c1)(ctx, c)
			},
			wantErr: api.ErrConflict,
			wantMsg: "already decided: approved (cli)",
		},
		{
			name:  "one confirmation by a unique prefix",
			setup: func(b *controltest.Backend) { b.AddConfirmation(confirmation) },
			call: func(ctx context.Context, c *control.Client) error {
				got, err := c.Confirmation(ctx, "C1C1C1")
				if err == nil && got.ID != c1 {
					return fmt.Errorf("got %+v", got)
				}
				return err
			},
		},
		{
			name: "an ambiguous prefix",
			setup: func(b *controltest.Backend) {
				b.AddConfirmation(confirmation)
				other := confirmation
				other.ID = "c1c1c1c1bbbbbbbbbbbbbbbbbbbbbbbb"
				b.AddConfirmation(other)
			},
			call: func(ctx context.Context, c *control.Client) error {
				_, err := c.Confirmation(ctx, "c1c1c1")
				return err
			},
			wantErr: api.ErrInvalid,
			wantMsg: "ambiguous",
		},
		{
			name:  "a prefix too short",
			setup: func(b *controltest.Backend) { b.AddConfirmation(confirmation) },
			call: func(ctx context.Context, c *control.Client) error {
				_, err := c.Confirmation(ctx, "c1c1")
				return err
			},
			wantErr: api.ErrInvalid,
			wantMsg: "at least 6",
		},
		{
			name:  "a decision needs a surface",
			setup: func(b *controltest.Backend) { b.AddConfirmation(confirmation) },
			call: func(ctx context.Context, c *control.Client) error {
				_, err := c.Decide(ctx, api.Decision{ID: c1, ArgsHash: "sha256:abc"})
				return err
			},
			wantErr: api.ErrInvalid,
			wantMsg: "surface",
		},
		{
			name:  "a long surface is quoted cut between characters",
			setup: func(b *controltest.Backend) { b.AddConfirmation(confirmation) },
			call: func(ctx context.Context, c *control.Client) error {
				_, err := c.Decide(ctx, api.Decision{ID: c1, ArgsHash: "sha256:abc", Surface: strings.Repeat("€", 30)})
				return err
			},
			wantErr: api.ErrInvalid,
			wantMsg: `surface "` + strings.Repeat("€", 21) + `…"`,
		},
		{
			name:    "a decision names a full id",
			setup:   func(b *controltest.Backend) { b.AddConfirmation(confirmation) },
			call:    approve("c1c1c1", "sha256:abc"),
			wantErr: api.ErrInvalid,
			wantMsg: "not a confirmation id",
		},
		{
			name:    "approve with another hash",
			setup:   func(b *controltest.Backend) { b.AddConfirmation(confirmation) },
			call:    approve(c1, "sha256:other"),
			wantErr: api.ErrConflict,
			wantMsg: "arguments changed",
		},
		{
			name:    "approve without a hash",
			setup:   func(b *controltest.Backend) { b.AddConfirmation(confirmation) },
			call:    approve(c1, ""),
			wantErr: api.ErrInvalid,
			wantMsg: "args_hash",
		},
		{
			name:    "approve unknown",
			call:    approve("0123456789abcdef0123456789abcdef", "h"),
			wantErr: api.ErrNotFound,
			wantMsg: "confirmation 0123456789abcdef0123456789abcdef",
		},
		{
			name:  "deny",
			setup: func(b *controltest.Backend) { b.AddConfirmation(confirmation) },
			call:  deny(c1),
			check: func(t *testing.T, b *controltest.Backend) {
				if d := b.Decisions(); len(d) != 1 || d[0].Approve {
					t.Errorf("decisions = %+v, want one denial", d)
				}
			},
		},
		{
			name:    "deny unknown",
			call:    deny("0123456789abcdef0123456789abcdef"),
			wantErr: api.ErrNotFound,
		},
		{
			name: "open session with a bad group",
			call: func(ctx context.Context, c *control.Client) error {
				_, err := c.OpenSession(ctx, "../etc")
				return err
			},
			wantErr: api.ErrInvalid,
			wantMsg: "group names are",
		},
		{
			name: "backend conflict on open",
			setup: func(b *controltest.Backend) {
				b.Fail = failWith("OpenSession", fmt.Errorf("draining: %w", api.ErrConflict))
			},
			call: func(ctx context.Context, c *control.Client) error {
				_, err := c.OpenSession(ctx, "main")
				return err
			},
			wantErr: api.ErrConflict,
			wantMsg: "draining",
		},
		{
			name:    "internal errors are not passed on",
			setup:   func(b *controltest.Backend) { b.Fail = failWith("Decide", errors.New("disk on fire at /secret/path")) },
			call:    deny(c1),
			wantMsg: "internal error",
			check: func(t *testing.T, b *controltest.Backend) {
				if len(b.Decisions()) != 0 {
					t.Error("a failed decision was recorded")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.setup != nil {
				tt.setup(f.b)
			}
			err := tt.call(t.Context(), f.c)
			switch {
			case tt.wantErr == nil && tt.wantMsg == "" && err != nil:
				t.Fatalf("error: %v", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("error = %v, want one wrapping %v", err, tt.wantErr)
			case tt.wantMsg != "" && (err == nil || !strings.Contains(err.Error(), tt.wantMsg)):
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantMsg)
			}
			if err != nil && strings.Contains(err.Error(), "/secret/path") {
				t.Errorf("internal detail reached the client: %v", err)
			}
			if tt.check != nil {
				tt.check(t, f.b)
			}
		})
	}
}

func failWith(method string, err error) func(string) error {
	return func(m string) error {
		if m == method {
			return err
		}
		return nil
	}
}

// rawClient is an HTTP client of the control socket, for requests the
// typed client never sends.
func rawClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

func TestMalformedRequests(t *testing.T) {
	f := newFixture(t)
	hc := rawClient(f.socket)
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"unknown field", "POST", "/v1/sessions", `{"group":"main","teleport":true}`, 400},
		{"unknown runtime", "POST", "/v1/sessions", `{"group":"main","runtime":"lxc"}`, 400},
		{"command without a container", "POST", "/v1/sessions", `{"group":"main","command":["sh"]}`, 400},
		{"empty body", "POST", "/v1/sessions", ``, 400},
		{"trailing data", "POST", "/v1/sessions", `{"group":"main"} {}`, 400},
		{"body too large", "POST", "/v1/confirmations/c1/approve", `{"args_hash":"` + strings.Repeat("a", 70<<10) + `"}`, 400},
		{"unknown endpoint", "GET", "/v2/status", ``, 404},
		{"delete unknown session", "DELETE", "/v1/sessions/nope", ``, 404},
		{"wrong method", "DELETE", "/v1/status", ``, 404},
		{"tasks, all not 0 or 1", "GET", "/v1/tasks?all=yes", ``, 400},
		{"task rm, purge not 0 or 1", "DELETE", "/v1/tasks/t-ab12cd34?purge=true", ``, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, "http://carapace"+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("status = %d (%s), want %d", resp.StatusCode, body, tt.want)
			}
			{
				var eb struct{ Error string }
				if err := json.Unmarshal(body, &eb); err != nil || eb.Error == "" {
					t.Errorf("body %q is not {\"error\": …}", body)
				}
			}
		})
	}
	if n := len(f.b.Sessions(t.Context())); n != 0 {
		t.Errorf("%d sessions opened by malformed requests", n)
	}
}

func TestSessionStream(t *testing.T) {
	t.Run("cancelling the context closes the session", func(t *testing.T) {
		f := newFixture(t)
		ctx, cancel := context.WithCancel(t.Context())
		h, err := f.c.OpenSession(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		if h.Info().ID == "" || h.Info().Socket == "" {
			t.Fatalf("session info %+v", h.Info())
		}
		cancel()
		f.b.WaitClosed(t, h.Info().ID)
		waitDone(t, h)
	})

	t.Run("closing the connection closes the session", func(t *testing.T) {
		f := newFixture(t)
		conn, err := net.Dial("unix", f.socket)
		if err != nil {
			t.Fatal(err)
		}
		body := `{"group":"main"}`
		fmt.Fprintf(conn, "POST /v1/sessions HTTP/1.1\r\nHost: carapace\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		var s api.Session
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the stream is held …
		if got := f.b.Closed(); len(got) != 0 {
			t.Fatalf("session closed while its stream is open: %v", got)
		}
		conn.Close() // … until the connection goes away
		f.b.WaitClosed(t, s.ID)
	})

	t.Run("a killed client process does not leak its session", func(t *testing.T) {
		f := newFixture(t)
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), sessionEnv+"="+f.socket)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		id, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			t.Fatalf("read the child's session id: %v", err)
		}
		id = strings.TrimSpace(id)
		if got := f.b.Sessions(t.Context()); len(got) != 1 || got[0].ID != id {
			t.Fatalf("sessions = %+v, want %s", got, id)
		}
		cmd.Process.Kill()
		cmd.Wait()
		f.b.WaitClosed(t, id)
	})

	t.Run("Close deletes the session once and ends the stream", func(t *testing.T) {
		f := newFixture(t)
		h, err := f.c.OpenSession(t.Context(), "main")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if err := h.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		waitDone(t, h)
		time.Sleep(50 * time.Millisecond)
		if got := f.b.Closed(); len(got) != 1 || got[0] != h.Info().ID {
			t.Fatalf("closed = %v, want [%s] once", got, h.Info().ID)
		}
	})

	t.Run("server shutdown ends the stream and closes the session", func(t *testing.T) {
		f := newFixture(t)
		h, err := f.c.OpenSession(t.Context(), "main")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.Done():
			t.Fatal("stream ended early")
		case <-time.After(50 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := f.srv.Shutdown(ctx); err != nil {
			t.Fatalf("shutdown with a held stream: %v", err)
		}
		waitDone(t, h)
		f.b.WaitClosed(t, h.Info().ID)
		if err := h.Close(); err != nil {
			t.Errorf("Close after the core stopped: %v", err)
		}
	})
}

func waitDone(t *testing.T, h *control.SessionHandle) {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the session stream did not end")
	}
}

func TestNoCore(t *testing.T) {
	h := controltest.TempHome(t)
	stale := filepath.Join(string(h), "stale", "run", "control.sock")
	makeStaleSocket(t, stale)
	tests := []struct{ name, socket, home string }{
		{"no socket", h.ControlSocket(), string(h)},
		{"stale socket", stale, filepath.Join(string(h), "stale")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := control.NewClient(tt.socket).Status(t.Context())
			if !errors.Is(err, control.ErrNotRunning) {
				t.Fatalf("error = %v, want ErrNotRunning", err)
			}
			want := "no core is running at " + tt.home + " (start one with `carapace serve`)"
			if err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
		})
	}
}

// makeStaleSocket leaves a socket file at path that nobody listens on, as a
// crashed core would.
func makeStaleSocket(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
}

func TestListen(t *testing.T) {
	t.Run("creates the directory and a 0600 socket", func(t *testing.T) {
		h := controltest.TempHome(t)
		ln, err := control.Listen(h.ControlSocket())
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		assertMode(t, h.RunDir(), fs.ModeDir|0o700)
		assertMode(t, h.ControlSocket(), fs.ModeSocket|0o600)
	})

	t.Run("refuses while a core answers", func(t *testing.T) {
		f := newFixture(t)
		_, err := control.Listen(f.socket)
		if err == nil || !strings.Contains(err.Error(), "a core is already running") {
			t.Fatalf("error = %v, want 'a core is already running'", err)
		}
		if _, err := f.c.Status(t.Context()); err != nil {
			t.Fatalf("the running core was disturbed: %v", err)
		}
	})

	t.Run("replaces a stale socket", func(t *testing.T) {
		h := controltest.TempHome(t)
		makeStaleSocket(t, h.ControlSocket())
		controltest.Start(t, controltest.NewBackend(h), h.ControlSocket())
		if _, err := control.NewClient(h.ControlSocket()).Status(t.Context()); err != nil {
			t.Fatal(err)
		}
		assertMode(t, h.ControlSocket(), fs.ModeSocket|0o600)
	})

	t.Run("leaves a file that is not a socket alone", func(t *testing.T) {
		h := controltest.TempHome(t)
		if err := os.MkdirAll(h.RunDir(), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.ControlSocket(), []byte("precious"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := control.Listen(h.ControlSocket()); err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Fatalf("error = %v, want 'not a socket'", err)
		}
		if b, _ := os.ReadFile(h.ControlSocket()); string(b) != "precious" {
			t.Error("the file was replaced")
		}
	})
}

func assertMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() & (fs.ModeType | fs.ModePerm); got != want {
		t.Errorf("%s: mode %v, want %v", path, got, want)
	}
}

// TestPeerUID runs this test binary as a client in a child process, once as
// our uid and once as uid 65534, against a socket made 0666 (in a 0755
// directory) so that only the peer check can stop the second.
func TestPeerUID(t *testing.T) {
	dir, err := os.MkdirTemp("", "ct")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "control.sock")
	ln, err := control.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(socket, 0o666); err != nil { // this test only
		t.Fatal(err)
	}
	logs := &testutil.Buffer{}
	srv := control.NewServer(controltest.NewBackend("/peer"), slog.New(slog.NewTextHandler(logs, nil)))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		if err := <-served; err != nil {
			t.Error(err)
		}
	})

	// The test binary's own directory may be private to us: run a copy.
	exe := copyExecutable(t, dir)

	tests := []struct {
		name   string
		cred   *syscall.Credential
		wantOK bool
	}{
		{"same uid", nil, true},
		{"uid 65534", &syscall.Credential{Uid: 65534, Gid: 65534}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cred != nil && os.Geteuid() != 0 {
				// Only root can start a process as another user; the
				// rejection path itself is covered without root by
				// TestUIDListenerRejects.
				t.Log("not root: cannot start a child as uid 65534; run the tests as root (as CI does) to cover this case")
				return
			}
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), peerEnv+"="+socket)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tt.cred}
			out, err := cmd.CombinedOutput()
			if tt.wantOK {
				if err != nil || !strings.Contains(string(out), "status ok") {
					t.Fatalf("request as our uid: %v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(string(out), "status failed") {
				t.Fatalf("request as uid 65534 was not rejected: %v\n%s", err, out)
			}
			if !strings.Contains(logs.String(), "rejected a connection from another user") ||
				!strings.Contains(logs.String(), "peer_uid=65534") {
				t.Errorf("the rejection was not logged:\n%s", logs.String())
			}
		})
	}
}

func copyExecutable(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "control.test")
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestShutdownClosesSilentConnections: a connection that has sent no
// request (a silent local process, or the spare connection an HTTP client
// keeps after a dial race) does not hold Shutdown up; net/http alone waits
// 5 s for it, longer than this test's deadline.
func TestShutdownClosesSilentConnections(t *testing.T) {
	h := controltest.TempHome(t)
	ln, err := control.Listen(h.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	srv := control.NewServer(controltest.NewBackend(h), slog.New(slog.DiscardHandler))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	// A connection that says nothing, then a request on another one: the
	// server accepts in order, so once the request is answered the silent
	// connection is the server's too.
	silent, err := net.Dial("unix", h.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if _, err := control.NewClient(h.ControlSocket()).Status(t.Context()); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a silent connection open: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the silent connection is still open (read %d bytes)", n)
	}
}

// The watch stream: the snapshot first, then each change as the backend
// reports it, and an "end" line when the core stops.
func TestWatch(t *testing.T) {
	f := newFixture(t)
	f.b.SetStatus(api.Status{Version: "1.2.3", Plugins: []api.PluginStatus{{Name: "echo", Healthy: true}}})
	pending := api.Confirmation{ID: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Tool: "send", Group: "main", ArgsHash: "h1"}
	f.b.AddConfirmation(pending)
	ws, err := f.c.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	next := func() api.WatchEvent {
		t.Helper()
		ev, err := ws.Next()
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	snap := next()
	if snap.Type != api.WatchSnapshot || snap.Status == nil || snap.Status.Version != "1.2.3" ||
		len(snap.Confirmations) != 1 || snap.Confirmations[0].ID != pending.ID || len(snap.Plugins) != 1 {
		t.Fatalf("snapshot %+v", snap)
	}
	second := pending
	second.ID = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	f.b.AddConfirmation(second)
	if ev := next(); ev.Type != api.WatchConfirmationRequested || ev.Confirmation == nil || ev.Confirmation.ID != second.ID {
		t.Fatalf("after a request: %+v", ev)
	}
	if _, err := f.c.Decide(t.Context(), api.Decision{ID: second.ID, Approve: true, ArgsHash: "h1", Surface: "cli"}); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Type != api.WatchConfirmationResolved || ev.Confirmation.Decision != "approved" || ev.Confirmation.Surface != "cli" {
		t.Fatalf("after a decision: %+v", ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() { _ = f.srv.Shutdown(ctx) }()
	if ev := next(); ev.Type != api.WatchEnd || !strings.Contains(ev.Error, "stopping") {
		t.Fatalf("at shutdown: %+v", ev)
	}
	if _, err := ws.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the end: %v, want EOF", err)
	}
}
