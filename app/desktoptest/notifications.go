package desktoptest

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// The Desktop Notifications service, as the specification names it.
const (
	NotificationsName = "org.freedesktop.Notifications"
	NotificationsPath = dbus.ObjectPath("/org/freedesktop/Notifications")

	// SignalActionInvoked and SignalNotificationClosed are the service's
	// signals, interface and member.
	SignalActionInvoked      = NotificationsName + ".ActionInvoked"
	SignalNotificationClosed = NotificationsName + ".NotificationClosed"
)

// NotificationServerOptions configures StartNotificationServer.
type NotificationServerOptions struct {
	// Capabilities is GetCapabilities' answer; nil means
	// DefaultCapabilities. Leave "actions" out for a server that cannot
	// show buttons.
	Capabilities []string
	// Name and Version are GetServerInformation's; "" means
	// "carapace-test-notifications" and "1".
	Name, Version string
	// FirstID is the id of the first notification; 0 means 1. Servers
	// count from 1 when they start: a restarted server gives the old
	// ids again, which a test can mimic or avoid.
	FirstID uint32
}

// DefaultCapabilities returns the capabilities of a server that shows
// buttons and a plain-text body.
func DefaultCapabilities() []string { return []string{"actions", "body"} }

// Notification is one Notify call the server answered.
type Notification struct {
	ID            uint32 // the id the server returned
	Sender        string // the caller's unique name
	AppName       string
	ReplacesID    uint32
	Icon          string
	Summary, Body string
	Actions       []string // key, label, key, label, …
	Hints         map[string]dbus.Variant
	ExpireTimeout int32
}

// Urgency returns the "urgency" hint (0 low, 1 normal, 2 critical), or -1
// when the hint is absent or not a byte.
func (n Notification) Urgency() int {
	if u, ok := n.Hints["urgency"].Value().(byte); ok {
		return int(u)
	}
	return -1
}

// CloseCall is one CloseNotification call.
type CloseCall struct {
	ID     uint32
	Sender string // the caller's unique name
}

// Recorded is what a NotificationServer saw, in order.
type Recorded struct {
	Notifications []Notification
	Closes        []CloseCall
	// Open lists the notifications shown now, by id: raised and neither
	// closed by a call nor dismissed.
	Open []uint32
}

// NotificationServer is a fake org.freedesktop.Notifications on a test's
// bus: it answers like a real server, records every call, and presses
// buttons when the test says so. It is safe for concurrent use.
type NotificationServer struct {
	conn     *dbus.Conn
	caps     []string
	name     string
	vers     string
	stopOnce sync.Once

	mu      sync.Mutex
	nextID  uint32
	rec     Recorded
	open    map[uint32]bool
	changes notifier
}

// StartNotificationServer connects to the bus at addr, serves
// org.freedesktop.Notifications there and owns the name (failing the test
// if someone else does). It stops when the test ends.
func StartNotificationServer(t testing.TB, addr string, opts NotificationServerOptions) *NotificationServer {
	t.Helper()
	s := &NotificationServer{
		conn: Connect(t, addr),
		caps: opts.Capabilities,
		name: opts.Name,
		vers: opts.Version,
		open: map[uint32]bool{},
	}
	if s.caps == nil {
		s.caps = DefaultCapabilities()
	}
	if s.name == "" {
		s.name = "carapace-test-notifications"
	}
	if s.vers == "" {
		s.vers = "1"
	}
	if opts.FirstID > 0 {
		s.nextID = opts.FirstID - 1
	}
	if err := s.conn.Export(notificationsObject{s}, NotificationsPath, NotificationsName); err != nil {
		t.Fatalf("desktop: export the notification server: %v", err)
	}
	own(t, s.conn, NotificationsName)
	return s
}

// own makes conn the owner of name, or fails the test.
func own(t testing.TB, conn *dbus.Conn, name string) {
	t.Helper()
	reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue)
	if err != nil {
		t.Fatalf("desktop: own %s: %v", name, err)
	}
	if reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("desktop: own %s: another connection owns it (reply %d)", name, reply)
	}
}

// UniqueName returns the server's unique name: the sender of its signals.
func (s *NotificationServer) UniqueName() string { return UniqueName(s.conn) }

// Done is closed when the server's connection ends: Stop, or the bus going
// away. A server run by bus activation in a helper process serves until
// then.
func (s *NotificationServer) Done() <-chan struct{} { return s.conn.Context().Done() }

// Recorded returns a copy of what the server saw so far.
func (s *NotificationServer) Recorded() Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot()
}

// snapshot copies s.rec; s.mu is held.
func (s *NotificationServer) snapshot() Recorded {
	r := Recorded{
		Notifications: slices.Clone(s.rec.Notifications),
		Closes:        slices.Clone(s.rec.Closes),
		Open:          slices.Sorted(maps.Keys(s.open)),
	}
	return r
}

// Wait waits until cond holds for what the server saw, and returns that;
// it fails the test after Timeout, saying what it waited for.
func (s *NotificationServer) Wait(t testing.TB, what string, cond func(Recorded) bool) Recorded {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		r, changed := s.snapshot(), s.changes.wait()
		s.mu.Unlock()
		if cond(r) {
			return r
		}
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("desktop: the notification server saw no %s within %s; it saw %+v", what, Timeout, r)
		}
	}
}

// Invoke presses the button with key action on notification id, as a
// person would: the server emits ActionInvoked(id, action) to everyone on
// the bus, as real servers do. It checks nothing (any id, any key): the
// test decides what is pressed. When it returns, the bus has routed the
// signal.
func (s *NotificationServer) Invoke(t testing.TB, id uint32, action string) {
	t.Helper()
	emit(t, s.conn, "", NotificationsPath, SignalActionInvoked, id, action)
}

// Dismiss closes notification id as a person would (reason 2, "dismissed
// by the user"; 1 is "expired"): the server forgets it and emits
// NotificationClosed(id, reason).
func (s *NotificationServer) Dismiss(t testing.TB, id, reason uint32) {
	t.Helper()
	s.mu.Lock()
	delete(s.open, id)
	s.changes.changed()
	s.mu.Unlock()
	emit(t, s.conn, "", NotificationsPath, SignalNotificationClosed, id, reason)
}

// Stop releases the name and disconnects, as a server that quits: the bus
// announces the name's new owner (none) before Stop returns. The test's
// end stops the server too.
func (s *NotificationServer) Stop(t testing.TB) {
	t.Helper()
	s.stopOnce.Do(func() {
		if _, err := s.conn.ReleaseName(NotificationsName); err != nil {
			t.Fatalf("desktop: release %s: %v", NotificationsName, err)
		}
		_ = s.conn.Close()
	})
}

// notificationsObject is the server's D-Bus object: its exported methods
// are the service's methods (kept off NotificationServer, whose methods
// are the test's).
type notificationsObject struct{ s *NotificationServer }

// GetCapabilities is org.freedesktop.Notifications.GetCapabilities.
func (o notificationsObject) GetCapabilities() ([]string, *dbus.Error) {
	return slices.Clone(o.s.caps), nil
}

// Notify is org.freedesktop.Notifications.Notify: it replaces the
// notification replacesID when that one is open (returning its id), else
// raises a new one.
func (o notificationsObject) Notify(sender dbus.Sender, appName string, replacesID uint32, icon, summary, body string,
	actions []string, hints map[string]dbus.Variant, expireTimeout int32) (uint32, *dbus.Error) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	id := replacesID
	if !s.open[id] {
		s.nextID++
		id = s.nextID
	}
	s.open[id] = true
	s.rec.Notifications = append(s.rec.Notifications, Notification{
		ID: id, Sender: string(sender), AppName: appName, ReplacesID: replacesID, Icon: icon,
		Summary: summary, Body: body, Actions: actions, Hints: hints, ExpireTimeout: expireTimeout,
	})
	s.changes.changed()
	return id, nil
}

// CloseNotification is org.freedesktop.Notifications.CloseNotification:
// an open notification is closed and NotificationClosed(id, 3) emitted; a
// call for any other id is recorded and answered without error.
func (o notificationsObject) CloseNotification(sender dbus.Sender, id uint32) *dbus.Error {
	s := o.s
	s.mu.Lock()
	wasOpen := s.open[id]
	delete(s.open, id)
	s.rec.Closes = append(s.rec.Closes, CloseCall{ID: id, Sender: string(sender)})
	s.changes.changed()
	s.mu.Unlock()
	if wasOpen {
		if err := s.conn.Emit(NotificationsPath, SignalNotificationClosed, id, uint32(3)); err != nil {
			return dbus.MakeFailedError(fmt.Errorf("emit NotificationClosed: %w", err))
		}
	}
	return nil
}

// GetServerInformation is org.freedesktop.Notifications.GetServerInformation.
func (o notificationsObject) GetServerInformation() (name, vendor, version, specVersion string, err *dbus.Error) {
	return o.s.name, "carapace", o.s.vers, "1.2", nil
}

// Forger is a connection on a test's bus that has nothing to do with the
// notification server, yet sends its signals: a process trying to click
// Approve for the user.
type Forger struct {
	conn *dbus.Conn
}

// NewForger connects an unrelated connection to the bus at addr.
func NewForger(t testing.TB, addr string) *Forger {
	t.Helper()
	return &Forger{conn: Connect(t, addr)}
}

// Conn returns the forger's connection, for calls of the test's own.
func (f *Forger) Conn() *dbus.Conn { return f.conn }

// UniqueName returns the forger's unique name: the sender the bus stamps
// on what it sends.
func (f *Forger) UniqueName() string { return UniqueName(f.conn) }

// ActionInvoked emits a forged ActionInvoked(id, action) on the
// notification service's path and interface: to every connection when
// dest is "", else to dest only (which reaches it whatever its match
// rules). When it returns, the bus has routed the signal.
func (f *Forger) ActionInvoked(t testing.TB, dest string, id uint32, action string) {
	t.Helper()
	emit(t, f.conn, dest, NotificationsPath, SignalActionInvoked, id, action)
}

// NotificationClosed emits a forged NotificationClosed(id, reason), like
// ActionInvoked.
func (f *Forger) NotificationClosed(t testing.TB, dest string, id, reason uint32) {
	t.Helper()
	emit(t, f.conn, dest, NotificationsPath, SignalNotificationClosed, id, reason)
}

// Signal emits any forged signal (name is interface.Member), like
// ActionInvoked.
func (f *Forger) Signal(t testing.TB, dest string, path dbus.ObjectPath, name string, body ...any) {
	t.Helper()
	emit(t, f.conn, dest, path, name, body...)
}
