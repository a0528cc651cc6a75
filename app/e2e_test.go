package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/app"
	"github.com/carapace-dev/carapace/app/boot"
	"github.com/carapace-dev/carapace/app/menu"
	"github.com/carapace-dev/carapace/app/notify"
	"github.com/carapace-dev/carapace/cmd/wiring/coretest"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/server"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/plugins"
)

// bins are the real binaries the end-to-end tests run, built once by
// TestMain: ipc, the agent's only way out, and carapace, the core the app
// starts.
var bins struct{ ipc, carapace string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "appbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.ipc, bins.carapace = filepath.Join(dir, "ipc"), filepath.Join(dir, "carapace")
	for _, b := range []struct{ out, pkg, cgo string }{
		{bins.ipc, "../cmd/ipc", "0"},
		{bins.carapace, "../cmd/carapace", "1"}, // the core links SQLite with FTS5
	} {
		cmd := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", b.out, b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+b.cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// bigkit is a built-in plugin for these tests: big_confirm, a high-risk
// tool whose arguments may be too large for the watch stream.
type bigkit struct{}

const bigkitManifest = `{
  "description": "test plugin", "version": "1.0.0", "app_compat": ">=0.1.0", "author": {"name": "tests"},
  "provides": {"channels": [], "tools": [
    {"name": "big_confirm", "description": "return the blob's length once approved", "risk_level": "high",
     "arguments_schema": {"type": "object", "additionalProperties": false, "required": ["blob"], "properties": {"blob": {"type": "string"}}}}
  ]},
  "subscribes": []
}`

var _ plugin.Handler = bigkit{}

func (bigkit) Init(context.Context, map[string]any, plugin.Services) error { return nil }
func (bigkit) Shutdown(context.Context) error                              { return nil }
func (bigkit) Invoke(_ context.Context, req *plugin.Request) (map[string]any, error) {
	blob, _ := req.Arguments["blob"].(string)
	return map[string]any{"length": len(blob)}, nil
}

const coreConfig = `
[confirm]
timeout = "300s"
`

// bgIPC is a run of bin/ipc in the background.
type bgIPC struct {
	cmd            *exec.Cmd
	stdout, stderr testutil.Buffer
	done           chan struct{}
	err            error
}

func startIPC(t *testing.T, socket, topic, args string) *bgIPC {
	t.Helper()
	bg := &bgIPC{done: make(chan struct{})}
	bg.cmd = exec.Command(bins.ipc, topic, args)
	bg.cmd.Env = []string{"CARAPACE_IPC_ENDPOINT=ipc://" + socket, "PATH=/usr/bin:/bin"}
	bg.cmd.Stdout, bg.cmd.Stderr = &bg.stdout, &bg.stderr
	if err := bg.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { bg.err = bg.cmd.Wait(); close(bg.done) }()
	t.Cleanup(func() {
		select {
		case <-bg.done:
		default:
			_ = bg.cmd.Process.Kill()
			<-bg.done
		}
	})
	return bg
}

// waitPending waits for ipc's status line and returns its confirmation id.
func (bg *bgIPC) waitPending(t *testing.T) string {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		sc := bufio.NewScanner(strings.NewReader(bg.stderr.String()))
		for sc.Scan() {
			var st struct{ Status, Confirmation string }
			if json.Unmarshal(sc.Bytes(), &st) == nil && st.Status == "waiting_for_confirmation" && st.Confirmation != "" {
				return st.Confirmation
			}
		}
		select {
		case <-bg.done:
			t.Fatalf("ipc exited before it waited: %v\nstdout %s\nstderr %s", bg.err, bg.stdout.String(), bg.stderr.String())
		case <-deadline.C:
			t.Fatal("ipc did not wait for a confirmation")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// wait waits for ipc to exit and returns its exit code and stdout.
func (bg *bgIPC) wait(t *testing.T) (int, string) {
	t.Helper()
	select {
	case <-bg.done:
	case <-time.After(waitTimeout):
		t.Fatal("ipc did not exit")
	}
	var ee *exec.ExitError
	switch {
	case bg.err == nil:
		return 0, bg.stdout.String()
	case errors.As(bg.err, &ee):
		return ee.ExitCode(), bg.stdout.String() + bg.stderr.String()
	}
	t.Fatalf("run ipc: %v", bg.err)
	return 0, ""
}

// argLines returns the argument lines of confirmation id's submenu.
func argLines(tr menu.Tree, id string) []string {
	sub, _ := tr.Find("confirm/" + id)
	var out []string
	for _, it := range sub.Children {
		if strings.HasPrefix(it.ID, "confirm/"+id+"/arg/") {
			out = append(out, it.Title)
		}
	}
	return out
}

// Through the real core and bin/ipc: a high-risk call shows in the menu
// and as a notification; the notification's Approve completes it; a menu
// Deny denies another whose arguments were too large for the watch
// stream; a CLI approval withdraws both the notification and the menu
// item; Pause pauses the core.
func TestApprovalsThroughTheRealCore(t *testing.T) {
	c := coretest.MustStart(t, coretest.Options{Config: coreConfig, Server: server.Options{
		Builtins: append(plugins.Builtins(), loader.Builtin{Name: "bigkit", Manifest: []byte(bigkitManifest), New: func(loader.Env) plugin.Handler { return bigkit{} }}),
	}})
	s := c.Session(t, "main")
	n := newFakeNotifier()
	a := startApp(t, c.Home, func(o *app.Options) {
		o.Notifier = n
		o.Boot.Executable = filepath.Join(t.TempDir(), "no-carapace-here") // the core runs: nothing to start
	})
	a.tray.waitFor(t, "the core running", titled("status", "Carapace: running"))
	a.tray.waitFor(t, "the session", has("session/"+s.ID+"/stop"))
	info := func(id string) api.Confirmation {
		t.Helper()
		got, err := c.Client.Confirmation(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	t.Run("approved on the notification", func(t *testing.T) {
		bg := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"launch the rocket\n\u001b[31m\u202eredaeh"}`)
		id := bg.waitPending(t)
		tr := a.tray.waitFor(t, "the approval", has("confirm/"+id+"/approve"))
		want := `message = "launch the rocket\u000a\u001b[31m\u202eredaeh"`
		if got := argLines(tr, id); len(got) != 1 || got[0] != want {
			t.Errorf("argument lines %q, want [%q]", got, want)
		}
		p := info(id)
		shown := n.waitShown(t, id)
		if !strings.Contains(shown.Title, "echo_confirm") || !strings.Contains(shown.Body, p.ArgsHash[:12]) || !strings.Contains(shown.Body, want) {
			t.Errorf("notification %+v: want the tool, the digest prefix %s and %s", shown, p.ArgsHash[:12], want)
		}
		n.act(t, notify.Action{Key: id, Approve: true})
		if code, out := bg.wait(t); code != 0 || !strings.Contains(out, "launch the rocket") {
			t.Errorf("ipc: exit %d, %s", code, out)
		}
		n.waitWithdrawn(t, id)
		a.tray.waitFor(t, "the approval gone", hasNot("confirm/"+id))
		if got := info(id); got.Decision != "approved" || got.Surface != app.SurfaceNotification || got.Decider != "tester" {
			t.Errorf("decided %+v, want approved on notification by tester", got)
		}
	})

	t.Run("denied in the menu, arguments fetched", func(t *testing.T) {
		blob := strings.Repeat("0123456789abcdef", 3<<10) // 48 KiB: more than a watch event carries
		bg := startIPC(t, s.Socket, "tool.invoke.big_confirm", `{"blob":"`+blob+`"}`)
		id := bg.waitPending(t)
		tr := a.tray.waitFor(t, "the approval with its arguments", has("confirm/"+id+"/arg/1"))
		got := argLines(tr, id)
		if wantLines := menu.Wrap(`blob = "`+blob+`"`, menu.Width, "  ↳ "); len(got) != len(wantLines) || got[len(got)-1] != wantLines[len(wantLines)-1] {
			t.Errorf("%d argument lines, want %d", len(got), len(wantLines))
		}
		a.tray.click(t, tr, "confirm/"+id+"/deny")
		if code, out := bg.wait(t); code != 1 || !strings.Contains(out, "denied") {
			t.Errorf("ipc: exit %d, %s", code, out)
		}
		n.waitWithdrawn(t, id)
		a.tray.waitFor(t, "the approval gone", hasNot("confirm/"+id))
		if got := info(id); got.Decision != "denied" || got.Surface != app.SurfaceMenu || got.Decider != "tester" {
			t.Errorf("decided %+v, want denied on app by tester", got)
		}
	})

	t.Run("approved with the CLI", func(t *testing.T) {
		bg := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"from the terminal"}`)
		id := bg.waitPending(t)
		a.tray.waitFor(t, "the approval", has("confirm/"+id+"/approve"))
		n.waitShown(t, id)
		if _, err := c.Client.Decide(t.Context(), api.Decision{ID: id, Approve: true, ArgsHash: info(id).ArgsHash, Surface: "cli", Decider: "someone"}); err != nil {
			t.Fatal(err)
		}
		if code, out := bg.wait(t); code != 0 {
			t.Errorf("ipc: exit %d, %s", code, out)
		}
		n.waitWithdrawn(t, id)
		a.tray.waitFor(t, "the approval gone", hasNot("confirm/"+id))
		// Late: the notification's button after the CLI decided.
		n.act(t, notify.Action{Key: id, Approve: false})
		if got := info(id); got.Surface != "cli" {
			t.Errorf("decided %+v, want the CLI's decision to stand", got)
		}
	})

	t.Run("pause and resume", func(t *testing.T) {
		for _, paused := range []bool{true, false} {
			a.tray.click(t, a.tray.current(), "pause")
			want := "Carapace: running"
			if paused {
				want = "Carapace: paused"
			}
			a.tray.waitFor(t, want, titled("status", want))
			if st, err := c.Client.Status(t.Context()); err != nil || st.Paused != paused {
				t.Fatalf("status paused %v (%v), want %v", st.Paused, err, paused)
			}
		}
	})

	t.Run("stop the session", func(t *testing.T) {
		a.tray.click(t, a.tray.current(), "session/"+s.ID+"/stop")
		a.tray.waitFor(t, "the session gone", hasNot("session/"+s.ID))
		list, err := c.Client.Sessions(t.Context())
		if err != nil || len(list) != 0 {
			t.Errorf("sessions %v (%v), want none", list, err)
		}
	})
}

// The app starts a core when none runs and stops it on Quit; when the
// core dies — killed, or stopped by someone else — the menu says so and
// offers Restart, which starts one the app then owns.
func TestCoreDeathOffersRestart(t *testing.T) {
	tests := []struct {
		name    string
		found   bool // a core runs before the app starts
		end     func(t *testing.T, c *control.Client, pid int)
		problem string
	}{
		{"the app's core is killed", false, func(t *testing.T, _ *control.Client, pid int) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}, "the core exited: signal: killed"},
		{"a core the app found is stopped", true, func(t *testing.T, c *control.Client, _ int) {
			if err := c.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
		}, "the core stopped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := controltest.TempHome(t)
			client := control.NewClient(h.ControlSocket())
			if tt.found {
				other, err := boot.Ensure(t.Context(), boot.Options{Home: h, Executable: bins.carapace})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = other.Stop(context.Background()) })
			}
			a := startApp(t, h, func(o *app.Options) { o.Boot.Executable = bins.carapace })
			tr := a.tray.waitFor(t, "the core running", titled("status", "Carapace: running"))
			if it, _ := tr.Find("quit"); strings.Contains(it.Tooltip, "stop the core") == tt.found {
				t.Errorf("quit tooltip %q with a core the app found: %v", it.Tooltip, tt.found)
			}
			st, err := client.Status(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			tt.end(t, client, st.PID)
			tr = a.tray.waitFor(t, "the core not running", titled("status", "Carapace: not running"))
			if p, _ := tr.Find("status"); !strings.HasPrefix(p.Tooltip, tt.problem) {
				t.Errorf("problem %q, want %q", p.Tooltip, tt.problem)
			}
			if tr.Icon != menu.IconAttention {
				t.Error("the icon does not ask for attention")
			}
			a.tray.click(t, tr, "restart")
			tr = a.tray.waitFor(t, "the core running again", titled("status", "Carapace: running"))
			if it, _ := tr.Find("quit"); !strings.Contains(it.Tooltip, "stop the core") {
				t.Errorf("after a restart, quit tooltip %q: the app owns the core now", it.Tooltip)
			}
			st2, err := client.Status(t.Context())
			if err != nil || st2.PID == st.PID {
				t.Fatalf("after restart: pid %d (%v), before %d", st2.PID, err, st.PID)
			}
			a.tray.click(t, tr, "quit")
			a.wait(t)
			if _, err := client.Status(t.Context()); !errors.Is(err, control.ErrNotRunning) {
				t.Errorf("after quit the core the app started answers: %v", err)
			}
		})
	}
}
