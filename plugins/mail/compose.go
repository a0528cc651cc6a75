package mail

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	gomail "github.com/emersion/go-message/mail"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Limits of a composed mail.
const (
	MaxRecipients = 50  // To, Cc and Bcc together
	MaxSubject    = 998 // bytes, the longest header line RFC 5322 allows
	maxMsgID      = 998
)

// Error codes of the tools (ToolError.Code), kept in the audit log.
const (
	CodeHeaderInjection     = "HEADER_INJECTION"      // CR, LF or NUL in an address, the subject or a message id
	CodeInvalidAddress      = "INVALID_ADDRESS"       // not one RFC 5322 address
	CodeBodyTooLarge        = "BODY_TOO_LARGE"        // body over max_body_bytes
	CodeTooManyRecipients   = "TOO_MANY_RECIPIENTS"   // over MaxRecipients
	CodeNoRecipient         = "NO_RECIPIENT"          // no To, Cc or Bcc
	CodeInvalidID           = "INVALID_ID"            // not an id this plugin gave
	CodeStaleID             = "STALE_ID"              // the folder's UIDVALIDITY changed
	CodeNotFound            = "NOT_FOUND"             // no such message (any more)
	CodeNoAccount           = "NO_ACCOUNT"            // unknown account, or none for the group
	CodeAccountNotAllowed   = "ACCOUNT_NOT_ALLOWED"   // the group may not use the account
	CodeNoPassword          = "NO_PASSWORD"           // carapace auth set --plugin mail --key ACCOUNT
	CodeAuthFailed          = "AUTH_FAILED"           // the server refused the login
	CodeConnect             = "CONNECT_FAILED"        // the server could not be reached
	CodeServer              = "SERVER_ERROR"          // the server refused a command
	CodeNoFolder            = "NO_FOLDER"             // no such folder (Drafts, Sent, Archive not found)
	CodeNotADraft           = "NOT_A_DRAFT"           // mail_send of a message outside Drafts
	CodeDraftUnsupported    = "DRAFT_UNSUPPORTED"     // a draft that is not one plain-text part
	CodeFromMismatch        = "FROM_MISMATCH"         // the draft's From is not the account's
	CodeContentChanged      = "CONTENT_CHANGED"       // the draft renders differently from what was approved
	CodeCapReached          = "DAILY_CAP_REACHED"     // the group's daily_send_cap is used up
	CodeRecipientNotAllowed = "RECIPIENT_NOT_ALLOWED" // a recipient is not on recipient_allowlist
	CodeAlreadySent         = "ALREADY_SENT"          // this exact draft was sent (or may have been) already
	CodeSendFailed          = "SEND_FAILED"           // the SMTP server refused the mail; nothing was sent
	CodeSendDoubt           = "SEND_UNCERTAIN"        // the connection broke after the mail was handed over
	CodeBadArgument         = "BAD_ARGUMENT"
)

func toolErr(code, field, format string, args ...any) *plugin.ToolError {
	return &plugin.ToolError{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// parseOneAddress parses exactly one address ("ann@example.com" or "Ann
// <ann@example.com>"), refusing line breaks and groups.
func parseOneAddress(s string) (*mail.Address, error) {
	if strings.ContainsAny(s, "\r\n\x00") {
		return nil, fmt.Errorf("a line break in an address")
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(a.Address, "\r\n\x00 ,;<>\"") || strings.ContainsAny(a.Name, "\r\n\x00") {
		return nil, fmt.Errorf("a character an address may not carry")
	}
	if _, bad := deceptive(a.Name+a.Address, false); bad {
		return nil, fmt.Errorf("a control character in an address")
	}
	_, domain, ok := strings.Cut(a.Address, "@")
	if !ok || !validDomain(domain) {
		return nil, fmt.Errorf("%q has no valid domain", a.Address)
	}
	return a, nil
}

// addressArg parses one of the agent's address arguments.
func addressList(field string, v []string) ([]*mail.Address, error) {
	var out []*mail.Address
	for _, s := range v {
		if strings.ContainsAny(s, "\r\n\x00") {
			return nil, toolErr(CodeHeaderInjection, field, "%s: an address contains a line break (CR or LF): refused, since it could add headers", field)
		}
		a, err := parseOneAddress(s)
		if err != nil {
			return nil, toolErr(CodeInvalidAddress, field, "%s: %q is not one valid address (write name@example.com or \"Name <name@example.com>\", one per item)", field, clipQ(s))
		}
		out = append(out, a)
	}
	return out, nil
}

func clipQ(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// composed is a mail as the plugin writes and sends it: one plain-text
// part. Every field has been checked (checkComposed).
type composed struct {
	From       *mail.Address
	To, Cc     []*mail.Address
	Bcc        []*mail.Address
	Subject    string
	Date       time.Time
	MessageID  string // without <>
	InReplyTo  string // without <>
	References []string
	Body       string // text, LF line ends
}

// trimSubject drops the spaces and tabs around a subject: a header's value
// is read back without them, so the subject a draft is shown with (in its
// approval) is the one its mail is read with once sent.
func trimSubject(s string) string { return strings.Trim(s, " \t") }

// checkSubject refuses a subject that could add headers.
func checkSubject(s string) error {
	if strings.ContainsAny(s, "\r\n\x00") {
		return toolErr(CodeHeaderInjection, "subject", "the subject contains a line break (CR or LF) or NUL: refused, since it could add headers")
	}
	if len(s) > MaxSubject || !utf8.ValidString(s) {
		return toolErr(CodeBadArgument, "subject", "the subject must be valid UTF-8 of at most %d bytes", MaxSubject)
	}
	if r, bad := deceptive(s, false); bad {
		return toolErr(CodeBadArgument, "subject", "the subject contains the control character %U, which could make the approval show something else than what is sent", r)
	}
	return nil
}

// deceptive finds a character that could make a person read a mail
// otherwise than it is sent: a control character (but tab, and line feed
// where lines are allowed) — a terminal escape, a backspace — or a
// direction override or isolate (U+202A–U+202E, U+2066–U+2069).
func deceptive(s string, lines bool) (rune, bool) {
	for _, r := range s {
		switch {
		case r == '\t', r == '\n' && lines:
		case r < 0x20, r >= 0x7f && r < 0xa0, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return r, true
		}
	}
	return 0, false
}

// normBody makes LF line ends and refuses NUL and oversize.
func normBody(b string, max int) (string, error) {
	b = strings.ReplaceAll(b, "\r\n", "\n")
	b = strings.ReplaceAll(b, "\r", "\n")
	if strings.ContainsRune(b, 0) || !utf8.ValidString(b) {
		return "", toolErr(CodeBadArgument, "body", "the body must be UTF-8 text without NUL")
	}
	if r, bad := deceptive(b, true); bad {
		return "", toolErr(CodeBadArgument, "body", "the body contains the control character %U, which could make the approval show something else than what is sent", r)
	}
	if len(b) > max {
		return "", toolErr(CodeBodyTooLarge, "body", "the body is %d bytes, over the limit of %d (max_body_bytes): shorten it", len(b), max)
	}
	return b, nil
}

func checkMsgID(field, id string) error {
	if strings.ContainsAny(id, "\r\n\x00 <>") || id == "" || len(id) > maxMsgID || !strings.Contains(id, "@") {
		return toolErr(CodeHeaderInjection, field, "%s: not a message id", field)
	}
	return nil
}

// newMessageID returns a fresh id at domain.
func newMessageID(domain string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "@" + domain
}

// replySubject returns "Re: subject", without piling up prefixes.
func replySubject(s string) string {
	t := strings.TrimSpace(s)
	if len(t) >= 3 && strings.EqualFold(t[:3], "re:") {
		return t
	}
	return "Re: " + t
}

// render writes the message. With bcc the Bcc header is written (the
// draft and the Sent copy keep it); without, it is left out (what goes
// over SMTP: Bcc recipients must not be seen by the others).
func (m *composed) render(bcc bool) []byte {
	var h gomail.Header
	h.SetDate(m.Date)
	h.SetAddressList("From", []*gomail.Address{(*gomail.Address)(m.From)})
	if len(m.To) > 0 {
		h.SetAddressList("To", conv(m.To))
	}
	if len(m.Cc) > 0 {
		h.SetAddressList("Cc", conv(m.Cc))
	}
	if bcc && len(m.Bcc) > 0 {
		h.SetAddressList("Bcc", conv(m.Bcc))
	}
	h.SetSubject(m.Subject)
	h.Set("Message-Id", "<"+m.MessageID+">")
	if m.InReplyTo != "" {
		h.Set("In-Reply-To", "<"+m.InReplyTo+">")
	}
	if len(m.References) > 0 {
		refs := make([]string, len(m.References))
		for i, r := range m.References {
			refs[i] = "<" + r + ">"
		}
		h.Set("References", strings.Join(refs, " "))
	}
	h.Set("Mime-Version", "1.0")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Transfer-Encoding", "quoted-printable")
	var buf bytes.Buffer
	// The header fields in a fixed order, so that the same message always
	// renders to the same bytes (the digest of a send depends on it).
	order := []string{"Date", "From", "To", "Cc", "Bcc", "Subject", "Message-Id", "In-Reply-To", "References", "Mime-Version", "Content-Type", "Content-Transfer-Encoding"}
	for _, k := range order {
		for _, v := range h.Values(k) {
			writeHeader(&buf, k, v)
		}
	}
	buf.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&buf)
	body := strings.ReplaceAll(m.Body, "\n", "\r\n")
	_, _ = io.WriteString(qp, body)
	_ = qp.Close()
	return buf.Bytes()
}

// writeHeader writes one field, folding long address lists at commas.
func writeHeader(buf *bytes.Buffer, k, v string) {
	line := k + ": " + v
	if len(line) <= 78 || (k != "To" && k != "Cc" && k != "Bcc" && k != "References") {
		buf.WriteString(line + "\r\n")
		return
	}
	sep := ", "
	if k == "References" {
		sep = " "
	}
	parts := strings.Split(v, sep)
	buf.WriteString(k + ": ")
	n := len(k) + 2
	for i, p := range parts {
		if i > 0 {
			buf.WriteString(strings.TrimSpace(sep))
			if n+len(p)+2 > 78 {
				buf.WriteString("\r\n ")
				n = 1
			} else {
				buf.WriteString(" ")
				n++
			}
		}
		buf.WriteString(p)
		n += len(p) + 1
	}
	buf.WriteString("\r\n")
}

func conv(l []*mail.Address) []*gomail.Address {
	out := make([]*gomail.Address, len(l))
	for i, a := range l {
		out[i] = (*gomail.Address)(a)
	}
	return out
}

// recipients returns every envelope recipient: To, Cc, Bcc.
func (m *composed) recipients() []string {
	var out []string
	for _, l := range [][]*mail.Address{m.To, m.Cc, m.Bcc} {
		for _, a := range l {
			out = append(out, a.Address)
		}
	}
	return out
}

// wire is what goes over SMTP for a send: the envelope and the data.
type wire struct {
	From string   // MAIL FROM
	To   []string // RCPT TO, in order
	Data []byte   // the message, CRLF line ends, no Bcc header
}

// digest is the digest (plugin.Digest) of the exact SMTP transaction:
// the envelope's sender, its recipients (one a line: an address has no
// line break), then the data. A preview's digest and a send's are equal
// exactly when the same mail would go to the same people.
func (w *wire) digest() string {
	return plugin.Digest([]byte(w.From), []byte(strings.Join(w.To, "\n")), w.Data)
}

// preview is the text a person reads before approving a send: the whole
// of it, never cut.
func (m *composed) preview(account string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Send this mail from account %q?\n\n", account)
	fmt.Fprintf(&b, "From: %s\n", fmtAddr(m.From))
	for _, f := range []struct {
		k string
		l []*mail.Address
	}{{"To", m.To}, {"Cc", m.Cc}, {"Bcc", m.Bcc}} {
		for _, a := range f.l {
			fmt.Fprintf(&b, "%s: %s\n", f.k, fmtAddr(a))
		}
	}
	fmt.Fprintf(&b, "Subject: %s\n", m.Subject)
	if m.InReplyTo != "" {
		fmt.Fprintf(&b, "In reply to: <%s>\n", m.InReplyTo)
	}
	fmt.Fprintf(&b, "\n%s", m.Body)
	if !strings.HasSuffix(m.Body, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

func fmtAddr(a *mail.Address) string {
	if a.Name == "" {
		return "<" + a.Address + ">"
	}
	return fmt.Sprintf("%q <%s>", a.Name, a.Address)
}

// wordDecoder decodes RFC 2047 words of any charset go-message knows.
func wordDecoder() *mime.WordDecoder { return &mime.WordDecoder{CharsetReader: charsetReader} }

// decodeWord decodes RFC 2047 words, leaving s as it is if it cannot.
func decodeWord(s string) string {
	if out, err := wordDecoder().DecodeHeader(s); err == nil {
		return out
	}
	return s
}
