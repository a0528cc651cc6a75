package mail

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

const (
	testUser = "me@example.com"
	testPass = "app-password-1"
)

// smtpMsg is one mail the fake SMTP server took.
type smtpMsg struct {
	From string
	To   []string
	Data []byte
}

// fakeSMTP is an in-process SMTP server (go-smtp's) that records what it
// is sent, after a PLAIN login.
type fakeSMTP struct {
	mu         sync.Mutex
	msgs       []smtpMsg
	rejectRcpt string // a recipient it refuses (550)
	logins     int
}

func (f *fakeSMTP) sent() []smtpMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]smtpMsg(nil), f.msgs...)
}

type smtpSession struct {
	f      *fakeSMTP
	authed bool
	cur    smtpMsg
}

func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != testUser || pass != testPass {
			return errors.New("bad login")
		}
		s.authed = true
		s.f.mu.Lock()
		s.f.logins++
		s.f.mu.Unlock()
		return nil
	}), nil
}
func (s *smtpSession) Reset()        { s.cur = smtpMsg{} }
func (s *smtpSession) Logout() error { return nil }
func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if !s.authed {
		return &smtp.SMTPError{Code: 530, Message: "auth first"}
	}
	s.cur.From = from
	return nil
}
func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if to == s.f.rejectRcpt {
		return &smtp.SMTPError{Code: 550, Message: "no such user"}
	}
	s.cur.To = append(s.cur.To, to)
	return nil
}
func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.Data = b
	s.f.mu.Lock()
	s.f.msgs = append(s.f.msgs, s.cur)
	s.f.mu.Unlock()
	return nil
}

// fixture is a handler wired to an in-process IMAP server (go-imap's
// memory server) and SMTP server, both plain on the loopback.
type fixture struct {
	t        *testing.T
	user     *imapmemserver.User
	imapAddr string
	smtpAddr string
	smtp     *fakeSMTP
	svc      *plugintest.Services
	dir      string
	h        *Handler
	now      time.Time
	// clientTLS is the handler's Options.TLSConfig.
	clientTLS *tls.Config
}

func listen(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// newServers starts the servers with mailboxes INBOX, Drafts, Sent and
// Archive.
func newServers(t *testing.T) *fixture { return newServersWith(t, nil, "") }

// newServersWith starts the servers with TLS: "tls" (implicit: the
// listeners speak TLS) or "starttls" (the servers offer STARTTLS); ""
// plain.
func newServersWith(t *testing.T, srvTLS *tls.Config, mode string) *fixture {
	t.Helper()
	f := &fixture{t: t, smtp: &fakeSMTP{}, dir: t.TempDir(), now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	mem := imapmemserver.New()
	f.user = imapmemserver.NewUser(testUser, testPass)
	for _, mb := range []string{"INBOX", "Drafts", "Sent", "Archive"} {
		if err := f.user.Create(mb, nil); err != nil {
			t.Fatal(err)
		}
	}
	mem.AddUser(f.user)
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIMAP4rev2: {}},
		InsecureAuth: mode == "",
		Logger:       discardLogger{},
		TLSConfig:    map[bool]*tls.Config{true: srvTLS}[mode == "starttls"],
	})
	ln := listen(t)
	if mode == "tls" {
		ln = tls.NewListener(ln, srvTLS)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	f.imapAddr = ln.Addr().String()

	s := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &smtpSession{f: f.smtp}, nil }))
	s.Domain = "localhost"
	s.AllowInsecureAuth = mode == ""
	s.ErrorLog = discardLogger{}
	sl := listen(t)
	switch mode {
	case "tls":
		sl = tls.NewListener(sl, srvTLS)
	case "starttls":
		s.TLSConfig = srvTLS
	}
	go func() { _ = s.Serve(sl) }()
	t.Cleanup(func() { _ = s.Close() })
	f.smtpAddr = sl.Addr().String()
	return f
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
func (discardLogger) Println(...any)        {}

// config returns the handler's config for the fixture's servers; mod, if
// given, changes it.
func (f *fixture) config(mod func(acct, cfg map[string]any)) map[string]any {
	acct := map[string]any{"name": "work", "imap": f.imapAddr, "imap_security": "plain", "smtp": f.smtpAddr,
		"smtp_security": "plain", "username": testUser, "from": "Me <me@example.com>"}
	cfg := map[string]any{"accounts": []any{acct},
		"groups": map[string]any{"main": map[string]any{"accounts": []any{"work"}, "daily_send_cap": json.Number("3")}}}
	if mod != nil {
		mod(acct, cfg)
	}
	return cfg
}

// start initialises a handler with cfg (the default config if nil).
func (f *fixture) start(cfg map[string]any) *Handler {
	f.t.Helper()
	if cfg == nil {
		cfg = f.config(nil)
	}
	if f.svc == nil {
		f.svc = &plugintest.Services{Plugin: Name, Channel: true, Credentials: plugintest.NewFakeCredentials(map[string]string{"work": testPass})}
	}
	var d net.Dialer
	h := New(Options{Dial: d.DialContext, DataDir: f.dir, TLSConfig: f.clientTLS, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return f.now }, RetryEvery: 50 * time.Millisecond, PollEvery: 50 * time.Millisecond, IdleRefresh: time.Second})
	if err := h.Init(context.Background(), cfg, f.svc); err != nil {
		f.t.Fatalf("Init: %v", err)
	}
	f.h = h
	f.t.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	return h
}

// seed puts a raw mail into a folder of the memory server.
func (f *fixture) seed(folder, raw string, flags ...imap.Flag) {
	f.t.Helper()
	raw = strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\n", "\r\n")
	if _, err := f.user.Append(folder, bytes.NewReader([]byte(raw)), &imap.AppendOptions{Flags: flags, Time: f.now}); err != nil {
		f.t.Fatal(err)
	}
}

// call invokes a tool as group main.
func (f *fixture) call(tool string, args map[string]any) (map[string]any, error) {
	return f.callAs("main", tool, args)
}

func (f *fixture) callAs(group, tool string, args map[string]any) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return f.h.Invoke(ctx, &plugin.Request{Tool: tool, Arguments: args, Group: group, Time: f.now})
}

// sendAs invokes mail_send of draftID as group, approved with digest (the
// core's Request.PreviewDigest).
func (f *fixture) sendAs(group, draftID, digest string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return f.h.Invoke(ctx, &plugin.Request{Tool: "mail_send", Arguments: map[string]any{"draft_id": draftID}, Group: group, Time: f.now, PreviewDigest: digest})
}

// must is call that fails the test on error.
func (f *fixture) must(tool string, args map[string]any) map[string]any {
	f.t.Helper()
	out, err := f.call(tool, args)
	if err != nil {
		f.t.Fatalf("%s: %v", tool, err)
	}
	return out
}

// code returns err's tool error code ("" for none).
func code(err error) string {
	if te, ok := plugin.AsToolError(err); ok {
		return te.Code
	}
	if err != nil {
		return "NOT A TOOL ERROR: " + err.Error()
	}
	return ""
}

// folderRaw returns the raw mails of a folder, by UID order.
func (f *fixture) folderRaw(folder string) []string {
	f.t.Helper()
	var d net.Dialer
	h := New(Options{Dial: d.DialContext})
	h.cfg = &config{}
	h.services = f.svc
	a := &Account{Name: "work", IMAP: f.imapAddr, IMAPSecurity: SecurityPlain, Username: testUser}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := h.connect(ctx, a, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	defer c.close()
	sel, err := c.selectFolder(folder, true)
	if err != nil {
		f.t.Fatal(err)
	}
	if sel.NumMessages == 0 {
		return nil
	}
	section := &imap.FetchItemBodySection{Peek: true}
	bufs, err := c.c.Fetch(imap.SeqSet{imap.SeqRange{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, b := range bufs {
		out = append(out, string(b.FindBodySection(section)))
	}
	return out
}

var _ = smtp.ErrAuthRequired
