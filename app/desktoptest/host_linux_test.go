package desktoptest_test

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/carapace-dev/carapace/app/desktoptest"
)

// TestBusStartsNothing: the private bus answers, and a call to a name
// nobody owns fails instead of starting a service — whatever the machine
// has installed (org.freedesktop.Notifications often is activatable).
func TestBusStartsNothing(t *testing.T) {
	addr := desktoptest.StartBus(t)
	conn := desktoptest.Connect(t, addr)
	desktoptest.Barrier(t, conn) // the bus answers: the positive control

	for _, name := range []string{desktoptest.NotificationsName, desktoptest.WatcherName, "org.freedesktop.secrets"} {
		t.Run(name, func(t *testing.T) {
			var started uint32
			err := conn.BusObject().Call("org.freedesktop.DBus.StartServiceByName", 0, name, uint32(0)).Store(&started)
			var dbusErr dbus.Error
			if !errors.As(err, &dbusErr) || dbusErr.Name != "org.freedesktop.DBus.Error.ServiceUnknown" {
				t.Fatalf("StartServiceByName(%s) = %d, %v; want org.freedesktop.DBus.Error.ServiceUnknown", name, started, err)
			}
			if owner := desktoptest.NameOwner(t, conn, name); owner != "" {
				t.Fatalf("%s is owned by %s", name, owner)
			}
		})
	}
}

// TestNotificationServer: the fake records what a client asks, and its
// signals carry its own unique name as sender while a forger's carry the
// forger's — the difference a notifier must check.
func TestNotificationServer(t *testing.T) {
	addr := desktoptest.StartBus(t)
	server := desktoptest.StartNotificationServer(t, addr, desktoptest.NotificationServerOptions{Capabilities: []string{"body"}})
	client := desktoptest.Connect(t, addr)
	sigs := make(chan *dbus.Signal, 16)
	client.Signal(sigs)
	if err := client.AddMatchSignal(dbus.WithMatchInterface(desktoptest.NotificationsName)); err != nil {
		t.Fatal(err)
	}
	obj := client.Object(desktoptest.NotificationsName, desktoptest.NotificationsPath)

	var caps []string
	if err := obj.Call(desktoptest.NotificationsName+".GetCapabilities", 0).Store(&caps); err != nil || !slices.Equal(caps, []string{"body"}) {
		t.Fatalf("GetCapabilities = %q, %v; want [body]", caps, err)
	}
	var name, vendor, version, spec string
	if err := obj.Call(desktoptest.NotificationsName+".GetServerInformation", 0).Store(&name, &vendor, &version, &spec); err != nil || name != "carapace-test-notifications" || spec != "1.2" {
		t.Fatalf("GetServerInformation = %q %q %q %q, %v", name, vendor, version, spec, err)
	}

	notify := func(replaces uint32, summary string) uint32 {
		t.Helper()
		var id uint32
		hints := map[string]dbus.Variant{"urgency": dbus.MakeVariant(byte(2))}
		if err := obj.Call(desktoptest.NotificationsName+".Notify", 0, "app", replaces, "icon", summary, "body",
			[]string{"approve", "Approve"}, hints, int32(0)).Store(&id); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		return id
	}
	first := notify(0, "one")
	second := notify(0, "two")
	replaced := notify(first, "one again")
	if first == 0 || second == first || replaced != first {
		t.Fatalf("ids: first %d, second %d, replacing the first %d; want distinct non-zero ids and the first kept", first, second, replaced)
	}
	r := server.Recorded()
	if len(r.Notifications) != 3 || r.Notifications[2].Summary != "one again" || r.Notifications[2].ReplacesID != first ||
		r.Notifications[0].Sender != desktoptest.UniqueName(client) || r.Notifications[0].Urgency() != 2 ||
		!slices.Equal(r.Notifications[0].Actions, []string{"approve", "Approve"}) {
		t.Fatalf("recorded %+v", r.Notifications)
	}
	if !slices.Equal(r.Open, []uint32{first, second}) {
		t.Fatalf("open %v; want %v", r.Open, []uint32{first, second})
	}

	// Each signal's sender is the connection that sent it.
	forger := desktoptest.NewForger(t, addr)
	for _, tc := range []struct {
		name   string
		send   func()
		sender string
		signal string
		body   []any
	}{
		{"server invokes", func() { server.Invoke(t, second, "approve") }, server.UniqueName(), desktoptest.SignalActionInvoked, []any{second, "approve"}},
		{"forger invokes", func() { forger.ActionInvoked(t, "", second, "approve") }, forger.UniqueName(), desktoptest.SignalActionInvoked, []any{second, "approve"}},
		{"client closes", func() {
			if err := obj.Call(desktoptest.NotificationsName+".CloseNotification", 0, first).Err; err != nil {
				t.Fatal(err)
			}
		}, server.UniqueName(), desktoptest.SignalNotificationClosed, []any{first, uint32(3)}},
		{"server dismisses", func() { server.Dismiss(t, second, 2) }, server.UniqueName(), desktoptest.SignalNotificationClosed, []any{second, uint32(2)}},
	} {
		tc.send()
		sig := receive(t, sigs)
		if sig.Sender != tc.sender || sig.Name != tc.signal || !slices.Equal(sig.Body, tc.body) {
			t.Errorf("%s: got %s from %s %v; want %s from %s %v", tc.name, sig.Name, sig.Sender, sig.Body, tc.signal, tc.sender, tc.body)
		}
	}
	r = server.Wait(t, "all closed", func(r desktoptest.Recorded) bool { return len(r.Open) == 0 })
	if len(r.Closes) != 1 || r.Closes[0].ID != first {
		t.Fatalf("closes %+v; want one for %d", r.Closes, first)
	}

	// Stop hands the name back.
	server.Stop(t)
	if owner := desktoptest.NameOwner(t, client, desktoptest.NotificationsName); owner != "" {
		t.Fatalf("after Stop, %s is owned by %s", desktoptest.NotificationsName, owner)
	}
}

// TestTrayApp drives a real fyne.io/systray program through the watcher:
// it registers, its properties and its menu read right, clicks reach it
// (nested ones too), its menu changes are seen, and a forged registration
// or menu signal from another connection is told apart from it.
func TestTrayApp(t *testing.T) {
	addr := desktoptest.StartBus(t)
	watcher := desktoptest.StartWatcher(t, addr)
	app := desktoptest.StartProcess(t, addr, exec.Command(desktoptest.Build(t, "./trayapp")))
	app.WaitLine(t, "ready", 1)

	// A forger registers an item of its own, on the same path.
	forger := desktoptest.NewForger(t, addr)
	if err := forger.Conn().Object(desktoptest.WatcherName, desktoptest.WatcherPath).
		Call(desktoptest.WatcherName+".RegisterStatusNotifierItem", 0, "/StatusNotifierItem").Err; err != nil {
		t.Fatal(err)
	}
	item := watcher.WaitItem(t, app.PID())
	if item.Service == forger.UniqueName() || item.Path != "/StatusNotifierItem" || item.Registered != "/StatusNotifierItem" {
		t.Fatalf("item %+v; want the app's /StatusNotifierItem", item)
	}
	if forged := watcher.WaitItem(t, os.Getpid()); forged.Service != forger.UniqueName() {
		t.Fatalf("the forged registration was recorded as %s; want the forger's %s", forged.Service, forger.UniqueName())
	}

	// The watcher's own properties, read like a panel would.
	var registered []string
	if err := forger.Conn().Object(desktoptest.WatcherName, desktoptest.WatcherPath).
		Call("org.freedesktop.DBus.Properties.Get", 0, desktoptest.WatcherName, "RegisteredStatusNotifierItems").Store(&registered); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(registered, item.Service+"/StatusNotifierItem") {
		t.Fatalf("RegisteredStatusNotifierItems = %q; want the app's item", registered)
	}

	props := item.Properties(t)
	for _, c := range []struct{ name, got, want string }{
		{"Title", props.Title, "Trayapp"},
		{"ToolTip", props.ToolTip.Title, "trayapp tooltip"},
		{"Status", props.Status, "Active"},
		{"Menu", string(props.Menu), "/StatusNotifierItem/menu"},
	} {
		if c.got != c.want {
			t.Errorf("property %s = %q; want %q", c.name, c.got, c.want)
		}
	}
	if len(props.IconPixmap) != 1 || props.IconPixmap[0].Width != 22 || len(props.IconPixmap[0].ARGB) != 22*22*4 {
		t.Errorf("IconPixmap: %d pixmaps; want one of 22×22", len(props.IconPixmap))
	}

	// The first layout is the top level alone; the submenu follows.
	first := item.Layout(t)
	if got, want := first.Root.Labels(), []string{"Status: idle", "Approve", "More", "", "Quit"}; !slices.Equal(got, want) {
		t.Fatalf("top level %q; want %q\n%s", got, want, first)
	}
	if more := first.Find("More"); more.ChildrenDisplay != "submenu" || len(more.Children) != 0 {
		t.Errorf("in the first layout, More = %+v; want a submenu announced but not sent (fyne.io/systray v1.12.2 sends depth 1 first)", *more)
	}
	menu := item.WaitMenu(t, "the submenu", func(m desktoptest.Menu) bool { return len(m.Find("More").Children) == 2 })
	for _, c := range []struct {
		path            []string
		typ             string
		enabled         bool
		toggleType      string
		toggleState     int32
		childrenDisplay string
	}{
		{[]string{"Status: idle"}, "standard", false, "", 0, ""},
		{[]string{"Approve"}, "standard", true, "", 0, ""},
		{[]string{"More"}, "standard", true, "", 0, "submenu"},
		{[]string{"More", "Deny"}, "standard", true, "", 0, ""},
		{[]string{"More", "Start at login"}, "standard", true, "checkmark", 0, ""},
	} {
		n := menu.Find(c.path...)
		if n == nil {
			t.Errorf("no entry %q in\n%s", c.path, menu)
			continue
		}
		if n.Type != c.typ || n.Enabled != c.enabled || n.ToggleType != c.toggleType || n.ToggleState != c.toggleState || n.ChildrenDisplay != c.childrenDisplay || !n.Visible {
			t.Errorf("entry %q = %+v", c.path, *n)
		}
	}
	if sep := menu.Root.Children[3]; sep.Type != "separator" {
		t.Errorf("the fourth entry is %+v; want a separator", *sep)
	}
	item.AboutToShow(t, menu.Find("More").ID) // answered; fyne.io/systray never asks for a reread

	// A menu signal from a connection that registered no item is nobody's
	// (the first forger's would count for its own item, not the app's).
	updates := item.Updates()
	stranger := desktoptest.NewForger(t, addr)
	stranger.Signal(t, watcher.UniqueName(), "/StatusNotifierItem/menu", desktoptest.MenuInterface+".LayoutUpdated", uint32(999), int32(0))
	watcher.WaitIgnored(t, stranger.UniqueName(), desktoptest.MenuInterface+".LayoutUpdated")

	// Clicks, top level and nested, and what they change.
	for _, c := range []struct {
		path  []string
		line  string
		check func(desktoptest.Menu) bool
	}{
		{[]string{"Approve"}, "clicked approve", func(m desktoptest.Menu) bool { return m.Find("Status: approved") != nil }},
		{[]string{"More", "Deny"}, "clicked deny", func(m desktoptest.Menu) bool { return m.Find("Status: denied") != nil }},
		{[]string{"More", "Start at login"}, "toggled true", func(m desktoptest.Menu) bool { return m.Find("More", "Start at login").Checked() }},
		{[]string{"More", "Start at login"}, "toggled false", func(m desktoptest.Menu) bool { return !m.Find("More", "Start at login").Checked() }},
	} {
		m := item.WaitMenu(t, "the entry "+c.path[len(c.path)-1], func(m desktoptest.Menu) bool { return m.Find(c.path...) != nil })
		item.Click(t, m.Find(c.path...).ID)
		app.WaitLine(t, c.line, 1)
		item.WaitMenu(t, "the effect of "+c.line, c.check)
	}
	if item.Updates() <= updates {
		t.Errorf("the item's own menu signals were not counted: %d, then %d", updates, item.Updates())
	}

	// Quit: the program exits and its item leaves.
	item.Click(t, menu.Find("Quit").ID)
	app.WaitLine(t, "clicked quit", 1)
	if err := app.Wait(t); err != nil {
		t.Fatalf("trayapp exited with %v; want status 0\n%s", err, app.Output())
	}
	item.WaitGone(t)
}

// receive returns the next signal of the notification service's
// interface, failing the test after desktoptest.Timeout.
func receive(t *testing.T, sigs <-chan *dbus.Signal) *dbus.Signal {
	t.Helper()
	timeout := time.After(desktoptest.Timeout)
	for {
		select {
		case sig := <-sigs:
			if strings.HasPrefix(sig.Name, desktoptest.NotificationsName+".") {
				return sig
			}
		case <-timeout:
			t.Fatalf("no signal within %s", desktoptest.Timeout)
			return nil
		}
	}
}
