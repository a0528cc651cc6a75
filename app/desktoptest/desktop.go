// Package desktoptest is a Linux desktop session for tests, made of real
// parts: a private dbus-daemon, and, on that bus, the two services the
// menu-bar app talks to, written here in Go so that a test can see and
// drive everything the app does.
//
//   - StartBus runs a private session bus that cannot start anything by
//     itself (no service directories): a test's bus has exactly the
//     services the test put there.
//   - StartNotificationServer owns org.freedesktop.Notifications: it
//     records every Notify and CloseNotification, and the test makes it
//     press a button (Invoke) or close a notification (Dismiss).
//     NewForger is another, unrelated connection that emits the same
//     signals, or clicks a tray menu (MenuEvent), to prove that a forged
//     click is ignored.
//   - StartWatcher owns org.kde.StatusNotifierWatcher, where a tray icon
//     (fyne.io/systray's StatusNotifierItem) registers itself; the Item it
//     returns reads the icon's properties and its com.canonical.dbusmenu
//     menu, waits for the menu to change and clicks its entries — what a
//     panel does when a person opens the menu. StartWatcherWith can put
//     the panel on a connection of its own, as KDE Plasma does.
//   - StartProcess runs a program (the app) on the bus and lets the test
//     wait for its output and its exit; Build builds it.
//
// A typical test:
//
//	addr := desktoptest.StartBus(t)
//	notes := desktoptest.StartNotificationServer(t, addr, desktoptest.NotificationServerOptions{})
//	tray := desktoptest.StartWatcher(t, addr)
//	app := desktoptest.StartProcess(t, addr, exec.Command(desktoptest.Build(t, "../../cmd/carapace-app")))
//	item := tray.WaitItem(t, app.PID())
//	menu := item.WaitMenu(t, "a pending approval", func(m desktoptest.Menu) bool {
//		return m.FindFunc(func(n *desktoptest.MenuNode) bool { return n.Label == "Deny" }) != nil
//	})
//
// Programs using fyne.io/systray run as subprocesses, never inside a test
// binary: the library keeps global state and has a data race (its refresh
// against GetLayout) that -race reports. A fyne systray program answers
// the first GetLayout with the top level only, by design, and announces
// the rest with LayoutUpdated a moment later: read menus with WaitMenu.
//
// Without dbus-daemon a test fails in the project's CI and is skipped
// elsewhere, with the command that installs it (testutil.Require); every
// other problem fails the test. Waits for something to happen
// are bounded by Timeout; no test here measures time.
package desktoptest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// Timeout bounds every wait for something that should happen (a process
// printing a line, a menu changing, a bus starting): generous, for a
// loaded machine running the race detector. Only a failing test waits
// that long.
var Timeout = 30 * time.Second

// busDriver is the bus daemon's own name and interface.
const (
	busDriver     = "org.freedesktop.DBus"
	busDriverPath = dbus.ObjectPath("/org/freedesktop/DBus")
)

// Connect opens a new connection to the bus at addr, closed when the test
// ends. Signals reach the connection's channels in the order they arrive.
func Connect(t testing.TB, addr string) *dbus.Conn {
	t.Helper()
	conn, err := dbus.Connect(addr, dbus.WithSignalHandler(dbus.NewSequentialSignalHandler()))
	if err != nil {
		t.Fatalf("desktop: connect to the bus at %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// UniqueName returns the unique name (":1.42") the bus gave conn.
func UniqueName(conn *dbus.Conn) string {
	return conn.Names()[0]
}

// NameOwner returns the unique name owning name on conn's bus, or "" when
// nobody owns it.
func NameOwner(t testing.TB, conn *dbus.Conn, name string) string {
	t.Helper()
	var owner string
	err := busCall(conn, "GetNameOwner", name).Store(&owner)
	var dbusErr dbus.Error
	switch {
	case errors.As(err, &dbusErr) && dbusErr.Name == busDriver+".Error.NameHasNoOwner":
		return ""
	case err != nil:
		t.Fatalf("desktop: ask the bus who owns %s: %v", name, err)
	}
	return owner
}

// Barrier returns when the bus has handled everything conn sent before:
// a signal sent before it has been routed to its receivers, so anything
// the bus delivers to them afterwards arrives after it.
func Barrier(t testing.TB, conn *dbus.Conn) {
	t.Helper()
	var id string
	if err := busCall(conn, "GetId").Store(&id); err != nil {
		t.Fatalf("desktop: round trip to the bus: %v", err)
	}
}

// busCall calls a method of the bus daemon, bounded by Timeout.
func busCall(conn *dbus.Conn, method string, args ...any) *dbus.Call {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	return conn.BusObject().CallWithContext(ctx, busDriver+"."+method, 0, args...)
}

// call calls a method on an object, bounded by Timeout, never starting a
// service.
func call(conn *dbus.Conn, dest string, path dbus.ObjectPath, method string, args ...any) *dbus.Call {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	return conn.Object(dest, path).CallWithContext(ctx, method, dbus.FlagNoAutoStart, args...)
}

// emit sends a signal from conn, to dest only when dest is not "" (a
// signal with a destination reaches that connection whatever its match
// rules), and returns when the bus has routed it.
func emit(t testing.TB, conn *dbus.Conn, dest string, path dbus.ObjectPath, name string, body ...any) {
	t.Helper()
	iface, member := splitName(name)
	msg := &dbus.Message{
		Type: dbus.TypeSignal,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldPath:      dbus.MakeVariant(path),
			dbus.FieldInterface: dbus.MakeVariant(iface),
			dbus.FieldMember:    dbus.MakeVariant(member),
		},
		Body: body,
	}
	if dest != "" {
		msg.Headers[dbus.FieldDestination] = dbus.MakeVariant(dest)
	}
	if len(body) > 0 {
		msg.Headers[dbus.FieldSignature] = dbus.MakeVariant(dbus.SignatureOf(body...))
	}
	if err := conn.Send(msg, nil).Err; err != nil {
		t.Fatalf("desktop: emit %s: %v", name, err)
	}
	Barrier(t, conn)
}

// splitName splits "a.b.Member" into "a.b" and "Member".
func splitName(name string) (iface, member string) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[:i], name[i+1:]
		}
	}
	panic(fmt.Sprintf("desktop: %q is not interface.Member", name))
}

// notifier is a broadcast: wait returns a channel closed at the next
// change. The zero value is ready to use; callers hold their own lock.
type notifier struct{ ch chan struct{} }

// wait returns a channel closed by the next changed.
func (n *notifier) wait() <-chan struct{} {
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// changed wakes every waiter.
func (n *notifier) changed() {
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}
