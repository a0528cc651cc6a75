//go:build linux

package notify

// Linux: the Desktop Notifications Specification (1.2) over D-Bus, spoken
// with godbus directly.
//
// Who may press a button. ActionInvoked and NotificationClosed are
// signals: any connection on the session bus can emit one with any body,
// broadcast or addressed to this Notifier's connection alone (a signal
// with a destination reaches it whatever its match rules say). The bus
// daemon, though, stamps every message with the unique name of the
// connection that sent it. So a signal counts only when its sender is the
// unique name that owns org.freedesktop.Notifications now (asked with
// GetNameOwner, then followed through NameOwnerChanged, itself accepted
// only from the bus daemon), its path is the specification's, and it names
// a notification this Notifier raised with that owner and still shows —
// and arrived after the Notify reply that gave its id, so that a signal
// about an earlier notification with the same id, or about content since
// replaced, does not count for the one shown now. The
// match rules ask the daemon for the owner's signals only; the check on
// each signal is what makes a forged one harmless. A new owner (the
// notification server restarted, or another took its name) invalidates
// every id: the old server's notifications are forgotten, not carried over.
//
// What the Notifier never does: launch a bus (no autolaunch), block on the
// Actions channel (a full buffer drops the press and logs it — the
// approval stays pending in the core and in the menu, and fails closed on
// expiry), or show an approval without buttons.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
)

const (
	serviceName           = "org.freedesktop.Notifications"
	servicePath           = dbus.ObjectPath("/org/freedesktop/Notifications")
	sigActionInvoked      = serviceName + ".ActionInvoked"
	sigNotificationClosed = serviceName + ".NotificationClosed"

	busDriver           = "org.freedesktop.DBus"
	busDriverPath       = dbus.ObjectPath("/org/freedesktop/DBus")
	sigNameOwnerChanged = busDriver + ".NameOwnerChanged"

	// The action keys sent with each notification; the labels are what
	// the buttons say.
	actionApprove = "approve"
	actionDeny    = "deny"

	// urgencyCritical is the specification's "critical" urgency: the
	// server keeps the notification until it is answered or closed.
	urgencyCritical = byte(2)

	// actionBuffer is how many presses wait for the app to read them;
	// more are dropped (and logged) rather than blocking the bus.
	actionBuffer = 16

	// callTimeout bounds each call to the bus or the notification server;
	// connectTimeout bounds connecting and authenticating.
	callTimeout    = 10 * time.Second
	connectTimeout = 10 * time.Second

	defaultAppName = "Carapace"
)

// Log messages; tests wait for some of them.
const (
	msgServer    = "notification server"
	msgForeign   = "ignored a notification signal not sent by the notification server"
	msgDropped   = "dropped a notification action: the app does not read them"
	msgNotOurs   = "ignored a notification action for a notification this app does not show"
	msgNoApprove = "ignored Approve on a notification that offers Deny only"
	menuFallback = "approve from the Carapace menu"
)

// linuxNotifier is the Notifier of a Linux desktop session.
type linuxNotifier struct {
	log           *slog.Logger
	appName, icon string
	conn          *dbus.Conn
	signals       chan *dbus.Signal
	actions       chan Action
	loopDone      chan struct{}

	mu     sync.Mutex
	closed bool   // Close was called
	lost   bool   // the bus connection ended without Close
	owner  string // unique name owning org.freedesktop.Notifications; "" for none
	caps   capabilities
	byKey  map[string]*shown
	byID   map[uint32]*shown
}

// shown is one notification raised with the current owner.
type shown struct {
	key string
	id  uint32
	// since is the connection's sequence number of the Notify reply
	// that gave (or last replaced) the notification: a signal received
	// before it is about something else — an earlier notification with
	// the same id, or the content it replaced — and does not count.
	since    dbus.Sequence
	answered bool // an action was delivered: later presses are ignored
	approve  bool // it offers Approve; without it an "approve" is ignored
}

// capabilities is what the current owner can do.
type capabilities struct {
	actions bool   // it shows buttons
	markup  bool   // it reads the body as markup
	why     string // when !actions: the sentence for Permission
}

var _ Notifier = (*linuxNotifier)(nil)

// New connects to the session bus (opts.BusAddress, else the session's)
// and returns a Notifier for its org.freedesktop.Notifications service. It
// fails, with an error wrapping ErrUnavailable, only when there is no bus
// to connect to; a bus without a notification server, or with one that
// cannot show buttons, gives a Notifier whose Permission says so and whose
// Show refuses. A notification server that starts later (or restarts) is
// picked up.
func New(log *slog.Logger, opts Options) (Notifier, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	addr, err := sessionBusAddress(opts.BusAddress)
	if err != nil {
		return nil, err
	}
	conn, err := connect(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: connect to the D-Bus session bus at %s: %w (start the app inside a desktop session)", ErrUnavailable, addr, err)
	}
	n := &linuxNotifier{
		log:      log,
		appName:  cmp.Or(opts.AppName, defaultAppName),
		icon:     opts.Icon,
		conn:     conn,
		signals:  make(chan *dbus.Signal, 64),
		actions:  make(chan Action, actionBuffer),
		loopDone: make(chan struct{}),
		byKey:    map[string]*shown{},
		byID:     map[uint32]*shown{},
	}
	conn.Signal(n.signals)
	// Follow the service's owner before asking who it is, so that no
	// change falls between the answer and the first signal.
	if err := n.busCall("AddMatch", ownerRule()).Err; err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("%w: follow the owner of %s on the session bus: %w", ErrUnavailable, serviceName, err)
	}
	n.mu.Lock()
	n.findOwner()
	if n.owner == "" {
		n.log.Info(msgServer, "owner", "", "why", "no notification server on the session bus")
	}
	n.mu.Unlock()
	go n.loop()
	return n, nil
}

// Permission implements Notifier.
func (n *linuxNotifier) Permission() (bool, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if why := n.unavailable(); why != "" {
		return false, why
	}
	return true, ""
}

// unavailable says why notifications with buttons cannot be shown now, or
// returns "". n.mu is held.
func (n *linuxNotifier) unavailable() string {
	switch {
	case n.closed:
		return "notifications are closed"
	case n.lost:
		return "lost the connection to the desktop session bus: " + menuFallback + ", or restart the app"
	case n.owner == "":
		return "no notification service runs in this desktop session: " + menuFallback
	case !n.caps.actions:
		return n.caps.why
	}
	return ""
}

// Show implements Notifier.
func (n *linuxNotifier) Show(note Notification) error {
	if note.Key == "" {
		return errors.New("notify: show: the notification has no Key (set it to the confirmation's id)")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.owner == "" && !n.closed && !n.lost {
		n.findOwner() // an activatable server starts on demand
	}
	if why := n.unavailable(); why != "" {
		return fmt.Errorf("%w: show approval %s: %s", ErrUnavailable, note.Key, why)
	}
	var replaces uint32
	if old := n.byKey[note.Key]; old != nil {
		replaces = old.id
	}
	body, approve := FreedesktopBody(note, n.caps.markup)
	// The only hint: no image-path, image-data or sound-file, nothing a
	// server would fetch or play.
	hints := map[string]dbus.Variant{"urgency": dbus.MakeVariant(urgencyCritical)}
	actions := []string{actionDeny, "Deny"}
	if approve {
		actions = []string{actionApprove, "Approve", actionDeny, "Deny"}
	}
	// n.mu stays held across the call: an action on the new id, which the
	// server may send right after its reply, waits for the id to be
	// recorded instead of being taken for someone else's.
	var id uint32
	c := n.call(n.owner, serviceName+".Notify", n.appName, replaces, n.icon, note.Title, body, actions, hints, int32(0))
	if err := c.Store(&id); err != nil {
		return fmt.Errorf("notify: show approval %s: the notification server refused: %w", note.Key, err)
	}
	if id == 0 {
		return fmt.Errorf("notify: show approval %s: the notification server returned no id", note.Key)
	}
	if old := n.byKey[note.Key]; old != nil {
		delete(n.byID, old.id)
	}
	if other := n.byID[id]; other != nil { // the server reused an id it had closed
		delete(n.byKey, other.key)
	}
	s := &shown{key: note.Key, id: id, since: c.ResponseSequence, approve: approve}
	n.byKey[note.Key] = s
	n.byID[id] = s
	n.log.Debug("notification shown", "key", note.Key, "id", id, "replaces", replaces)
	return nil
}

// Withdraw implements Notifier.
func (n *linuxNotifier) Withdraw(key string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.byKey[key]
	if s == nil {
		return nil
	}
	delete(n.byKey, key)
	delete(n.byID, s.id)
	if err := n.closeNotification(n.owner, s.id); err != nil {
		return fmt.Errorf("notify: withdraw approval %s (notification %d): %w", key, s.id, err)
	}
	n.log.Debug("notification withdrawn", "key", key, "id", s.id)
	return nil
}

// Actions implements Notifier. The channel is closed by Close, or when the
// bus connection ends.
func (n *linuxNotifier) Actions() <-chan Action { return n.actions }

// Close implements Notifier.
func (n *linuxNotifier) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		<-n.loopDone
		return nil
	}
	n.closed = true
	owner, ids := n.owner, make([]uint32, 0, len(n.byID))
	for id := range n.byID {
		ids = append(ids, id)
	}
	clear(n.byKey)
	clear(n.byID)
	n.mu.Unlock()

	slices.Sort(ids)
	var errs []error
	for _, id := range ids {
		if err := n.closeNotification(owner, id); err != nil {
			errs = append(errs, fmt.Errorf("withdraw notification %d: %w", id, err))
		}
	}
	_ = n.conn.Close() // ends the signal loop, which closes Actions
	<-n.loopDone
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("notify: close: %w", err)
	}
	return nil
}

// loop handles the signals until the connection closes.
func (n *linuxNotifier) loop() {
	defer close(n.loopDone)
	defer close(n.actions)
	for sig := range n.signals {
		n.handle(sig)
	}
	n.mu.Lock()
	if !n.closed {
		n.lost = true
		clear(n.byKey) // their server is out of reach: nothing to withdraw
		clear(n.byID)
		n.log.Warn("lost the connection to the D-Bus session bus: notifications stop; approvals remain in the menu")
	}
	n.mu.Unlock()
}

// handle acts on one signal.
func (n *linuxNotifier) handle(sig *dbus.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	switch sig.Name {
	case sigNameOwnerChanged:
		if sig.Sender != busDriver || sig.Path != busDriverPath {
			n.log.Warn(msgForeign, "signal", sig.Name, "sender", sig.Sender, "path", sig.Path)
			return
		}
		var name, old, owner string
		if dbus.Store(sig.Body, &name, &old, &owner) != nil || name != serviceName {
			return
		}
		if old != n.owner {
			// Older than what GetNameOwner told: the changes that
			// follow it in the queue lead to the current owner.
			n.log.Debug("ignored a stale owner change", "old", old, "new", owner, "current", n.owner)
			return
		}
		n.setOwner(owner)
	case sigActionInvoked:
		var id uint32
		var action string
		if !n.fromServer(sig) || dbus.Store(sig.Body, &id, &action) != nil {
			n.foreign(sig)
			return
		}
		s := n.byID[id]
		if s == nil || s.answered || sig.Sequence < s.since {
			n.log.Debug(msgNotOurs, "id", id, "action", action)
			return
		}
		var approve bool
		switch action {
		case actionApprove:
			if !s.approve {
				n.log.Warn(msgNoApprove, "key", s.key, "id", id)
				return
			}
			approve = true
		case actionDeny:
		default: // "default" (the body clicked) and anything else decide nothing
			n.log.Debug("ignored a notification action that is not a button", "id", id, "action", action)
			return
		}
		s.answered = true
		select {
		case n.actions <- Action{Key: s.key, Approve: approve}:
			n.log.Debug("notification action", "key", s.key, "approve", approve)
		default:
			n.log.Warn(msgDropped, "key", s.key, "approve", approve, "buffer", actionBuffer)
		}
	case sigNotificationClosed:
		var id, reason uint32
		if !n.fromServer(sig) || dbus.Store(sig.Body, &id, &reason) != nil {
			n.foreign(sig)
			return
		}
		if s := n.byID[id]; s != nil && sig.Sequence >= s.since {
			delete(n.byID, id)
			delete(n.byKey, s.key)
			n.log.Debug("notification closed by the server", "key", s.key, "id", id, "reason", reason)
		}
	}
}

// fromServer reports whether sig comes from the current owner of the
// service, on the service's path. n.mu is held.
func (n *linuxNotifier) fromServer(sig *dbus.Signal) bool {
	return n.owner != "" && sig.Sender == n.owner && sig.Path == servicePath
}

// foreign logs a notification signal that does not count.
func (n *linuxNotifier) foreign(sig *dbus.Signal) {
	n.log.Warn(msgForeign, "signal", sig.Name, "sender", sig.Sender, "path", sig.Path, "server", n.owner)
}

// findOwner asks the bus who owns the service, asking it to start an
// activatable one if nobody does, and follows the answer. n.mu is held.
func (n *linuxNotifier) findOwner() {
	owner, err := n.nameOwner()
	if err != nil {
		var started uint32
		if n.busCall("StartServiceByName", serviceName, uint32(0)).Store(&started) == nil {
			owner, err = n.nameOwner()
		}
	}
	if err != nil {
		owner = ""
	}
	n.setOwner(owner)
}

// nameOwner returns the unique name owning the service.
func (n *linuxNotifier) nameOwner() (string, error) {
	var owner string
	err := n.busCall("GetNameOwner", serviceName).Store(&owner)
	return owner, err
}

// setOwner makes owner the notification server whose signals count:
// the match rule moves to it, the old owner's notifications are
// forgotten, and its capabilities are asked. n.mu is held.
func (n *linuxNotifier) setOwner(owner string) {
	if owner == n.owner {
		return
	}
	old, forgotten := n.owner, len(n.byID)
	if old != "" {
		if err := n.busCall("RemoveMatch", serverRule(old)).Err; err != nil {
			n.log.Debug("remove the old notification server's match rule", "owner", old, "err", err)
		}
	}
	clear(n.byKey)
	clear(n.byID)
	n.owner, n.caps = owner, capabilities{}
	if owner != "" {
		if err := n.busCall("AddMatch", serverRule(owner)).Err; err != nil {
			n.caps.why = fmt.Sprintf("cannot follow the notification server's answers (%v): %s", err, menuFallback)
		} else {
			n.caps = n.capabilities(owner)
		}
	}
	n.log.Info(msgServer, "owner", owner, "previous", old, "actions", n.caps.actions, "forgotten", forgotten)
}

// capabilities asks owner what it can do.
func (n *linuxNotifier) capabilities(owner string) capabilities {
	var caps []string
	if err := n.call(owner, serviceName+".GetCapabilities").Store(&caps); err != nil {
		return capabilities{why: fmt.Sprintf("the notification server does not answer (%v): %s", err, menuFallback)}
	}
	c := capabilities{actions: slices.Contains(caps, "actions"), markup: slices.Contains(caps, "body-markup")}
	if !c.actions {
		server := "the desktop's notification server"
		var name, vendor, version, spec string
		if n.call(owner, serviceName+".GetServerInformation").Store(&name, &vendor, &version, &spec) == nil && name != "" {
			server = strings.TrimSpace(name + " " + version)
		}
		c.why = server + " cannot show Approve and Deny buttons: " + menuFallback
	}
	return c
}

// closeNotification asks owner to close notification id. A server that
// has left the bus took its notifications with it: that is no error.
func (n *linuxNotifier) closeNotification(owner string, id uint32) error {
	err := n.call(owner, serviceName+".CloseNotification", id).Err
	var dbusErr dbus.Error
	if errors.As(err, &dbusErr) && (dbusErr.Name == busDriver+".Error.ServiceUnknown" || dbusErr.Name == busDriver+".Error.NameHasNoOwner") {
		n.log.Debug("the notification server has left; its notification went with it", "owner", owner, "id", id)
		return nil
	}
	return err
}

// call calls method on the service's object at dest, bounded by
// callTimeout, never starting a service.
func (n *linuxNotifier) call(dest, method string, args ...any) *dbus.Call {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return n.conn.Object(dest, servicePath).CallWithContext(ctx, method, dbus.FlagNoAutoStart, args...)
}

// busCall calls a method of the bus daemon, bounded by callTimeout.
func (n *linuxNotifier) busCall(method string, args ...any) *dbus.Call {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return n.conn.BusObject().CallWithContext(ctx, busDriver+"."+method, 0, args...)
}

// ownerRule is the match rule for changes of the service's owner, from the
// bus daemon only.
func ownerRule() string {
	return "type='signal',sender='" + busDriver + "',path='" + string(busDriverPath) +
		"',interface='" + busDriver + "',member='NameOwnerChanged',arg0='" + serviceName + "'"
}

// serverRule is the match rule for the signals of the notification server
// whose unique name is owner, and of no one else.
func serverRule(owner string) string {
	return "type='signal',sender='" + owner + "',path='" + string(servicePath) + "',interface='" + serviceName + "'"
}

// connect dials addr, authenticates and says Hello, within connectTimeout.
// Signals are delivered in the order they arrive.
func connect(addr string) (*dbus.Conn, error) {
	conn, err := dbus.Dial(addr, dbus.WithSignalHandler(dbus.NewSequentialSignalHandler()))
	if err != nil {
		return nil, err
	}
	timer := time.AfterFunc(connectTimeout, func() { _ = conn.Close() })
	err = conn.Auth(nil)
	if err == nil {
		err = conn.Hello()
	}
	if !timer.Stop() {
		err = fmt.Errorf("no answer within %s", connectTimeout)
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// sessionBusAddress returns override, else the session bus's address:
// DBUS_SESSION_BUS_ADDRESS, else the socket $XDG_RUNTIME_DIR/bus that
// systemd's user session provides. It never asks for a bus to be launched.
func sessionBusAddress(override string) (string, error) {
	if override != "" {
		return override, nil
	}
	if addr := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); addr != "" && addr != "autolaunch:" {
		return addr, nil
	}
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		p := filepath.Join(dir, "bus")
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return "unix:path=" + escapeAddressValue(p), nil
		}
	}
	return "", fmt.Errorf("%w: no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus does not exist (start the app inside a desktop session)", ErrUnavailable)
}

// escapeAddressValue escapes a value of a D-Bus address: bytes other than
// [-0-9A-Za-z_/.\*] become %XX.
func escapeAddressValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.IndexByte("-_/.\\*", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02x", c)
		}
	}
	return b.String()
}
