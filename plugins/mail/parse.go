package mail

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/mail"
	"strings"
	"time"
	"unicode"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decode the common non-UTF-8 charsets
	gomail "github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"
)

// charsetReader decodes a charset into UTF-8 for header words.
func charsetReader(charset string, r io.Reader) (io.Reader, error) {
	if message.CharsetReader == nil {
		return nil, fmt.Errorf("unknown charset %q", charset)
	}
	return message.CharsetReader(strings.ToLower(charset), r)
}

// attachment is a part of a mail that is listed, never returned.
type attachment struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// parsed is what the plugin reads of a mail.
type parsed struct {
	Header      gomail.Header
	Text        string
	FromHTML    bool // Text was converted from HTML
	Attachments []attachment
	Problem     string // the MIME structure could not be read whole: why
}

// maxPartRead bounds what is read of one text part (bytes, decoded).
const maxPartRead = 4 << 20

// parseMessage reads a raw mail, leniently: a malformed one is shown as
// far as it can be read, with Problem saying what went wrong.
func parseMessage(raw []byte) *parsed {
	p := &parsed{}
	r, err := gomail.CreateReader(bytes.NewReader(raw))
	if r == nil {
		// Not even a header block: show the bytes as text.
		p.Problem = "the mail's header could not be read; shown as raw text"
		p.Text = cleanText(string(raw))
		if h, herr := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(raw))); herr == nil {
			p.Header = gomail.Header{Header: message.Header{Header: h}}
		}
		return p
	}
	p.Header = r.Header
	if err != nil {
		p.Problem = "unknown charset: " + err.Error()
	}
	var plain, html string
	var haveHTML bool
	for {
		part, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil && !message.IsUnknownCharset(err) {
			if p.Problem == "" {
				p.Problem = "the MIME structure is malformed: " + err.Error()
			}
			if plain == "" && !haveHTML {
				// Show the undecoded body rather than nothing.
				if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
					plain = string(raw[i+4:])
				} else if i := bytes.Index(raw, []byte("\n\n")); i >= 0 {
					plain = string(raw[i+2:])
				}
			}
			break
		}
		switch h := part.Header.(type) {
		case *gomail.InlineHeader:
			t, _, _ := h.ContentType()
			if t == "" {
				t = "text/plain"
			}
			if t == "text/plain" && plain == "" {
				b, _ := io.ReadAll(io.LimitReader(part.Body, maxPartRead))
				plain = string(b)
				continue
			}
			if t == "text/html" && !haveHTML {
				b, _ := io.ReadAll(io.LimitReader(part.Body, maxPartRead))
				html, haveHTML = string(b), true
				continue
			}
			if strings.HasPrefix(t, "text/") {
				continue // a second text part (another alternative)
			}
			p.Attachments = append(p.Attachments, listAttachment(&gomail.AttachmentHeader{Header: h.Header}, part.Body))
		case *gomail.AttachmentHeader:
			p.Attachments = append(p.Attachments, listAttachment(h, part.Body))
		}
	}
	switch {
	case plain != "":
		p.Text = cleanText(plain)
	case haveHTML:
		p.Text, p.FromHTML = htmlToText(html), true
	}
	return p
}

// listAttachment hashes a part's decoded bytes.
func listAttachment(h *gomail.AttachmentHeader, body io.Reader) attachment {
	name, _ := h.Filename()
	t, _, _ := h.ContentType()
	if t == "" {
		t = "application/octet-stream"
	}
	sum := sha256.New()
	n, _ := io.Copy(sum, body)
	return attachment{Name: cleanLine(name), Type: cleanLine(t), Size: n, SHA256: hex.EncodeToString(sum.Sum(nil))}
}

// htmlToText converts an HTML body to readable text (Markdown).
func htmlToText(html string) string {
	md, err := htmltomarkdown.ConvertString(html)
	if err != nil {
		return cleanText(html)
	}
	return cleanText(md)
}

// cleanText makes text safe to show: valid UTF-8, LF line ends, no
// control characters but tab and line feed.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
}

// cleanLine is cleanText on one line.
func cleanLine(s string) string {
	return strings.ReplaceAll(cleanText(s), "\n", " ")
}

// snippet is the first n runes of text, whitespace collapsed.
func snippet(text string, n int) string {
	f := strings.Join(strings.Fields(text), " ")
	r := []rune(f)
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return f
}

// headerAddresses returns a header's addresses as text, leniently.
func headerAddresses(h *gomail.Header, key string) []string {
	list, err := h.AddressList(key)
	if err != nil {
		v := h.Get(key)
		if v == "" {
			return nil
		}
		return []string{cleanLine(decodeWord(v))}
	}
	out := make([]string, 0, len(list))
	for _, a := range list {
		out = append(out, displayAddress((*mail.Address)(a)))
	}
	return out
}

// displayAddress shows an address for reading (not for a header):
// "Name <address>", the name decoded and cleaned.
func displayAddress(a *mail.Address) string {
	if a.Name == "" {
		return cleanLine(a.Address)
	}
	return cleanLine(a.Name) + " <" + cleanLine(a.Address) + ">"
}

// parseDraft reads a draft back as the mail to send, checking it again:
// a draft may have been edited since mail_draft wrote it (by the user,
// in a mail client). Only one plain-text part is sent.
func parseDraft(raw []byte, maxBody int) (*composed, error) {
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil {
		return nil, toolErr(CodeDraftUnsupported, "draft_id", "the draft cannot be read as a mail (%s); write it again with mail_draft", clipQ(err.Error()))
	}
	if e.MultipartReader() != nil {
		return nil, toolErr(CodeDraftUnsupported, "draft_id", "the draft has several parts (attachments or HTML); mail_send sends plain-text drafts only: write it again with mail_draft")
	}
	t, params, _ := e.Header.ContentType()
	if t != "" && t != "text/plain" {
		return nil, toolErr(CodeDraftUnsupported, "draft_id", "the draft is %s, not plain text; mail_send sends plain-text drafts only", clipQ(t))
	}
	if cs := strings.ToLower(params["charset"]); cs != "" && cs != "utf-8" && cs != "us-ascii" {
		return nil, toolErr(CodeDraftUnsupported, "draft_id", "the draft's charset is %s; mail_send sends UTF-8 drafts only", clipQ(cs))
	}
	h := gomail.Header{Header: e.Header}
	m := &composed{}
	for _, k := range []string{"From", "To", "Cc", "Bcc", "Subject", "Message-Id", "In-Reply-To", "References", "Date"} {
		for _, v := range h.Values(k) {
			if strings.ContainsAny(v, "\x00") {
				return nil, toolErr(CodeHeaderInjection, "draft_id", "the draft's %s header contains NUL", k)
			}
		}
	}
	from, err := h.AddressList("From")
	if err != nil || len(from) != 1 {
		return nil, toolErr(CodeInvalidAddress, "draft_id", "the draft's From is not one address")
	}
	m.From = (*mail.Address)(from[0])
	for _, f := range []struct {
		k   string
		dst *[]*mail.Address
	}{{"To", &m.To}, {"Cc", &m.Cc}, {"Bcc", &m.Bcc}} {
		l, err := h.AddressList(f.k)
		if err != nil {
			return nil, toolErr(CodeInvalidAddress, "draft_id", "the draft's %s is not a list of valid addresses", f.k)
		}
		for _, a := range l {
			*f.dst = append(*f.dst, (*mail.Address)(a))
		}
	}
	for _, a := range append(append(append([]*mail.Address{m.From}, m.To...), m.Cc...), m.Bcc...) {
		if strings.ContainsAny(a.Name+a.Address, "\r\n\x00") {
			return nil, toolErr(CodeHeaderInjection, "draft_id", "an address of the draft contains a line break")
		}
		if _, err := parseOneAddress(a.Address); err != nil {
			return nil, toolErr(CodeInvalidAddress, "draft_id", "the draft's address %q is not valid", clipQ(a.Address))
		}
	}
	if n := len(m.To) + len(m.Cc) + len(m.Bcc); n == 0 {
		return nil, toolErr(CodeNoRecipient, "draft_id", "the draft has no recipient")
	} else if n > MaxRecipients {
		return nil, toolErr(CodeTooManyRecipients, "draft_id", "the draft has %d recipients, over the limit of %d", n, MaxRecipients)
	}
	if m.Subject, err = h.Subject(); err != nil {
		m.Subject = h.Get("Subject")
	}
	if err := checkSubject(m.Subject); err != nil {
		return nil, toolErr(CodeHeaderInjection, "draft_id", "the draft's subject contains a line break or is not valid UTF-8")
	}
	m.Subject = trimSubject(m.Subject)
	if m.Date, err = h.Date(); err != nil {
		return nil, toolErr(CodeDraftUnsupported, "draft_id", "the draft has no valid Date")
	}
	m.Date = m.Date.Truncate(time.Second)
	if m.MessageID, err = h.MessageID(); err != nil || checkMsgID("draft_id", m.MessageID) != nil {
		return nil, toolErr(CodeDraftUnsupported, "draft_id", "the draft has no valid Message-Id")
	}
	if irt, err := h.MsgIDList("In-Reply-To"); err == nil && len(irt) > 0 {
		m.InReplyTo = irt[0]
	}
	if refs, err := h.MsgIDList("References"); err == nil {
		m.References = refs
	}
	for _, id := range append([]string{m.InReplyTo}, m.References...) {
		if id != "" && checkMsgID("draft_id", id) != nil {
			return nil, toolErr(CodeHeaderInjection, "draft_id", "the draft's threading headers are not valid message ids")
		}
	}
	b, err := io.ReadAll(io.LimitReader(e.Body, int64(maxBody)*4+1))
	if err != nil {
		return nil, toolErr(CodeDraftUnsupported, "draft_id", "the draft's body cannot be decoded")
	}
	body, terr := normBody(string(b), maxBody)
	if terr != nil {
		return nil, terr
	}
	m.Body = body
	return m, nil
}
