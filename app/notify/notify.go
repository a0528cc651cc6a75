// Package notify shows the approvals the menu-bar app puts in front of the
// user as the desktop's native notifications, with Approve and Deny
// actions: UNUserNotificationCenter on macOS (notify_darwin.go and its
// Objective-C twin), org.freedesktop.Notifications over D-Bus on Linux
// (notify_linux.go), nothing elsewhere.
//
// A Notifier never decides anything itself: it reports which button the
// user pressed on which notification, and the app sends the decision to
// the core. A notification is never the only way to answer — when the
// desktop refuses (permission denied, no actions capability, no bus) the
// app's menu and the other surfaces carry the approvals, and Permission
// says why, for the menu to show.
package notify

import "errors"

// Notification is one approval shown to the user.
type Notification struct {
	// Key identifies it: the confirmation's id. Showing a Key again
	// replaces the notification.
	Key   string
	Title string // e.g. "Approve send_email?"
	Body  string // tool, group, digest prefix, a one-line summary of the arguments
	// Approve offers the Approve button. Set it only when Body shows
	// every byte of the arguments that would run — nothing cut, hidden or
	// left out; else the notification offers Deny only, and Body should
	// say where to review the approval. A Notifier may still withhold
	// Approve where the desktop might show Body otherwise than written
	// (FreedesktopBody).
	Approve bool
}

// Action is a button the user pressed.
type Action struct {
	Key     string // the notification's, i.e. the confirmation's id
	Approve bool   // Approve, else Deny
}

// Notifier shows notifications and reports their actions. Implementations
// are safe for concurrent use.
type Notifier interface {
	// Permission reports whether notifications with actions can be shown
	// now; when not, why says what the user can do (a sentence for the
	// menu's status line).
	Permission() (ok bool, why string)
	// Show raises n (or replaces the one with n.Key).
	Show(n Notification) error
	// Withdraw removes the notification with key, if it is shown; a
	// decision made elsewhere, or expiry, withdraws it.
	Withdraw(key string) error
	// Actions delivers what the user pressed, for notifications this
	// Notifier showed only.
	Actions() <-chan Action
	// Close withdraws everything shown and releases the desktop
	// connection; Actions is closed.
	Close() error
}

// ErrUnavailable: the platform or the session has no notification service
// this package can use.
var ErrUnavailable = errors.New("native notifications are not available")
