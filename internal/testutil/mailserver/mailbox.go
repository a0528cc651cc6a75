package mailserver

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Message is one message as an IMAP client sees it in a mailbox.
type Message struct {
	// UID is the message's IMAP UID in its mailbox.
	UID uint32
	// Flags are its IMAP flags (`\Seen`, `\Draft`, keywords).
	Flags []string
	// Raw is the whole message, BODY[] (with CRLF line ends, as
	// IMAP serves it; what Postfix and LMTP delivered includes their
	// Received, Return-Path and Delivered-To headers).
	Raw []byte
}

// Mailbox is one folder of a user, as LIST shows it.
type Mailbox struct {
	// Name is the mailbox's name ("INBOX", "Drafts").
	Name string
	// Attrs are its LIST attributes, special use included (`\Drafts`).
	Attrs []string
}

// Dial logs in as the user named name over IMAP with implicit TLS and
// returns the client, closed when t ends. opts may set a handler for
// unilateral data (IDLE); its TLSConfig is replaced by s.TLSConfig().
func (s *Server) Dial(t testing.TB, name string, opts *imapclient.Options) *imapclient.Client {
	t.Helper()
	c, err := s.dial(s.User(t, name), opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// dial connects over IMAPS and logs u in.
func (s *Server) dial(u User, opts *imapclient.Options) (*imapclient.Client, error) {
	var o imapclient.Options
	if opts != nil {
		o = *opts
	}
	o.TLSConfig = s.TLSConfig()
	c, err := imapclient.DialTLS(s.Addr(s.IMAPSPort), &o)
	if err != nil {
		return nil, fmt.Errorf("mailserver: IMAP dial %s: %w", s.Addr(s.IMAPSPort), err)
	}
	if err := c.Login(u.Address, u.Password).Wait(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("mailserver: IMAP login as %s: %w", u.Address, err)
	}
	return c, nil
}

// session runs f with a logged-in client for the user named name and
// logs out.
func (s *Server) session(t testing.TB, name string, f func(*imapclient.Client) error) {
	t.Helper()
	c, err := s.dial(s.User(t, name), nil)
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer c.Close()
	if err := f(c); err != nil {
		t.Fatalf("mailserver: %s: %v", s.User(t, name).Address, err)
	}
	_ = c.Logout().Wait()
}

// Append stores raw in the mailbox of the user named name with flags
// (`\Seen`, `\Draft`…) over IMAP APPEND, and returns its UID: how a test
// seeds a mailbox.
func (s *Server) Append(t testing.TB, name, mailbox string, raw []byte, flags ...string) uint32 {
	t.Helper()
	var uid uint32
	s.session(t, name, func(c *imapclient.Client) error {
		o := &imap.AppendOptions{}
		for _, f := range flags {
			o.Flags = append(o.Flags, imap.Flag(f))
		}
		cmd := c.Append(mailbox, int64(len(raw)), o)
		if _, err := cmd.Write(raw); err != nil {
			return fmt.Errorf("APPEND to %s: %w", mailbox, err)
		}
		if err := cmd.Close(); err != nil {
			return fmt.Errorf("APPEND to %s: %w", mailbox, err)
		}
		data, err := cmd.Wait()
		if err != nil {
			return fmt.Errorf("APPEND to %s: %w", mailbox, err)
		}
		uid = uint32(data.UID)
		return nil
	})
	return uid
}

// Messages returns every message in the mailbox of the user named name,
// in UID order, without changing their flags (EXAMINE, BODY.PEEK[]).
func (s *Server) Messages(t testing.TB, name, mailbox string) []Message {
	t.Helper()
	var msgs []Message
	s.session(t, name, func(c *imapclient.Client) error {
		var err error
		msgs, err = fetchAll(c, mailbox)
		return err
	})
	return msgs
}

// fetchAll examines mailbox and fetches every message in it.
func fetchAll(c *imapclient.Client, mailbox string) ([]Message, error) {
	sel, err := c.Select(mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		return nil, fmt.Errorf("EXAMINE %s: %w", mailbox, err)
	}
	if sel.NumMessages == 0 {
		return nil, nil
	}
	var all imap.SeqSet
	all.AddRange(1, 0) // 1:*
	body := &imap.FetchItemBodySection{Peek: true}
	bufs, err := c.Fetch(all, &imap.FetchOptions{UID: true, Flags: true, BodySection: []*imap.FetchItemBodySection{body}}).Collect()
	if err != nil {
		return nil, fmt.Errorf("FETCH in %s: %w", mailbox, err)
	}
	msgs := make([]Message, 0, len(bufs))
	for _, b := range bufs {
		m := Message{UID: uint32(b.UID), Raw: b.FindBodySection(body)}
		for _, f := range b.Flags {
			m.Flags = append(m.Flags, string(f))
		}
		msgs = append(msgs, m)
	}
	slices.SortFunc(msgs, func(a, b Message) int { return int(a.UID) - int(b.UID) })
	return msgs, nil
}

// Mailboxes lists the folders of the user named name with their
// attributes, special use included.
func (s *Server) Mailboxes(t testing.TB, name string) []Mailbox {
	t.Helper()
	var boxes []Mailbox
	s.session(t, name, func(c *imapclient.Client) error {
		list, err := c.List("", "*", &imap.ListOptions{ReturnSpecialUse: true}).Collect()
		if err != nil {
			return fmt.Errorf("LIST: %w", err)
		}
		for _, l := range list {
			b := Mailbox{Name: l.Mailbox}
			for _, a := range l.Attrs {
				b.Attrs = append(b.Attrs, string(a))
			}
			boxes = append(boxes, b)
		}
		return nil
	})
	return boxes
}

// Total counts the messages in every mailbox of every user: zero means
// nothing was delivered, drafted or appended anywhere.
func (s *Server) Total(t testing.TB) int {
	t.Helper()
	n := 0
	for _, u := range s.Users {
		for _, b := range s.Mailboxes(t, u.Name) {
			if slices.Contains(b.Attrs, string(imap.MailboxAttrNoSelect)) {
				continue
			}
			n += len(s.Messages(t, u.Name, b.Name))
		}
	}
	return n
}

// WaitMessages polls the mailbox of the user named name until it holds
// at least n messages, and returns them; it fails the test, with the
// servers' logs, after a generous deadline (delivery goes through
// Postfix's queue and LMTP).
func (s *Server) WaitMessages(t testing.TB, name, mailbox string, n int) []Message {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		msgs := s.Messages(t, name, mailbox)
		if len(msgs) >= n {
			return msgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("mailserver: %s's %s holds %d messages after %v, want %d (Postfix's log says what became of the mail)",
				s.User(t, name).Address, mailbox, len(msgs), startTimeout, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Send submits raw as the user named from, to the addresses to, through
// Postfix's submission port (STARTTLS, AUTH PLAIN): how a test makes mail
// arrive the way a stranger's would. Delivery is asynchronous; wait for
// it with WaitMessages.
func (s *Server) Send(t testing.TB, from string, to []string, raw []byte) {
	t.Helper()
	u := s.User(t, from)
	c, err := smtp.DialStartTLS(s.Addr(s.SubmissionPort), s.TLSConfig())
	if err != nil {
		t.Fatalf("mailserver: SMTP dial %s: %v", s.Addr(s.SubmissionPort), err)
	}
	defer c.Close()
	if err := c.Auth(sasl.NewPlainClient("", u.Address, u.Password)); err != nil {
		t.Fatalf("mailserver: SMTP AUTH as %s: %v", u.Address, err)
	}
	if err := c.SendMail(u.Address, to, bytes.NewReader(raw)); err != nil {
		t.Fatalf("mailserver: sending as %s to %v: %v", u.Address, to, err)
	}
	if err := c.Quit(); err != nil {
		t.Fatalf("mailserver: SMTP QUIT: %v", err)
	}
}
