// Package mail is the mail plugin: a first-party plugin that runs out of
// process (it faces the network and holds the accounts' passwords) and
// gives the agent the user's own mailboxes over IMAP and SMTP, with app
// passwords. handler/ is its executable; docs/MAIL.md is the user's
// guide.
//
// # Tools
//
// mail_search and mail_read return mail, which is someone else's words:
// both declare untrusted output, so the session that reads mail is
// tainted. mail_draft appends a plain-text mail to the account's Drafts
// (threaded under the mail it answers); mail_mark flags or archives;
// nothing is deleted. Mail ids (msgID) are opaque and name the account,
// the folder, its UIDVALIDITY and the UID: a rebuilt folder's old ids are
// refused as stale.
//
// # Sending is bound to what the user read
//
// mail_send is high risk and egress. prepareSend reads the draft back
// from IMAP, checks it again (a draft may have been written by anyone)
// and renders the exact SMTP transaction: the envelope, with the Bcc, and
// the data, without it. previewSend gives the core the text the user
// approves (From, every To, Cc and Bcc, the subject and the whole body)
// and the SHA-256 of that transaction; sendDraft sends only if the draft
// renders to the approved digest, else CONTENT_CHANGED. Handler.Preview
// is the core's preview-and-bind step (plugin.Previewer): the core shows
// its text and hands the approved digest back in Request.PreviewDigest;
// a call without one is refused before any server is touched.
//
// Then the recipient allow-list and the group's daily cap are checked and
// the send recorded (store.beginSend: the digest is never sent twice, and
// a send whose outcome is unknown is never retried), sent over SMTP, kept
// in Sent, and the draft removed.
//
// # Exactly once
//
// An account with inbound_group keeps an IMAP IDLE on its INBOX (watch).
// Each new mail is decided — to publish as message.inbound (Untrusted) or
// to skip — in one SQLite transaction that records its UID and the
// inbox's UIDVALIDITY and moves the account's cursor past it, before
// anything is published. A mail to publish is recorded "publishing",
// handed to the core, then recorded "published". A restart turns every
// "publishing" into "doubt" (store.recoverPublishing): it may have
// started a session, so it is never published again. A mail whose
// decision did not commit is decided again. So each mail starts at most
// one session across crashes and restarts, and none is lost before it is
// decided. Mail present when the watch first sees the inbox (or after its
// UIDVALIDITY changed) is not an event; while the core is paused new mail
// waits undecided.
package mail
