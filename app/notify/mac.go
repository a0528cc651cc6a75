package notify

// The Go half of the macOS notifier. notify_darwin.go and notify_darwin.m
// bind UNUserNotificationCenter; everything that needs no Objective-C is
// here, free of build constraints, so that its tests run on every
// platform: which notifications were shown, what a response means, the
// bounded queue of actions, what the permission settings mean for the
// menu, and waiting for the notification centre's completion handlers.

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The identifiers registered with the notification centre.
const (
	macCategory = "carapace.approval" // the category of an approval that offers Approve and Deny
	macReview   = "carapace.review"   // the category of one that offers Deny only (Notification.Approve unset)
	macApprove  = "carapace.approve"  // the Approve action (requires an unlocked Mac)
	macDeny     = "carapace.deny"     // the Deny action (shown as destructive)
)

const (
	// macActionQueue bounds Actions: the delegate never waits for the
	// app, so when the app falls this far behind a click is dropped and
	// logged, and the menu still carries the approval.
	macActionQueue = 16
	// macMaxKey bounds a notification's identifier (a confirmation id
	// is 32 hex digits).
	macMaxKey = 256
)

// macSettings is what UNNotificationSettings says about Carapace. The
// values are those of UNAuthorizationStatus, UNNotificationSetting and
// UNAlertStyle.
type macSettings struct {
	Status int // 0 not determined, 1 denied, 2 authorized, 3 provisional, 4 ephemeral
	Alert  int // 0 not supported, 1 disabled, 2 enabled
	Style  int // 0 none, 1 banner, 2 alert
}

// Values of macSettings' fields.
const (
	macNotDetermined = 0
	macDenied        = 1
	macAuthorized    = 2
	macProvisional   = 3

	macSettingEnabled = 2
	macStyleNone      = 0
)

// macSettingsPlace is where the user changes Carapace's notifications.
const macSettingsPlace = "System Settings › Notifications › Carapace"

// permission says whether approvals can be shown with these settings and,
// if not, what the user can do; asked is the error of the authorization
// request, if it failed.
func (s macSettings) permission(asked string) (bool, string) {
	switch {
	case s.Status == macDenied:
		return false, "Notifications are off for Carapace: turn them on in " + macSettingsPlace + ". Approvals are in this menu meanwhile."
	case s.Status == macNotDetermined && asked != "":
		return false, "macOS refused Carapace's request to show notifications (" + asked + "). Approvals are in this menu."
	case s.Status == macNotDetermined:
		return false, "Carapace has asked macOS to show notifications: answer the prompt, or allow them in " + macSettingsPlace + ". Approvals are in this menu meanwhile."
	case s.Status == macProvisional:
		return false, "Carapace's notifications are delivered quietly: allow alerts in " + macSettingsPlace + ". Approvals are in this menu."
	case s.Status != macAuthorized:
		return false, fmt.Sprintf("macOS reports an unknown notification permission (%d). Approvals are in this menu.", s.Status)
	case s.Alert != macSettingEnabled || s.Style == macStyleNone:
		return false, "Carapace's notifications show no banners or alerts: choose Alerts in " + macSettingsPlace + ". Approvals are in this menu."
	}
	return true, ""
}

// macCenter is what macNotifier needs of UNUserNotificationCenter:
// notify_darwin.go implements it with cgo, the tests with a fake. Each
// method may be called from any goroutine.
type macCenter interface {
	// settings reads the notification settings.
	settings() (macSettings, error)
	// add shows a notification, replacing one with the same key, of the
	// category that offers Approve and Deny when approve is set, else of
	// the one that offers Deny only, and reports the centre's answer.
	// Title and body are plain text: the centre interprets nothing in
	// them (no markup, no links, no attachments).
	add(key, title, body string, approve bool) error
	// remove withdraws the delivered and pending notifications with
	// these keys.
	remove(keys []string) error
	// stop detaches the centre's delegate: no responses arrive after it.
	stop()
}

// macNotifier implements Notifier on top of a macCenter; the delegate's
// responses arrive through respond, the authorization request's answer
// through authorized.
type macNotifier struct {
	log    *slog.Logger
	center macCenter

	mu sync.Mutex
	// shown holds the keys shown and not withdrawn or answered, and
	// whether each offers Approve.
	shown   map[string]bool
	actions chan Action
	closed  bool
	last    *macSettings // the last settings read, for when a read fails
	asked   string       // the authorization request's error, if any
}

var _ Notifier = (*macNotifier)(nil)

// newMacNotifier returns a notifier that uses center.
func newMacNotifier(log *slog.Logger, center macCenter) *macNotifier {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &macNotifier{
		log:     log,
		center:  center,
		shown:   map[string]bool{},
		actions: make(chan Action, macActionQueue),
	}
}

// Permission implements Notifier from the centre's current settings, or,
// if they cannot be read now, from the last ones that could.
func (n *macNotifier) Permission() (bool, string) {
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return false, "Notifications are closed. Approvals are in this menu."
	}
	s, err := n.center.settings()
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		n.log.Warn("read the notification settings", "err", err)
		if n.last == nil {
			return false, "Cannot read Carapace's notification settings (" + err.Error() + "). Approvals are in this menu."
		}
		s = *n.last
	}
	n.last = &s
	return s.permission(n.asked)
}

// authorized records the answer to the authorization request.
func (n *macNotifier) authorized(granted bool, errText string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked = errText
	switch {
	case errText != "":
		n.log.Warn("macOS refused the request to show notifications", "err", errText)
	case !granted:
		n.log.Info("notifications are not allowed: approvals stay in the menu", "where", macSettingsPlace)
	default:
		n.log.Info("notifications are allowed")
	}
}

// Show implements Notifier.
func (n *macNotifier) Show(note Notification) error {
	if err := macCheckKey(note.Key); err != nil {
		return err
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return fmt.Errorf("show notification %s: the notifier is closed", note.Key)
	}
	// Recorded before it is shown, so that no click can come first;
	// while one replaces another, Approve counts only if both offer it.
	before, again := n.shown[note.Key]
	n.shown[note.Key] = note.Approve && (before || !again)
	n.mu.Unlock()

	err := n.center.add(note.Key, macText(note.Title), macText(note.Body), note.Approve)
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, still := n.shown[note.Key]; !still {
		return err // answered or withdrawn meanwhile
	}
	switch {
	case err != nil && again:
		n.shown[note.Key] = before // the one shown before stays
	case err != nil:
		delete(n.shown, note.Key)
	default:
		n.shown[note.Key] = note.Approve
	}
	if err != nil {
		return fmt.Errorf("show notification %s: %w", note.Key, err)
	}
	return nil
}

// Withdraw implements Notifier. It also withdraws a notification of this
// key that the notifier no longer tracks (answered, say).
func (n *macNotifier) Withdraw(key string) error {
	if err := macCheckKey(key); err != nil {
		return err
	}
	n.mu.Lock()
	delete(n.shown, key)
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return nil // Close withdrew everything
	}
	if err := n.center.remove([]string{key}); err != nil {
		return fmt.Errorf("withdraw notification %s: %w", key, err)
	}
	return nil
}

// Actions implements Notifier.
func (n *macNotifier) Actions() <-chan Action { return n.actions }

// Close implements Notifier: it withdraws what it showed, detaches the
// delegate and closes Actions. Closing twice is a no-op.
func (n *macNotifier) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	keys := make([]string, 0, len(n.shown))
	for k := range n.shown {
		keys = append(keys, k)
	}
	clear(n.shown)
	close(n.actions)
	n.mu.Unlock()

	n.center.stop()
	if len(keys) == 0 {
		return nil
	}
	if err := n.center.remove(keys); err != nil {
		return fmt.Errorf("withdraw %d notifications on close: %w", len(keys), err)
	}
	return nil
}

// respond handles the delegate's report that the user answered the
// notification key with the action identifier action. It never blocks:
// the delegate runs on the notification centre's thread. Only Approve and
// Deny on a notification this notifier showed, once each, become an
// Action; a click on the notification itself (the default action) opens
// nothing and decides nothing.
func (n *macNotifier) respond(key, action string) {
	var approve bool
	switch action {
	case macApprove:
		approve = true
	case macDeny:
	default:
		n.log.Debug("notification response without a decision", "key", key, "action", action)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	offers, shown := n.shown[key]
	switch {
	case n.closed || !shown:
		n.log.Warn("ignored a response to a notification this app did not show or already answered",
			"key", key, "approve", approve)
		return
	case approve && !offers:
		n.log.Warn("ignored Approve on a notification that offers Deny only", "key", key)
		return
	}
	delete(n.shown, key)
	select {
	case n.actions <- Action{Key: key, Approve: approve}:
	default:
		n.log.Error("dropped a notification response: the app is not reading them; the approval is still in the menu",
			"key", key, "approve", approve)
	}
}

// macCheckKey checks that key can be a notification identifier.
func macCheckKey(key string) error {
	switch {
	case key == "":
		return errors.New("notification key is empty")
	case len(key) > macMaxKey:
		return fmt.Errorf("notification key is longer than %d bytes", macMaxKey)
	case !utf8.ValidString(key) || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("notification key %q has invalid UTF-8 or control characters", key)
	}
	return nil
}

// macText makes s safe to pass as a C string: invalid UTF-8 and NUL
// (which would end the C string early and hide the rest) become U+FFFD,
// so that nothing is silently cut from what the user approves.
func macText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// macCalls matches the notification centre's completion handlers, which
// run on its own threads, to the goroutines that wait for them.
type macCalls struct {
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan macResult
}

// macResult is a completion handler's report.
type macResult struct {
	settings macSettings
	err      string // empty on success
}

// start registers a call and returns its id, to pass to Objective-C.
func (c *macCalls) start() (uint64, <-chan macResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting == nil {
		c.waiting = map[uint64]chan macResult{}
	}
	c.next++
	ch := make(chan macResult, 1)
	c.waiting[c.next] = ch
	return c.next, ch
}

// finish delivers the result of call id; it never blocks, and a call
// nobody waits for any more (it timed out) is ignored.
func (c *macCalls) finish(id uint64, r macResult) {
	c.mu.Lock()
	ch, ok := c.waiting[id]
	delete(c.waiting, id)
	c.mu.Unlock()
	if ok {
		ch <- r
	}
}

// wait waits up to timeout for call id; what did names the call in the
// error.
func (c *macCalls) wait(id uint64, ch <-chan macResult, timeout time.Duration, what string) (macResult, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.err != "" {
			return r, errors.New(r.err)
		}
		return r, nil
	case <-t.C:
		c.mu.Lock()
		delete(c.waiting, id)
		c.mu.Unlock()
		return macResult{}, fmt.Errorf("%s: the notification centre did not answer within %v", what, timeout)
	}
}
