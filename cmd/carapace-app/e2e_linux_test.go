//go:build linux

package main_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/testutil/desktop"
)

// The menu-bar app, the real binary, on a private session bus with a fake
// notification server and a StatusNotifierWatcher (internal/testutil/
// desktop), driving a real core it starts itself, through real bin/ipc
// calls: what issue 14 asks of it on a Linux desktop.
func TestAppOnADesktop(t *testing.T) {
	bin := t.TempDir()
	// The app starts the carapace beside it: build both into one folder.
	// Never with the race detector: fyne systray's global state does not
	// survive it (SURFACES.md §3), which is why the app runs as a process.
	buildInto(t, bin, "carapace-app", ".", "CGO_ENABLED=0")
	buildInto(t, bin, "carapace", "../carapace", "CGO_ENABLED=1", "-tags", "sqlite_fts5")
	buildInto(t, bin, "ipc", "../ipc", "CGO_ENABLED=0")

	dir, err := os.MkdirTemp("", "cpapp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := home.Dir(dir)
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.Config(), []byte("[confirm]\ntimeout = \"2m\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	xdg := t.TempDir()

	addr := desktop.StartBus(t)
	notes := desktop.StartNotificationServer(t, addr, desktop.NotificationServerOptions{})
	watcher := desktop.StartWatcher(t, addr)
	cmd := exec.Command(filepath.Join(bin, "carapace-app"), "--home", dir, "--log-level", "debug")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+xdg)
	proc := desktop.StartProcess(t, addr, cmd)
	item := watcher.WaitItem(t, proc.PID())

	// No core was running: the app started one.
	client := control.NewClient(h.ControlSocket())
	var st control.Status
	waitUntil(t, "the core the app starts", func() bool {
		st, err = client.Status(context.Background())
		return err == nil
	})
	item.WaitMenu(t, "the running core in the menu", func(m desktop.Menu) bool { return m.Find("Carapace: running") != nil })

	// 1. A high-risk call raises a notification naming the tool and the
	// digest prefix; its Approve action completes the call.
	sess, err := client.OpenSession(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	first := startIPC(t, bin, sess.Info().Socket, `{"message":"approved by notification"}`)
	c1 := pendingOne(t, client, "")
	rec := notes.Wait(t, "a notification for the call", func(r desktop.Recorded) bool { return len(r.Open) > 0 })
	n := rec.Notifications[len(rec.Notifications)-1]
	if !strings.Contains(n.Summary+n.Body, "echo_confirm") || !strings.Contains(n.Body, c1.ArgsHash[:12]) {
		t.Fatalf("the notification does not name the tool and the digest prefix %s: %q / %q", c1.ArgsHash[:12], n.Summary, n.Body)
	}
	// A forged click from another connection first: it must change nothing
	// (the genuine click that follows is what decides).
	desktop.NewForger(t, addr).ActionInvoked(t, n.Sender, n.ID, "deny")
	notes.Invoke(t, n.ID, "approve")
	if out := first.wait(t); !strings.Contains(out, "approved by notification") {
		t.Fatalf("the approved call answered %q", out)
	}
	if got := decided(t, client, c1.ID); got.Decision != "approved" || got.Surface != "notification" {
		t.Fatalf("confirmation after the notification's Approve: %+v (the forged deny must not count)", got)
	}

	// 2. A second call is denied from the tray menu.
	second := startIPC(t, bin, sess.Info().Socket, `{"message":"denied from the menu"}`)
	c2 := pendingOne(t, client, c1.ID)
	m := item.WaitMenu(t, "the second call's Deny", func(m desktop.Menu) bool { return denyOf(m, c2.ArgsHash) != nil })
	item.Click(t, denyOf(m, c2.ArgsHash).ID)
	if out := second.wait(t); !strings.Contains(out, "CONFIRMATION_DENIED") {
		t.Fatalf("the call denied from the menu answered %q", out)
	}
	if got := decided(t, client, c2.ID); got.Decision != "denied" || got.Surface != "app" {
		t.Fatalf("confirmation after the menu's Deny: %+v", got)
	}

	// 3. A call approved with the CLI withdraws its notification and its
	// menu item.
	third := startIPC(t, bin, sess.Info().Socket, `{"message":"approved by the cli"}`)
	c3 := pendingOne(t, client, c1.ID, c2.ID)
	rec = notes.Wait(t, "the third notification", func(r desktop.Recorded) bool { return len(r.Open) > 0 })
	openID := rec.Open[len(rec.Open)-1]
	item.WaitMenu(t, "the third call in the menu", func(m desktop.Menu) bool { return denyOf(m, c3.ArgsHash) != nil })
	if _, err := client.Decide(context.Background(), control.Decision{ID: c3.ID, Approve: true, ArgsHash: c3.ArgsHash, Surface: "cli"}); err != nil {
		t.Fatal(err)
	}
	if out := third.wait(t); !strings.Contains(out, "approved by the cli") {
		t.Fatalf("the CLI-approved call answered %q", out)
	}
	notes.Wait(t, "the notification withdrawn", func(r desktop.Recorded) bool {
		for _, c := range r.Closes {
			if c.ID == openID {
				return true
			}
		}
		return false
	})
	item.WaitMenu(t, "the menu item withdrawn", func(m desktop.Menu) bool { return denyOf(m, c3.ArgsHash) == nil })

	// 4. The login-item checkbox writes and removes the autostart file.
	autostart := filepath.Join(xdg, "autostart", "carapace.desktop")
	for _, want := range []bool{true, false} {
		m = item.WaitMenu(t, "the Start at login item", func(m desktop.Menu) bool { return m.Find("Start at login") != nil })
		item.Click(t, m.Find("Start at login").ID)
		waitUntil(t, "the autostart file to follow the checkbox", func() bool {
			raw, err := os.ReadFile(autostart)
			on := err == nil && !bytes.Contains(raw, []byte("Hidden=true"))
			return on == want
		})
		item.WaitMenu(t, "the checkbox to show it", func(m desktop.Menu) bool {
			n := m.Find("Start at login")
			return n != nil && n.Checked() == want
		})
	}
	if raw, err := os.ReadFile(autostart); err == nil && !bytes.Contains(raw, []byte("Hidden=true")) {
		t.Errorf("the autostart entry is still enabled:\n%s", raw)
	}

	// 5. Quit stops the core the app started.
	m = item.WaitMenu(t, "Quit", func(m desktop.Menu) bool { return m.Find("Quit Carapace") != nil })
	item.Click(t, m.Find("Quit Carapace").ID)
	if err := proc.Wait(t); err != nil {
		t.Fatalf("the app did not quit cleanly: %v\n%s", err, proc.Output())
	}
	if _, err := client.Status(context.Background()); !errors.Is(err, control.ErrNotRunning) {
		t.Fatalf("after Quit the core the app started still answers: %v", err)
	}
	_ = st
}

// denyOf finds the enabled Deny item of the confirmation whose submenu
// names the digest prefix of args (its args_hash).
func denyOf(m desktop.Menu, argsHash string) *desktop.MenuNode {
	approvals := m.FindFunc(func(n *desktop.MenuNode) bool { return strings.HasPrefix(n.Label, "Pending approvals") })
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
			if x.Label == "Deny" && x.Enabled {
				return x
			}
		}
	}
	return nil
}

// pendingOne waits for the one pending confirmation that is not one of
// seen.
func pendingOne(t *testing.T, c *control.Client, seen ...string) control.Confirmation {
	t.Helper()
	var found control.Confirmation
	waitUntil(t, "a pending confirmation", func() bool {
		list, err := c.Confirmations(context.Background(), false)
		if err != nil {
			return false
		}
		for _, cf := range list {
			known := false
			for _, s := range seen {
				known = known || cf.ID == s
			}
			if !known {
				found = cf
				return true
			}
		}
		return false
	})
	return found
}

// decided waits for confirmation id to be resolved and returns it.
func decided(t *testing.T, c *control.Client, id string) control.Confirmation {
	t.Helper()
	var cf control.Confirmation
	waitUntil(t, "the decision", func() bool {
		var err error
		cf, err = c.Confirmation(context.Background(), id)
		return err == nil && !cf.Pending()
	})
	return cf
}

// bgIPC is bin/ipc running a high-risk echo in the background.
type bgIPC struct {
	out  bytes.Buffer
	done chan struct{}
}

func startIPC(t *testing.T, bin, socket, args string) *bgIPC {
	t.Helper()
	b := &bgIPC{done: make(chan struct{})}
	cmd := exec.Command(filepath.Join(bin, "ipc"), "tool.invoke.echo_confirm", args)
	cmd.Env = []string{"CARAPACE_IPC_ENDPOINT=ipc://" + socket}
	cmd.Stdout, cmd.Stderr = &b.out, &b.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(b.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-b.done })
	return b
}

func (b *bgIPC) wait(t *testing.T) string {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(desktop.Timeout):
		t.Fatalf("bin/ipc did not end within %s: %s", desktop.Timeout, b.out.String())
	}
	return b.out.String()
}

// buildInto builds pkg as bin/name with the given env and flags.
func buildInto(t *testing.T, bin, name, pkg, env string, flags ...string) {
	t.Helper()
	args := append([]string{"build", "-o", filepath.Join(bin, name)}, flags...)
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Env = append(os.Environ(), env)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
}

// waitUntil polls cond until it holds, or fails the test after
// desktop.Timeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(desktop.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
