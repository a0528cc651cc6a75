package app_test

import (
	"html"
	"testing"

	"github.com/carapace-dev/carapace/app"
	"github.com/carapace-dev/carapace/app/menu"
	"github.com/carapace-dev/carapace/app/notify"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/confirm/approvaltest"
)

// A notification offers Approve only where its body shows every argument
// that runs (issue 22), whatever the desktop does with the body: for
// random arguments, on a freedesktop server that reads markup (the text a
// person sees is the body unescaped), on one that does not, and on macOS.
func TestNotificationApprovalProperty(t *testing.T) {
	for _, s := range []struct {
		name   string
		render approvaltest.Render
	}{
		{"notification (Linux, plain body)", freedesktop(false)},
		{"notification (Linux, body-markup)", freedesktop(true)},
		{"notification (macOS)", func(c api.Confirmation) (string, bool) {
			n := app.Notification(c)
			return n.Title + "\n" + n.Body, n.Approve
		}},
	} {
		t.Run(s.name, func(t *testing.T) {
			approvaltest.Check(t, approvaltest.Surface{Name: s.name, Render: s.render, Quote: menu.Quote, Key: menu.PathKey})
		})
	}
}

// freedesktop renders a notification as a freedesktop server shows it:
// the body the notifier sends, unescaped when the server reads markup,
// and whether Approve is among its buttons.
func freedesktop(markup bool) approvaltest.Render {
	return func(c api.Confirmation) (string, bool) {
		n := app.Notification(c)
		body, approve := notify.FreedesktopBody(n, markup)
		if markup {
			body = html.UnescapeString(body)
		}
		return n.Title + "\n" + body, approve
	}
}
