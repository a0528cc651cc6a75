package notify

import "strings"

// FreedesktopBody is what a freedesktop.org notification server (Linux)
// is sent for n — the body, escaped as markup when the server reads the
// body as markup (its body-markup capability) — and whether the
// notification offers Approve.
//
// Agent text in a body read as markup could be a link or an image (<a
// href>, <img src>: some servers fetch an image at once), or vanish as a
// tag: so <, > and & are escaped, and nothing is ever sent as markup. The
// other fields of a notification never carry agent text (the app icon is
// the app's option; the only hint is urgency; no image or sound hints).
//
// Approve is offered only where the server shows the body as written,
// and Approve is withheld (the body then says where to review) when it
// might not: a server that does not read markup may still strip what
// looks like a tag or an entity (< or &) — the specification asks clients,
// not servers, to strip it, and not every server agrees —, and one that
// renders markup as HTML folds a run of spaces into one (KDE Plasma
// does). Otherwise a user would approve a text that is not what runs.
func FreedesktopBody(n Notification, markup bool) (body string, approve bool) {
	body, approve = n.Body, n.Approve
	if approve && (strings.Contains(body, "  ") || !markup && strings.ContainsAny(body, "<&")) {
		approve = false
		body += "\n" + reviewAsWritten
	}
	if markup {
		body = markupEscaper.Replace(body)
	}
	return body, approve
}

// reviewAsWritten ends a body whose Approve FreedesktopBody withheld.
const reviewAsWritten = "This desktop's notifications might not show it as written: review and approve it in the Carapace menu."

// markupEscaper escapes a body for a server that reads it as markup, so
// that text the agent wrote shows as text: no links, no images, no hidden
// parts. Only these three are needed in markup's text, and every server's
// parser knows them.
var markupEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
