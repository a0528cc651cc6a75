package app_test

import (
	"html"
	"strings"
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

// A notification shows a short preview whole and offers Approve; one too
// long for its body (or left out of the event) gets Deny only and says
// where to read it whole.
func TestNotificationPreview(t *testing.T) {
	base := approvaltest.Confirmation([]byte(`{"draft_id":"d-1"}`))
	tests := []struct {
		name    string
		preview string
		omitted bool
		approve bool
		want    string
	}{
		{"short", "To: anna@example.org\nSubject: Lunch\n\nTomorrow at 12?\n", false, true, "Tomorrow at 12?"},
		{"too many lines", strings.Repeat("a line\n", 11), false, false, "too long for a notification"},
		{"too many characters", strings.Repeat("x", 401), false, false, "carapace confirm show 01234567"},
		{"left out of the event", "", true, false, "too long for a notification"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			c.Preview, c.PreviewOmitted, c.PreviewDigest = tt.preview, tt.omitted, "sha256:1"
			n := app.Notification(c)
			if n.Approve != tt.approve || !strings.Contains(n.Body, tt.want) {
				t.Errorf("approve %v, body:\n%s\nwant approve %v and %q", n.Approve, n.Body, tt.approve, tt.want)
			}
		})
	}
}
