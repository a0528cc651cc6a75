package mailserver

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// submit sends raw from one user to the addresses to over the given
// submission port, authenticating with auth.
func submit(s *Server, implicitTLS bool, auth sasl.Client, from string, to []string, raw []byte) error {
	var c *smtp.Client
	var err error
	if implicitTLS {
		c, err = smtp.DialTLS(s.Addr(s.SubmissionsPort), s.TLSConfig())
	} else {
		c, err = smtp.DialStartTLS(s.Addr(s.SubmissionPort), s.TLSConfig())
	}
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	if err := c.Auth(auth); err != nil {
		return fmt.Errorf("AUTH: %w", err)
	}
	if err := c.SendMail(from, to, bytes.NewReader(raw)); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return c.Quit()
}

// testMessage is a message from alice to bob whose body carries token.
func testMessage(token string) []byte {
	return []byte("From: alice@example.test\r\n" +
		"To: bob@example.test\r\n" +
		"Subject: harness " + token + "\r\n" +
		"Message-ID: <" + token + "@example.test>\r\n" +
		"\r\n" +
		"Hello Bob,\r\n" + token + "\r\n")
}

// body is what follows a message's header.
func body(raw []byte) []byte {
	_, b, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok {
		return nil
	}
	return b
}

func TestSubmissionDeliversIntoInbox(t *testing.T) {
	t0 := time.Now()
	s := Start(t)
	t.Logf("start took %v", time.Since(t0))
	alice, bob := s.User(t, "alice"), s.User(t, "bob")
	cases := []struct {
		name        string
		implicitTLS bool
		auth        sasl.Client
	}{
		{"STARTTLS/PLAIN", false, sasl.NewPlainClient("", alice.Address, alice.Password)},
		{"implicitTLS/PLAIN", true, sasl.NewPlainClient("", alice.Address, alice.Password)},
		{"STARTTLS/LOGIN", false, sasl.NewLoginClient(alice.Address, alice.Password)},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			token := fmt.Sprintf("token-%d-%d", i, time.Now().UnixNano())
			msg := testMessage(token)
			if err := submit(s, tc.implicitTLS, tc.auth, alice.Address, []string{bob.Address}, msg); err != nil {
				t.Fatalf("submission: %v", err)
			}
			msgs := s.WaitMessages(t, "bob", "INBOX", i+1)
			if len(msgs) != i+1 {
				t.Fatalf("bob's INBOX holds %d messages, want %d", len(msgs), i+1)
			}
			got := msgs[i]
			if !bytes.Equal(body(got.Raw), body(msg)) {
				t.Fatalf("delivered body %q, sent %q", body(got.Raw), body(msg))
			}
			if !bytes.Contains(got.Raw, []byte("Subject: harness "+token+"\r\n")) {
				t.Fatalf("delivered message lacks its subject:\n%s", got.Raw)
			}
			// It went through Postfix and LMTP, not around them.
			for _, h := range []string{"Received: from ", "Delivered-To: bob@example.test", "Return-Path: <alice@example.test>"} {
				if !bytes.Contains(got.Raw, []byte(h)) {
					t.Errorf("delivered message lacks %q:\n%s", h, got.Raw)
				}
			}
		})
	}
	// Delivered to bob, not to alice.
	if n := len(s.Messages(t, "alice", "INBOX")); n != 0 {
		t.Fatalf("alice's INBOX holds %d messages, want 0", n)
	}
}

func TestWrongPasswordIsRefused(t *testing.T) {
	s := Start(t)
	alice := s.User(t, "alice")
	wrong := alice.Password + "x"
	imapLogin := func(startTLS bool, pw string) error {
		var c *imapclient.Client
		var err error
		if startTLS {
			c, err = imapclient.DialStartTLS(s.Addr(s.IMAPPort), &imapclient.Options{TLSConfig: s.TLSConfig()})
		} else {
			c, err = imapclient.DialTLS(s.Addr(s.IMAPSPort), &imapclient.Options{TLSConfig: s.TLSConfig()})
		}
		if err != nil {
			return fmt.Errorf("dial: %w", err)
		}
		defer c.Close()
		return c.Login(alice.Address, pw).Wait()
	}
	smtpAuth := func(implicitTLS bool, pw string) error {
		var c *smtp.Client
		var err error
		if implicitTLS {
			c, err = smtp.DialTLS(s.Addr(s.SubmissionsPort), s.TLSConfig())
		} else {
			c, err = smtp.DialStartTLS(s.Addr(s.SubmissionPort), s.TLSConfig())
		}
		if err != nil {
			return fmt.Errorf("dial: %w", err)
		}
		defer c.Close()
		return c.Auth(sasl.NewPlainClient("", alice.Address, pw))
	}
	cases := []struct {
		name  string
		login func(pw string) error
	}{
		{"IMAP/STARTTLS", func(pw string) error { return imapLogin(true, pw) }},
		{"IMAP/implicitTLS", func(pw string) error { return imapLogin(false, pw) }},
		{"SMTP/STARTTLS", func(pw string) error { return smtpAuth(false, pw) }},
		{"SMTP/implicitTLS", func(pw string) error { return smtpAuth(true, pw) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.login(alice.Password); err != nil {
				t.Fatalf("the right password is refused: %v", err)
			}
			err := tc.login(wrong)
			if err == nil {
				t.Fatal("a wrong password is accepted")
			}
			if strings.HasPrefix(err.Error(), "dial:") {
				t.Fatalf("the wrong password did not reach the server: %v", err)
			}
		})
	}
	t.Run("SMTP/no AUTH", func(t *testing.T) {
		c, err := smtp.DialStartTLS(s.Addr(s.SubmissionPort), s.TLSConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err = c.SendMail(alice.Address, []string{s.User(t, "bob").Address}, bytes.NewReader(testMessage("noauth")))
		if err == nil {
			t.Fatal("a message without AUTH is accepted for submission")
		}
		t.Logf("refused as it should be: %v", err)
	})
}

func TestNoPasswordBeforeTLS(t *testing.T) {
	s := Start(t)
	alice := s.User(t, "alice")
	t.Run("IMAP", func(t *testing.T) {
		c, err := imapclient.DialInsecure(s.Addr(s.IMAPPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !c.Caps().Has(imap.CapStartTLS) {
			t.Fatalf("no STARTTLS offered: %v", c.Caps())
		}
		if !c.Caps().Has(imap.CapLoginDisabled) {
			t.Errorf("LOGINDISABLED not announced before STARTTLS: %v", c.Caps())
		}
		if err := c.Login(alice.Address, alice.Password).Wait(); err == nil {
			t.Fatal("the right password is accepted in clear text")
		}
		// The positive control: the same login after STARTTLS.
		c2, err := imapclient.DialStartTLS(s.Addr(s.IMAPPort), &imapclient.Options{TLSConfig: s.TLSConfig()})
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		if err := c2.Login(alice.Address, alice.Password).Wait(); err != nil {
			t.Fatalf("after STARTTLS: %v", err)
		}
	})
	t.Run("SMTP", func(t *testing.T) {
		c, err := smtp.Dial(s.Addr(s.SubmissionPort))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if ok, _ := c.Extension("STARTTLS"); !ok {
			t.Fatal("no STARTTLS offered")
		}
		if err := c.Auth(sasl.NewPlainClient("", alice.Address, alice.Password)); err == nil {
			t.Fatal("the right password is accepted in clear text")
		}
		// The positive control is TestSubmissionDeliversIntoInbox's.
	})
}

func TestIdleSeesDelivery(t *testing.T) {
	s := Start(t)
	bob := s.User(t, "bob")
	counts := make(chan uint32, 16)
	c := s.Dial(t, "bob", &imapclient.Options{UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			if d.NumMessages != nil {
				counts <- *d.NumMessages
			}
		},
	}})
	sel, err := c.Select("INBOX", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if sel.NumMessages != 0 {
		t.Fatalf("bob's INBOX starts with %d messages", sel.NumMessages)
	}
	idle, err := c.Idle()
	if err != nil {
		t.Fatalf("IDLE: %v", err)
	}
	s.Send(t, "alice", []string{bob.Address}, testMessage("idle"))
	select {
	case n := <-counts:
		if n != 1 {
			t.Fatalf("IDLE reports %d messages, want 1", n)
		}
	case <-time.After(startTimeout):
		t.Fatalf("IDLE reported nothing within %v of a delivery", startTimeout)
	}
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idle.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestSpecialUseFolders(t *testing.T) {
	s := Start(t, WithUsers("carol"))
	boxes := s.Mailboxes(t, "carol")
	want := map[string]string{"Drafts": `\Drafts`, "Sent": `\Sent`, "Archive": `\Archive`, "Junk": `\Junk`, "Trash": `\Trash`}
	for name, use := range want {
		i := slices.IndexFunc(boxes, func(b Mailbox) bool { return b.Name == name })
		if i < 0 {
			t.Errorf("no %s folder in %v", name, boxes)
			continue
		}
		if !slices.Contains(boxes[i].Attrs, use) {
			t.Errorf("%s has attributes %v, want %s", name, boxes[i].Attrs, use)
		}
	}
	// SPECIAL-USE selection finds Drafts by its use, as a client does.
	c := s.Dial(t, "carol", nil)
	list, err := c.List("", "*", &imap.ListOptions{SelectSpecialUse: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var drafts []string
	for _, l := range list {
		if slices.Contains(l.Attrs, imap.MailboxAttrDrafts) {
			drafts = append(drafts, l.Mailbox)
		}
	}
	if !slices.Equal(drafts, []string{"Drafts"}) {
		t.Fatalf("folders with \\Drafts: %v, want [Drafts]", drafts)
	}
}

func TestAppendAndMessages(t *testing.T) {
	s := Start(t)
	// Bytes that are not UTF-8 come back as they went in.
	raw := []byte("From: bob@example.test\r\nTo: alice@example.test\r\nSubject: caf\xe9\r\nContent-Type: text/plain; charset=iso-8859-1\r\n\r\nna\xefve\r\n")
	uid := s.Append(t, "alice", "Drafts", raw, `\Draft`, `\Seen`)
	uid2 := s.Append(t, "alice", "Drafts", testMessage("second"))
	if uid == 0 || uid2 <= uid {
		t.Fatalf("APPEND UIDs %d then %d, want increasing and non-zero", uid, uid2)
	}
	msgs := s.Messages(t, "alice", "Drafts")
	if len(msgs) != 2 {
		t.Fatalf("Drafts holds %d messages, want 2", len(msgs))
	}
	if msgs[0].UID != uid || !bytes.Equal(msgs[0].Raw, raw) {
		t.Fatalf("first message UID %d %q, want UID %d %q", msgs[0].UID, msgs[0].Raw, uid, raw)
	}
	for _, f := range []string{`\Draft`, `\Seen`} {
		if !slices.Contains(msgs[0].Flags, f) {
			t.Errorf("flags %v lack %s", msgs[0].Flags, f)
		}
	}
	if slices.Contains(msgs[1].Flags, `\Seen`) {
		t.Errorf("the second message has flags %v, want no \\Seen", msgs[1].Flags)
	}
	// Messages did not mark anything read.
	if again := s.Messages(t, "alice", "Drafts"); slices.Contains(again[1].Flags, `\Seen`) {
		t.Errorf("reading marked the message \\Seen: %v", again[1].Flags)
	}
	if n := s.Total(t); n != 2 {
		t.Fatalf("Total = %d, want 2", n)
	}
	if n := len(s.Messages(t, "bob", "Drafts")); n != 0 {
		t.Fatalf("bob's Drafts holds %d, want 0", n)
	}
}

func TestCAFile(t *testing.T) {
	s := Start(t, WithUsers("dave"))
	b, err := os.ReadFile(s.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, s.CAPEM) {
		t.Fatal("CAFile differs from CAPEM")
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("CAFile is not PEM: %q", b)
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.IsCA {
		t.Fatal("CAFile's certificate is not a CA")
	}
	// A client trusting only the CA file reaches the server; one trusting
	// the system roots does not (the positive control for the CA).
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	cfg := s.TLSConfig()
	cfg.RootCAs = pool
	c, err := imapclient.DialTLS(s.Addr(s.IMAPSPort), &imapclient.Options{TLSConfig: cfg})
	if err != nil {
		t.Fatalf("a client trusting CAFile: %v", err)
	}
	if err := c.WaitGreeting(); err != nil {
		t.Fatalf("a client trusting CAFile: %v", err)
	}
	c.Close()
	if c, err := imapclient.DialTLS(s.Addr(s.IMAPSPort), nil); err == nil {
		c.Close()
		t.Fatal("a client trusting the system roots accepted the test certificate")
	}
}

// groupProcs counts the live processes in the process groups pgids.
func groupProcs(pgids []int) int {
	n := 0
	for _, g := range pgids {
		n += len(groupMembers(g))
	}
	return n
}

func TestStopLeavesNothing(t *testing.T) {
	s := Start(t)
	// Make both servers start workers: a login and a delivery.
	alice := s.User(t, "alice")
	if err := submit(s, false, sasl.NewPlainClient("", alice.Address, alice.Password), alice.Address, []string{s.User(t, "bob").Address}, testMessage("stop")); err != nil {
		t.Fatal(err)
	}
	s.WaitMessages(t, "bob", "INBOX", 1)
	var pgids []int
	for _, p := range s.procs {
		pgids = append(pgids, p.cmd.Process.Pid)
	}
	if n := groupProcs(pgids); n < 4 {
		t.Fatalf("%d processes in the servers' groups %v before Stop, want several", n, pgids)
	}
	s.Stop()
	if n := groupProcs(pgids); n != 0 {
		t.Fatalf("%d processes left in the servers' groups %v after Stop", n, pgids)
	}
	for _, port := range []int{s.IMAPPort, s.IMAPSPort, s.LMTPPort, s.SubmissionPort, s.SubmissionsPort} {
		if err := s.greet(t.Context(), s.Addr(port), false); err == nil {
			t.Errorf("port %d still answers after Stop", port)
		}
	}
}

// BenchmarkStart measures a whole start (certificates, configuration,
// both servers answering on every port) and stop.
func BenchmarkStart(b *testing.B) {
	for b.Loop() {
		s := Start(b)
		s.Stop()
	}
}

// recorder is a testing.TB whose cleanups run when the test says, that
// may report itself failed, and that records what is logged.
type recorder struct {
	testing.TB
	failed   bool
	logs     strings.Builder
	cleanups []func()
}

func (r *recorder) Cleanup(f func())                { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Failed() bool                    { return r.failed }
func (r *recorder) Logf(format string, args ...any) { fmt.Fprintf(&r.logs, format+"\n", args...) }

// runCleanups runs the cleanups registered so far, once.
func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.cleanups = nil
}

func TestLogsShownWhenTheTestFailed(t *testing.T) {
	for _, failed := range []bool{false, true} {
		t.Run(fmt.Sprintf("failed=%v", failed), func(t *testing.T) {
			r := &recorder{TB: t, failed: failed}
			t.Cleanup(r.runCleanups) // when the test stops early
			s := Start(r)
			alice := s.User(t, "alice")
			s.Send(t, "alice", []string{s.User(t, "bob").Address}, testMessage("logs"))
			s.WaitMessages(t, "bob", "INBOX", 1)
			if err := submit(s, false, sasl.NewPlainClient("", alice.Address, "wrong"), alice.Address, nil, nil); err == nil {
				t.Fatal("a wrong password is accepted")
			}
			r.runCleanups()
			logs := r.logs.String()
			if !failed {
				if logs != "" {
					t.Fatalf("a passing test printed the logs:\n%s", logs)
				}
			} else {
				for _, want := range []string{"--- dovecot.log ---", "--- postfix.log ---", "lmtp", "status=sent", "authentication failed"} {
					if !strings.Contains(logs, want) {
						t.Errorf("the logs shown lack %q:\n%s", want, logs)
					}
				}
				if strings.Contains(logs, alice.Password) {
					t.Errorf("the logs shown hold alice's password")
				}
			}
			if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
				t.Fatalf("the servers' directory is still there after cleanup: %v", err)
			}
		})
	}
}

func TestTakenPortIsRetried(t *testing.T) {
	// A port found free and taken before Dovecot binds it, by a listener
	// that answers nothing.
	hog, err := net.Listen("tcp", net.JoinHostPort(Host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Close()
	go func() {
		for {
			c, err := hog.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	taken := hog.Addr().(*net.TCPAddr).Port
	calls := 0
	pickPorts = func(n int) ([]int, error) {
		calls++
		ports, err := freePorts(n)
		if calls == 1 && err == nil {
			ports[0] = taken // the IMAP port
		}
		return ports, err
	}
	defer func() { pickPorts = freePorts }()
	s := Start(t)
	if calls != 2 {
		t.Fatalf("ports picked %d times, want 2 (the first start failing on the taken port)", calls)
	}
	if s.IMAPPort == taken {
		t.Fatalf("IMAP on the taken port %d", taken)
	}
	// The servers of the retry work.
	if n := len(s.Mailboxes(t, "alice")); n == 0 {
		t.Fatal("no mailboxes")
	}
}
