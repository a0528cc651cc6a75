//go:build linux

package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/app/desktoptest"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
)

// built holds the binaries the desktop tests run, built once for all of
// them: the app, and the carapace and ipc it finds beside it.
var built struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// binaries builds carapace-app, carapace and ipc into one folder, once,
// and returns it. Never with the race detector: fyne systray's global
// state does not survive it (SURFACES.md §3), which is why the app runs
// as a process.
func binaries(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "cpappbin")
		if built.err != nil {
			return
		}
		for _, b := range []struct {
			name, pkg string
			env       string
			flags     []string
		}{
			{"carapace-app", ".", "CGO_ENABLED=0", nil},
			{"carapace", "../carapace", "CGO_ENABLED=1", []string{"-tags", "sqlite_fts5"}},
			{"ipc", "../ipc", "CGO_ENABLED=0", nil},
		} {
			args := append([]string{"build", "-o", filepath.Join(built.dir, b.name)}, b.flags...)
			cmd := exec.Command("go", append(args, b.pkg)...)
			cmd.Env = append(os.Environ(), b.env)
			if out, err := cmd.CombinedOutput(); err != nil {
				built.err = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

// appOptions configure startApp.
type appOptions struct {
	// Notifications is the fake notification server's options.
	Notifications desktoptest.NotificationServerOptions
	// Watcher is the StatusNotifierWatcher's (and the panel's) options.
	Watcher desktoptest.WatcherOptions
}

// desktopApp is the real carapace-app on a private session bus, with a
// fake notification server and a StatusNotifierWatcher, and the core it
// started in a home of its own.
type desktopApp struct {
	bin, addr, xdg string
	home           home.Dir
	client         *control.Client
	notes          *desktoptest.NotificationServer
	watcher        *desktoptest.Watcher
	item           *desktoptest.Item
	proc           *desktoptest.Process
}

// startApp starts the app and waits until its menu shows the core it
// started running.
func startApp(t *testing.T, o appOptions) *desktopApp {
	t.Helper()
	a := &desktopApp{bin: binaries(t), xdg: t.TempDir()}
	dir, err := os.MkdirTemp("", "cpapp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a.home = home.Dir(dir)
	if err := a.home.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.home.Config(), []byte("[confirm]\ntimeout = \"2m\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.addr = desktoptest.StartBus(t)
	a.notes = desktoptest.StartNotificationServer(t, a.addr, o.Notifications)
	a.watcher = desktoptest.StartWatcherWith(t, a.addr, o.Watcher)
	cmd := exec.Command(filepath.Join(a.bin, "carapace-app"), "--home", dir, "--log-level", "debug")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+a.xdg)
	a.proc = desktoptest.StartProcess(t, a.addr, cmd)
	a.item = a.watcher.WaitItem(t, a.proc.PID())

	// No core was running: the app started one.
	a.client = control.NewClient(a.home.ControlSocket())
	waitUntil(t, "the core the app starts", func() bool {
		_, err := a.client.Status(context.Background())
		return err == nil
	})
	t.Cleanup(func() { _ = a.client.Stop(context.Background()) })
	a.item.WaitMenu(t, "the running core in the menu", func(m desktoptest.Menu) bool { return m.Find("Carapace: running") != nil })
	return a
}

// session opens a session of group main, closed when the test ends.
func (a *desktopApp) session(t *testing.T) *control.SessionHandle {
	t.Helper()
	sess, err := a.client.OpenSession(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// decisions counts the audit log's decisions on confirmation id, by
// outcome ("approved", "denied").
func (a *desktopApp) decisions(t *testing.T, id string) map[string]int {
	t.Helper()
	f, err := os.Open(a.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e struct{ Stage, Outcome, Confirmation string }
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Stage == "confirm" && e.Confirmation == id && e.Outcome != "pending" {
			n[e.Outcome]++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// entryOf finds the enabled entry labelled label in the submenu of the
// confirmation whose title names the digest prefix of argsHash.
func entryOf(m desktoptest.Menu, argsHash, label string) *desktoptest.MenuNode {
	approvals := m.FindFunc(func(n *desktoptest.MenuNode) bool { return strings.HasPrefix(n.Label, "Pending approvals") })
	if approvals == nil {
		return nil
	}
	for _, sub := range approvals.Children {
		// dbusmenu labels double a literal underscore (one marks the
		// access key): echo_confirm is "echo__confirm" on the bus.
		if !strings.Contains(sub.Label, "echo__confirm") || !strings.Contains(sub.Label, argsHash[:12]) {
			continue
		}
		for _, x := range sub.Children {
			if x.Label == label && x.Enabled {
				return x
			}
		}
	}
	return nil
}

// denyOf finds the enabled Deny entry of the confirmation with argsHash.
func denyOf(m desktoptest.Menu, argsHash string) *desktoptest.MenuNode {
	return entryOf(m, argsHash, "Deny")
}

// approveOf finds the enabled Approve entry of the confirmation with
// argsHash.
func approveOf(m desktoptest.Menu, argsHash string) *desktoptest.MenuNode {
	return entryOf(m, argsHash, "Approve")
}
