package mail

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/carapace-dev/carapace/core/plugin"
)

// prepared is a draft made ready to send: the mail, what goes over SMTP,
// and where the draft is.
type prepared struct {
	id      msgID
	account *Account
	mail    *composed
	wire    *wire
}

// prepareSend reads the draft from IMAP and renders what would be sent.
// Everything is checked again here (the draft may have changed since
// mail_draft wrote it). c must be logged in to the draft's account.
func (h *Handler) prepareSend(c *conn, id msgID) (*prepared, error) {
	drafts, err := c.folder(imap.MailboxAttrDrafts)
	if err != nil {
		return nil, err
	}
	if id.Folder != drafts {
		return nil, toolErr(CodeNotADraft, "draft_id", "this id is of a mail in %q, not in the Drafts folder (%q): only a draft written with mail_draft can be sent", clipQ(id.Folder), clipQ(drafts))
	}
	if err := c.open(id, "draft_id", true); err != nil {
		return nil, err
	}
	raw, _, truncated, err := c.fetchRaw(id, "draft_id", int64(h.cfg.MaxBody)*4+64<<10)
	if err != nil {
		return nil, err
	}
	if truncated {
		return nil, toolErr(CodeBodyTooLarge, "draft_id", "the draft is larger than max_body_bytes allows")
	}
	m, err := parseDraft(raw, h.cfg.MaxBody)
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(m.From.Address, c.account.From.Address) {
		return nil, toolErr(CodeFromMismatch, "draft_id", "the draft's From (%s) is not the account's address (%s): write it again with mail_draft", clipQ(m.From.Address), c.account.From.Address)
	}
	m.From = c.account.From // the configured name and address, always
	w := &wire{From: c.account.From.Address, To: m.recipients(), Data: m.render(false)}
	return &prepared{id: id, account: c.account, mail: m, wire: w}, nil
}

// previewSend is the content a person approves before mail_send: text
// shows the account, From, every To, Cc and Bcc, the subject and the whole
// body (never cut); digest is the SHA-256 of the exact SMTP transaction
// (envelope and data) the send would make. The core shows text, and passes
// digest back with the approved call; sendDraft refuses if the draft then
// renders to another digest.
func (h *Handler) previewSend(ctx context.Context, group, draftID string) (text, digest string, err error) {
	id, err := parseID("draft_id", draftID)
	if err != nil {
		return "", "", err
	}
	a, err := h.accountFor(group, id.Account, "draft_id")
	if err != nil {
		return "", "", err
	}
	c, err := h.connect(ctx, a, nil)
	if err != nil {
		return "", "", err
	}
	defer c.close()
	p, err := h.prepareSend(c, id)
	if err != nil {
		return "", "", err
	}
	// What the send would refuse anyway is refused now, before the user is
	// asked (the send checks again).
	if err := h.checkRecipients(p.wire); err != nil {
		return "", "", err
	}
	if n, err := h.st.sentToday(ctx, group, h.now()); err != nil {
		return "", "", fmt.Errorf("count today's sends: %w", err)
	} else if limit := h.cfg.capFor(group); n >= limit {
		return "", "", toolErr(CodeCapReached, "draft_id", "this group's daily send cap (%d a day, UTC) is used up: the user may raise daily_send_cap in [plugins.mail.config] groups", limit)
	}
	return p.mail.preview(a.Name), p.wire.digest(), nil
}

// Preview implements plugin.Previewer: the core calls it before it asks
// the user about a mail_send, and again right before the approved call
// runs. It changes nothing (it reads the draft) and gives the same text
// and digest for the same draft: previewSend.
func (h *Handler) Preview(ctx context.Context, req *plugin.Request) (*plugin.Preview, error) {
	if req.Tool != "mail_send" {
		return nil, toolErr(CodeBadArgument, "", "%s has no preview", clipQ(req.Tool))
	}
	text, digest, err := h.previewSend(ctx, req.Group, argString(req, "draft_id"))
	if err != nil {
		return nil, err
	}
	return &plugin.Preview{Text: text, Digest: digest}, nil
}

// sendTool is mail_send: the draft is sent only if it still renders to
// the digest of the preview the user approved (req.PreviewDigest).
func (h *Handler) sendTool(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	draftID := argString(req, "draft_id")
	if _, err := parseID("draft_id", draftID); err != nil {
		return nil, err
	}
	if req.PreviewDigest == "" {
		// The core binds every approved mail_send to its preview; a call
		// without one was approved by nobody. Refused before any server
		// is touched.
		return nil, req.CheckDigest("")
	}
	return h.sendDraft(ctx, req, draftID)
}

// sendDraft sends the draft if it still renders to the approved digest:
// it checks the allow-list and the group's daily cap, sends over SMTP,
// saves the mail in Sent and removes the draft.
func (h *Handler) sendDraft(ctx context.Context, req *plugin.Request, draftID string) (map[string]any, error) {
	group := req.Group
	id, err := parseID("draft_id", draftID)
	if err != nil {
		return nil, err
	}
	a, err := h.accountFor(group, id.Account, "draft_id")
	if err != nil {
		return nil, err
	}
	h.sendMu.Lock()
	defer h.sendMu.Unlock()
	c, err := h.connect(ctx, a, nil)
	if err != nil {
		return nil, err
	}
	defer c.close()
	p, err := h.prepareSend(c, id)
	if err != nil {
		return nil, err
	}
	approved := p.wire.digest()
	if err := req.CheckDigest(approved); err != nil {
		return nil, toolErr(CodeContentChanged, "draft_id", "the draft changed after the user approved it (or another mail was approved): nothing was sent; ask for mail_send again so the user sees what it now says")
	}
	if err := h.checkRecipients(p.wire); err != nil {
		return nil, err
	}
	now := h.now()
	row, err := h.st.beginSend(ctx, group, a.Name, approved, len(p.wire.To), h.cfg.capFor(group), now)
	if err != nil {
		if _, ok := plugin.AsToolError(err); ok {
			return nil, err
		}
		return nil, fmt.Errorf("record the send: %w", err)
	}
	state, serr := h.smtpSend(ctx, a, p.wire)
	if err := h.st.endSend(context.WithoutCancel(ctx), row, state); err != nil {
		h.log.Error("record the send's end", "err", err)
	}
	if serr != nil {
		return nil, serr
	}
	out := map[string]any{"sent": true, "account": a.Name, "recipients": len(p.wire.To), "message_id": p.mail.MessageID,
		"daily_send_cap": h.cfg.capFor(group)}
	if n, err := h.st.sentToday(context.WithoutCancel(ctx), group, now); err == nil {
		out["sent_today"] = n
	}
	// Keep a copy in Sent (with the Bcc the others did not see) and take
	// the draft out of Drafts. The mail is sent whatever happens here.
	var notes []string
	if a.SaveSent { // else the server files it (save_sent = false)
		if sent, err := c.folder(imap.MailboxAttrSent); err != nil {
			notes = append(notes, "no Sent folder found: no copy kept")
		} else if _, err := c.appendMsg(sent, p.mail.render(true), []imap.Flag{imap.FlagSeen}, p.mail.Date, p.mail.MessageID); err != nil {
			notes = append(notes, "the copy in Sent could not be saved")
			h.log.Warn("append to Sent", "account", a.Name, "err", err)
		}
	}
	if err := h.removeDraft(c, id); err != nil {
		notes = append(notes, "the draft could not be removed from Drafts")
		h.log.Warn("remove the draft", "account", a.Name, "err", err)
	}
	if len(notes) > 0 {
		out["notes"] = notes
	}
	return out, nil
}

// checkRecipients refuses a recipient the allow-list does not admit.
func (h *Handler) checkRecipients(w *wire) error {
	for _, r := range w.To {
		if !h.cfg.allowed(r) {
			return toolErr(CodeRecipientNotAllowed, "draft_id", "%s is not on the recipient allow-list (recipient_allowlist in [plugins.mail.config]): nothing is sent to it", r)
		}
	}
	return nil
}

// removeDraft flags the draft deleted and expunges it alone (UIDPLUS);
// without UIDPLUS it stays flagged \Deleted, for the user's client.
func (h *Handler) removeDraft(c *conn, id msgID) error {
	if err := c.open(id, "draft_id", false); err != nil {
		return err
	}
	set := imap.UIDSetNum(id.UID)
	if err := c.c.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close(); err != nil {
		return err
	}
	if c.c.Caps().Has(imap.CapUIDPlus) || c.c.Caps().Has(imap.CapIMAP4rev2) {
		return c.c.UIDExpunge(set).Close()
	}
	return nil
}

// smtpSend sends w over the account's SMTP server. It returns the state
// to record: "sent"; "failed" when the server refused before taking the
// data (nothing left); "doubt" when the connection broke while or after
// handing the data over (it may have been sent).
func (h *Handler) smtpSend(ctx context.Context, a *Account, w *wire) (string, error) {
	pw, err := h.password(ctx, a)
	if err != nil {
		return "failed", err
	}
	nc, err := h.dialSecure(ctx, a.SMTP, a.SMTPSecurity)
	if err != nil {
		h.log.Warn("smtp connect failed", "account", a.Name, "err", err)
		return "failed", &plugin.ToolError{Code: CodeConnect, Retriable: true, Message: fmt.Sprintf("cannot reach the SMTP server of account %s (%s): nothing was sent", a.Name, a.SMTP)}
	}
	if d, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(d)
	}
	var c *smtp.Client
	if a.SMTPSecurity == SecurityStartTLS {
		c, err = smtp.NewClientStartTLS(nc, h.tlsConfig(a.SMTP))
		if err != nil {
			nc.Close()
			h.log.Warn("smtp starttls failed", "account", a.Name, "err", err)
			return "failed", &plugin.ToolError{Code: CodeConnect, Retriable: true, Message: fmt.Sprintf("STARTTLS with the SMTP server of account %s failed: nothing was sent", a.Name)}
		}
	} else {
		c = smtp.NewClient(nc)
	}
	defer c.Close()
	fail := func(what string, err error) (string, error) {
		h.log.Warn("smtp", "account", a.Name, "step", what, "err", err)
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			return "failed", toolErr(CodeSendFailed, "draft_id", "the SMTP server of account %s refused %s (%d %s): nothing was sent", a.Name, what, se.Code, clipQ(se.Message))
		}
		return "failed", &plugin.ToolError{Code: CodeSendFailed, Retriable: true, Message: fmt.Sprintf("the connection to the SMTP server of account %s broke at %s: nothing was sent", a.Name, what)}
	}
	_, domain, _ := strings.Cut(a.From.Address, "@")
	if err := c.Hello(domain); err != nil {
		var se *smtp.SMTPError
		if !errors.As(err, &se) {
			// With STARTTLS the handshake happens here: a certificate
			// not trusted ends the connection before any login.
			h.log.Warn("smtp hello failed", "account", a.Name, "err", err)
			return "failed", &plugin.ToolError{Code: CodeConnect, Retriable: true, Message: fmt.Sprintf("the connection to the SMTP server of account %s failed (TLS, or the server went away): nothing was sent", a.Name)}
		}
		return fail("EHLO", err)
	}
	if err := c.Auth(sasl.NewPlainClient("", a.SMTPUsername, pw)); err != nil {
		var se *smtp.SMTPError
		if errors.As(err, &se) && se.Code == 535 {
			return "failed", toolErr(CodeAuthFailed, "draft_id", "the SMTP server of account %s refused the login of %s: check the app password; nothing was sent", a.Name, a.SMTPUsername)
		}
		return fail("the login", err)
	}
	if err := c.Mail(w.From, nil); err != nil {
		return fail("the sender", err)
	}
	for _, r := range w.To {
		if err := c.Rcpt(r, nil); err != nil {
			return fail("the recipient "+r, err)
		}
	}
	dw, err := c.Data()
	if err != nil {
		return fail("DATA", err)
	}
	if _, err := dw.Write(w.Data); err != nil {
		_ = dw.Close()
		return "doubt", &plugin.ToolError{Code: CodeSendDoubt, Message: "the connection broke while the mail was being handed to the SMTP server: it may or may not have been sent. It is not sent again; the user can check Sent and the recipients"}
	}
	if err := dw.Close(); err != nil {
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			return fail("the mail", err)
		}
		return "doubt", &plugin.ToolError{Code: CodeSendDoubt, Message: "the connection broke right after the mail was handed to the SMTP server: it may or may not have been sent. It is not sent again; the user can check Sent and the recipients"}
	}
	_ = c.Quit()
	return "sent", nil
}
