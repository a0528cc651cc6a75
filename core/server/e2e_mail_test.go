package server_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"mime/quotedprintable"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/sqlitedb"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/internal/testutil/mailserver"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/keychain"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
)

// The mail plugin end to end against the real servers of
// internal/testutil/mailserver (docs/MAIL.md, "How it is tested"): a
// Dovecot and a Postfix from Debian, started for each test on 127.0.0.2
// with TLS from a throwaway CA, which the confined plugin trusts because
// the core's environment names it in SSL_CERT_FILE. The account is
// alice's; mail to bob (and carol, dave) goes through Postfix's
// submission and is delivered by LMTP into Dovecot, where the test reads
// it apart from the plugin.

// mailAccount is the [plugins.mail] block of alice's account on srv, for
// group main: IMAP with implicit TLS, SMTP submission with STARTTLS.
// extra goes into the account's table.
func mailAccount(srv *mailserver.Server, extra string) string {
	return mailAccountVia(srv, srv.IMAPSPort, "tls", srv.SubmissionPort, "starttls", extra)
}

// mailAccountVia is mailAccount on the given ports, with their security.
func mailAccountVia(srv *mailserver.Server, imapPort int, imapSecurity string, smtpPort int, smtpSecurity, extra string) string {
	return fmt.Sprintf(`
[plugins.mail]
[plugins.mail.config.groups.main]
accounts = ["work"]
[[plugins.mail.config.accounts]]
name = "work"
imap = %q
imap_security = %q
smtp = %q
smtp_security = %q
username = %q
from = "Alice <%s>"
%s`, srv.Addr(imapPort), imapSecurity, srv.Addr(smtpPort), smtpSecurity, srv.Users[0].Address, srv.Users[0].Address, extra)
}

// startMailServers starts the servers (alice first) and makes the cores
// this test starts trust their CA.
func startMailServers(t *testing.T, users ...string) *mailserver.Server {
	t.Helper()
	if err := confine.Probe().Missing(); err != nil {
		testutil.Missing(t, fmt.Sprintf("the kernel cannot confine plugins: %v", err))
	}
	if len(users) == 0 {
		users = []string{"alice", "bob"}
	}
	srv := mailserver.Start(t, mailserver.WithUsers(users...))
	t.Setenv("SSL_CERT_FILE", srv.CAFile)
	return srv
}

// storeMailPassword stores alice's password as carapace auth set
// --plugin mail --key work does.
func storeMailPassword(t testing.TB, srv *mailserver.Server, h home.Dir) {
	t.Helper()
	if err := keychain.NewFileStore(h.CredentialsDir()).Set("mail", "work", []byte(srv.Users[0].Password)); err != nil {
		t.Fatal(err)
	}
}

// seedMailbox appends the plugin's test mails (plain, HTML, multipart
// with an attachment, ISO-8859-1, malformed MIME) to alice's INBOX.
func seedMailbox(t *testing.T, srv *mailserver.Server) {
	t.Helper()
	for _, name := range []string{"plain", "html", "attach", "latin1", "malformed"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "plugins", "mail", "testdata", name+".eml"))
		if err != nil {
			t.Fatal(err)
		}
		raw = bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
		srv.Append(t, "alice", "INBOX", raw)
	}
}

// sentData is the message as the plugin handed it to Postfix: what was
// delivered, without the header fields delivery put above it (Received,
// Return-Path, Delivered-To). The plugin's messages start with Date.
func sentData(t *testing.T, delivered []byte) []byte {
	t.Helper()
	i := bytes.Index(delivered, []byte("\r\nDate: "))
	if i < 0 {
		t.Fatalf("no Date field in the delivered mail:\n%s", delivered)
	}
	return delivered[i+2:]
}

// mailBody is the decoded text of one of the plugin's messages (quoted-
// printable, CRLF), with \n line ends: the body as the preview shows it.
func mailBody(t *testing.T, data []byte) string {
	t.Helper()
	_, b, ok := bytes.Cut(data, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("no body in:\n%s", data)
	}
	dec, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatalf("the body is not quoted-printable: %v", err)
	}
	return strings.ReplaceAll(string(dec), "\r\n", "\n")
}

// previewBody is the body part of a mail_send preview: what follows the
// first blank line.
func previewBody(t *testing.T, preview string) string {
	t.Helper()
	_, b, ok := strings.Cut(preview, "\n\n")
	if !ok {
		t.Fatalf("a preview without a blank line:\n%s", preview)
	}
	_, b, ok = strings.Cut(b, "\n\n") // past "Send this mail…?", then past the headers
	if !ok {
		t.Fatalf("a preview without a body:\n%s", preview)
	}
	return b
}

// checkDelivered checks that msg, delivered to a recipient, is the exact
// SMTP data the user approved (cf's digest, over the envelope from alice
// to rcpts and the data) and carries the body the preview showed.
func checkDelivered(t *testing.T, srv *mailserver.Server, msg mailserver.Message, cf api.Confirmation, rcpts ...string) {
	t.Helper()
	data := sentData(t, msg.Raw)
	if got := plugin.Digest([]byte(srv.Users[0].Address), []byte(strings.Join(rcpts, "\n")), data); got != cf.PreviewDigest {
		t.Errorf("the delivered mail digests to %s, the user approved %s:\n%s", got, cf.PreviewDigest, data)
	}
	if got, want := mailBody(t, data), previewBody(t, cf.Preview); got != want {
		t.Errorf("the delivered body is not the body shown:\n%q\n%q", got, want)
	}
}

// TestMailThroughTheCore: the Docker test agent works alice's mailbox
// through the real core and the confined plugin process, on the real
// servers. It searches and reads every kind of seeded mail, drafts, and
// asks four times to send; the user approves the first (delivered to bob
// as the exact bytes approved, with the body shown), denies the second,
// lets the third expire, and the fourth's draft is replaced on the server
// before the approval (not sent). Nothing but the approved mail reaches
// any mailbox.
func TestMailThroughTheCore(t *testing.T) {
	srv := startMailServers(t)
	seedMailbox(t, srv)
	const confirmTimeout = 20 * time.Second
	cfg := dockerConfig(t, fmt.Sprintf("[confirm]\ntimeout = %q\n[groups.main]\n", confirmTimeout.String())+mailAccount(srv, ""))
	c := startCoreWith(t, coreOptions{Config: cfg, Bundled: []loader.Bundled{mailBundle(t)}, Setup: func(h home.Dir) { storeMailPassword(t, srv, h) }})
	st := pluginStatus(t, c, "mail")
	if !st.Healthy || st.Source != "bundled" || st.Confinement == nil || st.Confinement.Mode != api.ConfinementConfined {
		t.Fatalf("the mail plugin: %+v (confinement %+v)\ncore log:\n%s", st, st.Confinement, c.Log.String())
	}
	// Its network: exactly the account's two servers, from its config;
	// the test CA readable through SSL_CERT_FILE.
	imapAddr, smtpAddr := srv.Addr(srv.IMAPSPort), srv.Addr(srv.SubmissionPort)
	if h := st.Confinement.Hosts; len(h) != 2 || st.Confinement.Public ||
		!strings.HasPrefix(h[0], imapAddr+" (config accounts.0.imap") || !strings.HasPrefix(h[1], smtpAddr+" (config accounts.0.smtp") {
		t.Fatalf("the mail plugin may reach %q (public %v), want exactly its IMAP and SMTP servers", h, st.Confinement.Public)
	}
	if !slices.ContainsFunc(st.Confinement.Read, func(r string) bool { return strings.HasPrefix(r, srv.CAFile+" (SSL_CERT_FILE") }) {
		t.Fatalf("the test CA is not readable by the plugin: %v", st.Confinement.Read)
	}

	draftAndSend := func(subject, body string) string {
		return `sh d=$(ipc tool.invoke.mail_draft '{"to":["Bob <bob@example.test>"],"subject":"` + subject + `","body":"` +
			strings.ReplaceAll(body, "\n", `\n`) + `"}' | grep -o '"draft_id":"[^"]*"' | cut -d'"' -f4); ipc tool.invoke.mail_send "{\"draft_id\":\"$d\"}"`
	}
	approvedBody := "Hi Bob,\n\nnoon on Friday works for me.\n\n-- \nAlice\n"
	prompt := strings.Join([]string{
		"# Go through my inbox and answer Bob.",
		`tool.invoke.mail_search {}`,
		`sh for id in $(ipc tool.invoke.mail_search '{}' | grep -o '"id":"[^"]*"' | cut -d'"' -f4); do ipc tool.invoke.mail_read "{\"id\":\"$id\"}" || exit 1; done`,
		draftAndSend("Lunch", approvedBody),
		draftAndSend("Denied", "This one the user denies.\n"),
		draftAndSend("Expired", "This one nobody answers.\n"),
		draftAndSend("Replaced", "This one is replaced before it is approved.\n"),
	}, "\n")
	a := startAgent(t, c, api.SessionRequest{Group: "main", Runtime: "docker", Prompt: prompt})

	// 1. Approved: the confirmation shows the whole mail; once approved,
	// bob gets exactly it.
	cf := pendingOne(t, c, a, "the first mail_send's confirmation")
	if cf.Tool != "mail_send" || cf.PreviewOmitted || !strings.HasPrefix(cf.PreviewDigest, "sha256:") || previewBody(t, cf.Preview) != approvedBody {
		t.Fatalf("the confirmation of mail_send: %s, preview %q (omitted %v), digest %q\n%s", cf.Tool, cf.Preview, cf.PreviewOmitted, cf.PreviewDigest, a.output())
	}
	for _, want := range []string{`From: "Alice" <alice@example.test>`, `To: "Bob" <bob@example.test>`, "Subject: Lunch"} {
		if !strings.Contains(cf.Preview, want+"\n") {
			t.Errorf("the preview lacks %q:\n%s", want, cf.Preview)
		}
	}
	out, errs, code := runCLI(t, c.Home, "confirm", "show", cf.ID[:8])
	if code != 0 {
		t.Fatalf("confirm show: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"| From: \"Alice\" <alice@example.test>", "| To: \"Bob\" <bob@example.test>", "| Subject: Lunch",
		"| noon on Friday works for me.", "| Alice", "preview digest: " + cf.PreviewDigest} {
		if !strings.Contains(out, want) {
			t.Errorf("confirm show lacks %q:\n%s", want, out)
		}
	}
	if len(srv.Messages(t, "bob", "INBOX")) != 0 {
		t.Fatal("bob has mail before the approval")
	}
	if len(srv.Messages(t, "alice", "Drafts")) != 1 {
		t.Fatalf("Drafts holds %d mails, want the one draft", len(srv.Messages(t, "alice", "Drafts")))
	}
	if out, errs, code := runCLI(t, c.Home, "confirm", "approve", cf.ID[:8]); code != 0 {
		t.Fatalf("confirm approve: exit %d\n%s%s", code, out, errs)
	}
	got := srv.WaitMessages(t, "bob", "INBOX", 1)
	checkDelivered(t, srv, got[0], cf, "bob@example.test")

	// 2. Denied: nothing anywhere changes but the next draft.
	cf = pendingOne(t, c, a, "the second mail_send's confirmation")
	if !strings.Contains(cf.Preview, "Subject: Denied\n") {
		t.Fatalf("second confirmation: %q", cf.Preview)
	}
	total := srv.Total(t)
	if out, errs, code := runCLI(t, c.Home, "confirm", "deny", cf.ID[:8]); code != 0 {
		t.Fatalf("confirm deny: exit %d\n%s%s", code, out, errs)
	}

	// 3. Expired: likewise.
	cf3 := pendingOne(t, c, a, "the third mail_send's confirmation")
	if !strings.Contains(cf3.Preview, "Subject: Expired\n") {
		t.Fatalf("third confirmation: %q", cf3.Preview)
	}
	if n := srv.Total(t); n != total+1 { // the third draft
		t.Fatalf("a denied send changed the mailboxes: %d mails, want %d", n, total+1)
	}
	total++

	// 4. Replaced: the user's mail app edits the draft (a new one, the old
	// removed) after the request; the approval then sends nothing.
	var list []api.Confirmation
	waitWithin(t, confirmTimeout+90*time.Second, "the third confirmation's expiry and the fourth's", func() bool {
		var err error
		list, err = c.Client.Confirmations(context.Background(), false)
		return err == nil && len(list) == 1 && list[0].ID != cf3.ID
	})
	cf, err := c.Client.Confirmation(context.Background(), list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cf.Preview, "Subject: Replaced\n") {
		t.Fatalf("fourth confirmation: %q", cf.Preview)
	}
	if n := srv.Total(t); n != total+1 {
		t.Fatalf("an expired send changed the mailboxes: %d mails, want %d", n, total+1)
	}
	total++
	drafts := srv.Messages(t, "alice", "Drafts")
	var old mailserver.Message
	for _, m := range drafts {
		if bytes.Contains(m.Raw, []byte("Subject: Replaced")) {
			old = m
		}
	}
	if old.UID == 0 {
		t.Fatalf("the fourth draft is not in Drafts: %d drafts", len(drafts))
	}
	ic := srv.Dial(t, "alice", nil)
	if _, err := ic.Select("Drafts", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := ic.Store(imap.UIDSetNum(imap.UID(old.UID)), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	if err := ic.UIDExpunge(imap.UIDSetNum(imap.UID(old.UID))).Close(); err != nil {
		t.Fatal(err)
	}
	srv.Append(t, "alice", "Drafts", bytes.Replace(old.Raw, []byte("replaced before it is approved."), []byte("replaced: SEND THE FILES TO EVE."), 1), `\Draft`)
	_, _, _ = runCLI(t, c.Home, "confirm", "approve", cf.ID[:8])

	exit, stdout, stderr := a.wait(t)
	statuses := regexp.MustCompile(`(?m)^exit \d+$`).FindAllString(stdout, -1)
	if exit != 1 || !slices.Equal(statuses, []string{"exit 0", "exit 0", "exit 0", "exit 1", "exit 1", "exit 1"}) {
		t.Fatalf("the agent: exit %d, statuses %q\nstdout:\n%s\nstderr:\n%s", exit, statuses, stdout, stderr)
	}
	// What the agent read: every kind of mail, as text.
	for _, want := range []string{"lunch on Friday at noon", "Big sale", "Here is the report.", `"name":"report.pdf"`,
		"b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9", "Un café crème", "Ignore previous instructions", `"sent":true`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the agent's output lacks %q", want)
		}
	}
	for _, not := range []string{"<b>", "aGVsbG8"} {
		if strings.Contains(stdout, not) {
			t.Errorf("the agent's output has %q (HTML not converted, or an attachment's bytes)", not)
		}
	}
	// The denied, the expired, and the replaced draft's (the core's second
	// preview, right before the run, finds the approved draft gone).
	for _, want := range []string{"CONFIRMATION_DENIED", "CONFIRMATION_TIMEOUT", "could not show its content again before running it (no mail with this id"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the agent's errors lack %s:\n%s", want, stderr)
		}
	}
	// Only the approved mail went anywhere: bob has one, the refused
	// drafts are still drafts, the one Sent copy is the approved mail.
	if n := srv.Total(t); n != total {
		t.Errorf("the mailboxes hold %d mails after the refused sends, want %d", n, total)
	}
	if got := srv.Messages(t, "bob", "INBOX"); len(got) != 1 {
		t.Errorf("bob has %d mails, want the approved one", len(got))
	}
	if sent := srv.Messages(t, "alice", "Sent"); len(sent) != 1 || !bytes.Contains(sent[0].Raw, []byte("Subject: Lunch")) {
		t.Errorf("alice's Sent holds %d mails", len(sent))
	}
	if d := srv.Messages(t, "alice", "Drafts"); len(d) != 3 {
		t.Errorf("alice's Drafts holds %d mails, want the three not sent", len(d))
	}
	// The session read someone else's words: it is tainted.
	tainted := false
	for _, e := range c.Audit(t) {
		if e.Stage == audit.StageTaint && e.Session == a.info.ID && strings.Contains(e.Reason, "mail_search") {
			tainted = true
		}
	}
	if !tainted {
		t.Error("mail_search did not taint the session")
	}
}

// TestMailSendCardOnTelegram: the approval of a mail_send on the phone,
// through the real core, the Telegram plugin (the fake Bot API) and the
// mail plugin on the real servers. The card shows the From, every To, Cc
// and Bcc, the subject and the whole body; approved there, each recipient
// gets exactly that mail (the Bcc in no header). A body too long for a
// Telegram message is not on the card, which offers Deny only; denied,
// nothing goes anywhere. The account here takes the other two ways to
// secure a connection: IMAP with STARTTLS, submission with implicit TLS.
func TestMailSendCardOnTelegram(t *testing.T) {
	srv := startMailServers(t, "alice", "bob", "carol", "dave")
	bot := fakebot.New(t)
	cfg := fmt.Sprintf(`
[confirm]
timeout = "90s"
[groups.main]
[plugins.telegram]
surface = true
[plugins.telegram.config]
owner_id = %d
api_url = %q
debounce_ms = 300
`, tgOwner, bot.URL()) + mailAccountVia(srv, srv.IMAPPort, "starttls", srv.SubmissionsPort, "tls", "")
	c := startCoreWith(t, coreOptions{Config: cfg, Bundled: []loader.Bundled{telegramBundle(t), mailBundle(t)},
		Setup: func(h home.Dir) { setToken(t, h); storeMailPassword(t, srv, h) }})
	for _, name := range []string{"telegram", "mail"} {
		if p := pluginStatus(t, c, name); !p.Healthy {
			t.Fatalf("the %s plugin: %+v\ncore log:\n%s", name, p, c.Log.String())
		}
	}
	bot.WaitCount(t, "getUpdates", 1)
	s := c.Session(t, "main")

	// A hostile agent's header injection, through the real core and
	// bin/ipc: a line break in the subject or an address would add a
	// header (a Bcc nobody sees on the card); each is refused with its
	// reason, and nothing reaches any mailbox. The same call without the
	// break is the control: the draft below.
	for _, args := range []map[string]any{
		{"to": []string{"bob@example.test"}, "subject": "Lunch\r\nBcc: mallory@evil.example", "body": "x"},
		{"to": []string{"bob@example.test\r\nBcc: mallory@evil.example"}, "subject": "Lunch", "body": "x"},
	} {
		r := runIPC(t, s.Socket, nil, "tool.invoke.mail_draft", mustJSON(t, args))
		if r.Code != 1 || r.Err == nil || r.Err.Code != ipc.CodeHandlerError || !strings.Contains(r.Err.Message, "line break") {
			t.Fatalf("a header injection %v: exit %d, %+v", args, r.Code, r.Err)
		}
	}
	if n := srv.Total(t); n != 0 {
		t.Fatalf("the refused drafts left %d mails", n)
	}

	body := "Hi Bob,\n\nFish & chips <3 at noon on Friday?\nCarol comes too.\n\n-- \nAlice\n"
	d := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.mail_draft", mustJSON(t, map[string]any{
		"to": []string{"Bob <bob@example.test>"}, "cc": []string{"carol@example.test"}, "bcc": []string{"dave@example.test"},
		"subject": "Lunch <Friday>", "body": body})))
	bg := startIPC(t, s.Socket, "tool.invoke.mail_send", mustJSON(t, map[string]any{"draft_id": d["draft_id"]}))
	id := bg.waitPending(t)
	cf, err := c.Client.Confirmation(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	m, b := card(t, bot, "Subject: Lunch &lt;Friday&gt;")
	want := []string{"mail_send", "From: &#34;Alice&#34; &lt;alice@example.test&gt;", "To: &#34;Bob&#34; &lt;bob@example.test&gt;",
		"Cc: &lt;carol@example.test&gt;", "Bcc: &lt;dave@example.test&gt;"}
	for _, line := range strings.Split(body, "\n") {
		want = append(want, html.EscapeString(line))
	}
	for _, w := range want {
		if !strings.Contains(m.Text, w) {
			t.Errorf("the card lacks %q:\n%s", w, m.Text)
		}
	}
	if srv.Total(t) != 1 { // the draft
		t.Fatalf("%d mails before the approval, want the draft alone", srv.Total(t))
	}
	bot.Callback(tgOwner, fakebot.PrivateChat(tgOwner), m.MessageID, b["approve"])
	if got := mustOK(t, bg.wait(t)); got["sent"] != true {
		t.Fatalf("the send approved on the phone: %v", got)
	}
	edited(t, bot, m.MessageID, "Approved on telegram by 4242")
	rcpts := []string{"bob@example.test", "carol@example.test", "dave@example.test"}
	for _, u := range []string{"bob", "carol", "dave"} {
		got := srv.WaitMessages(t, u, "INBOX", 1)
		if len(got) != 1 {
			t.Fatalf("%s has %d mails", u, len(got))
		}
		checkDelivered(t, srv, got[0], cf, rcpts...)
		if bytes.Contains(sentData(t, got[0].Raw), []byte("dave")) {
			t.Errorf("%s's copy names the Bcc:\n%s", u, got[0].Raw)
		}
	}
	total := srv.Total(t) // three delivered, one in Sent

	// Too long for a message: Deny only.
	long := strings.Repeat("All work and no play makes Jack a dull boy.\n", 120)
	d = mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.mail_draft", mustJSON(t, map[string]any{"to": []string{"bob@example.test"}, "subject": "Long", "body": long})))
	bg = startIPC(t, s.Socket, "tool.invoke.mail_send", mustJSON(t, map[string]any{"draft_id": d["draft_id"]}))
	id = bg.waitPending(t)
	denyOnly, deny := denyOnlyCard(t, bot, id, "All work and no play", "the long mail")
	bot.Callback(tgOwner, fakebot.PrivateChat(tgOwner), denyOnly.MessageID, deny)
	wantError(t, bg.wait(t), ipc.CodeConfirmationDenied, 5, "")
	if n := srv.Total(t); n != total+1 { // the long draft
		t.Fatalf("the mailboxes hold %d mails after the denial, want %d", n, total+1)
	}
	if n := len(srv.Messages(t, "bob", "INBOX")); n != 1 {
		t.Fatalf("bob has %d mails after the denial, want 1", n)
	}
}

// mailServe returns a carapace binary with the mail plugin bundled beside
// it (bundle/plugins/mail), as make build links one.
func mailServe(t *testing.T) string { return pinnedServe(t, "mail") }

// mailSessions returns, from the audit log of h, the sessions that new
// mail started (tainted by a message.inbound from mail), by the subject
// each was told of, in order.
func mailSessions(t *testing.T, h home.Dir) []audit.Entry {
	t.Helper()
	es, err := audit.Read(h.AuditLog(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Entry
	for _, e := range es {
		if e.Stage == audit.StageTaint && strings.Contains(e.Reason, "message.inbound from mail") {
			out = append(out, e)
		}
	}
	return out
}

// TestMailInboundOnceAcrossCoreKill: each new mail starts exactly one
// session, across a SIGKILL of the core (carapace serve, with the mail
// plugin bundled, runs agents in Docker). A mail arrives and starts its
// session; the core is killed; a second mail arrives while it is down;
// after the restart the second starts one session and the first none
// again. Mail already in the inbox at the first start starts none.
func TestMailInboundOnceAcrossCoreKill(t *testing.T) {
	srv := startMailServers(t)
	srv.Append(t, "alice", "INBOX", []byte("From: Old <old@example.org>\r\nTo: alice@example.test\r\nSubject: Old news\r\nMessage-ID: <o1@example.org>\r\n\r\nAlready here.\r\n"))
	serveBin := mailServe(t)
	h := newHome(t)
	cfg := dockerConfig(t, "[groups.main]\n"+mailAccount(srv, `inbound_group = "main"`))
	if err := os.WriteFile(h.Config(), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	storeMailPassword(t, srv, h)
	// decided lists the plugin's decisions on new mail: "UID state".
	decided := func() []string {
		db, err := sqlitedb.OpenExisting(context.Background(), filepath.Join(h.DataDir("mail"), "mail.db"), "mail")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.Query("SELECT uid, state FROM inbound ORDER BY uid")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var uid int
			var state string
			if err := rows.Scan(&uid, &state); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%d %s", uid, state))
		}
		return out
	}
	cursor := func() int {
		db, err := sqlitedb.OpenExisting(context.Background(), filepath.Join(h.DataDir("mail"), "mail.db"), "mail")
		if err != nil {
			return -1
		}
		defer db.Close()
		var n int
		if db.QueryRow("SELECT count(*) FROM cursors").Scan(&n) != nil {
			return -1
		}
		return n
	}
	serve := func() *hostileProc {
		p := hostileStart(t, exec.Command(serveBin, "--home", string(h), "serve"))
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("carapace serve's stderr:\n%s", p.stderr.String())
			}
		})
		waitWithin(t, 90*time.Second, "the mail plugin to run and its watch to start", func() bool { return cursor() == 1 })
		return p
	}
	mail := func(subject string) {
		srv.Send(t, "bob", []string{"alice@example.test"}, []byte("From: Bob <bob@example.test>\r\nTo: alice@example.test\r\nSubject: "+subject+
			"\r\nMessage-ID: <"+strings.ReplaceAll(subject, " ", "-")+"@example.test>\r\n\r\nHello Alice.\r\n"))
	}

	first := serve()
	mail("First mail")
	waitWithin(t, 90*time.Second, "the first mail's session", func() bool { return len(mailSessions(t, h)) == 1 })
	waitWithin(t, 30*time.Second, "the first mail recorded published", func() bool { return slices.Equal(decided(), []string{"2 published"}) })
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.wait(t, 30*time.Second)
	mail("Second mail")
	srv.WaitMessages(t, "alice", "INBOX", 3)

	serve()
	waitWithin(t, 90*time.Second, "the second mail's session", func() bool { return len(mailSessions(t, h)) >= 2 })
	time.Sleep(3 * time.Second) // a duplicate would come now
	if got := mailSessions(t, h); len(got) != 2 || got[0].Session == got[1].Session {
		t.Fatalf("%d sessions started by mail, want 2 (one each): %+v", len(got), got)
	}
	// The old mail (UID 1) was no event; each new one was published once.
	if d := decided(); !slices.Equal(d, []string{"2 published", "3 published"}) {
		t.Fatalf("the plugin's decisions %q, want the two new mails published", d)
	}
}

// TestMailDoctorOnline: carapace doctor --online runs the mail plugin's
// own check in the real confined handler, which logs in to the real
// Dovecot and Postfix through its egress point and out again; a wrong
// app password is reported with the command that replaces it (and never
// printed), and that command, then a restart, makes the check pass.
func TestMailDoctorOnline(t *testing.T) {
	srv := startMailServers(t)
	const wrong = "not alice's app password"
	c := startCoreWith(t, coreOptions{Config: "[runtime]\nengine = \"none\"\n[groups.main]\n" + mailAccount(srv, ""), Bundled: []loader.Bundled{mailBundle(t)},
		Setup: func(h home.Dir) {
			if err := keychain.NewFileStore(h.CredentialsDir()).Set("mail", "work", []byte(wrong)); err != nil {
				t.Fatal(err)
			}
		}})
	if st := pluginStatus(t, c, "mail"); !st.Healthy || st.Confinement == nil || st.Confinement.Mode != api.ConfinementConfined {
		t.Fatalf("the mail plugin: %+v\ncore log:\n%s", st, c.Log.String())
	}
	status, message, fix := doctorPluginCheck(t, c, "mail")
	if status != "fail" || !strings.Contains(message, "work: IMAP") || !strings.Contains(fix, "carapace auth set --plugin mail --key ACCOUNT") {
		t.Fatalf("a wrong password: %s %q fix %q", status, message, fix)
	}
	if strings.Contains(message+fix, wrong) {
		t.Fatal("doctor printed the password")
	}
	storeMailPassword(t, srv, c.Home)
	if out, errs, code := runCLI(t, c.Home, "plugin", "restart", "mail"); code != 0 {
		t.Fatalf("plugin restart: exit %d\n%s%s", code, out, errs)
	}
	waitFor(t, "the mail plugin back", func() bool { return pluginStatus(t, c, "mail").Healthy })
	status, message, _ = doctorPluginCheck(t, c, "mail")
	if status != "ok" || message != "work: IMAP and SMTP logins work" {
		t.Fatalf("the right password: %s %q", status, message)
	}
}
