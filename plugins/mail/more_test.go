package mail

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

func TestBeginSend(t *testing.T) {
	st, err := openStore(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	ctx := context.Background()
	day1 := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	day2 := day1.Add(2 * time.Minute)
	steps := []struct {
		name   string
		group  string
		digest string
		at     time.Time
		end    string // how the send ends, if it starts
		want   string // the refusal, "" if it starts
	}{
		{"first", "main", "d1", day1, "sent", ""},
		{"the same mail again", "main", "d1", day1, "", CodeAlreadySent},
		{"a failed send", "main", "d2", day1, "failed", ""},
		{"the failed one again: it did not count", "main", "d2", day1, "doubt", ""},
		{"the one in doubt again", "main", "d2", day1, "", CodeAlreadySent},
		{"the cap (2) is used: sent and doubt count", "main", "d3", day1, "", CodeCapReached},
		{"another group has its own", "other", "d3", day1, "sent", ""},
		{"the next day (UTC)", "main", "d4", day2, "sent", ""},
	}
	for _, s := range steps {
		id, err := st.beginSend(ctx, s.group, "work", s.digest, 1, 2, s.at)
		if got := code(err); got != s.want {
			t.Fatalf("%s: %v, want %q", s.name, err, s.want)
		}
		if err == nil {
			if err := st.endSend(ctx, id, s.end); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A send in progress when the plugin died is in doubt after the restart.
	id, err := st.beginSend(ctx, "main", "work", "d5", 1, 9, day2)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.recoverPublishing(ctx, day2); err != nil {
		t.Fatal(err)
	}
	var state string
	if err := st.db.QueryRow("SELECT state FROM sends WHERE id = ?", id).Scan(&state); err != nil || state != "doubt" {
		t.Fatalf("state %q, %v; want doubt", state, err)
	}
}

func TestWatchWaitsWhileCoreIsPaused(t *testing.T) {
	f := newServers(t)
	f.svc = &plugintest.Services{Plugin: Name, Channel: true, Surface: true, Credentials: plugintest.NewFakeCredentials(map[string]string{"work": testPass})}
	f.start(f.config(func(acct, _ map[string]any) { acct["inbound_group"] = "main" }))
	waitFor(t, "the baseline", func() bool { _, _, ok, _ := f.h.st.cursor(context.Background(), "work"); return ok })
	if err := f.svc.SetPaused(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	paused := func() int {
		n := 0
		for _, c := range f.svc.Calls() {
			if c == "paused" { // the protocol's name of Services.Paused
				n++
			}
		}
		return n
	}
	before := paused()
	f.seed("INBOX", alice(1))
	// The watch looked (asked whether the core is paused) twice: the mail
	// waits, undecided.
	waitFor(t, "the watch to look twice", func() bool { return paused() >= before+2 })
	if n := len(f.svc.Events()); n != 0 {
		t.Fatalf("%d events while the core is paused", n)
	}
	if st, _ := f.h.st.inboundState(context.Background(), "work", mustUIDValidity(t, f), 2); st != "" {
		t.Fatalf("the mail was decided (%s) while the core is paused", st)
	}
	if err := f.svc.SetPaused(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the event after the resume", func() bool { return len(f.svc.Events()) == 1 })
}

func mustUIDValidity(t *testing.T, f *fixture) uint32 {
	v, _, _, err := f.h.st.cursor(context.Background(), "work")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerify(t *testing.T) {
	f := newServers(t)
	f.start(f.config(func(acct, _ map[string]any) { acct["smtp_username"] = "other@example.com" }))
	r, err := f.h.Verify(ctx60(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.OK || !strings.Contains(r.Message, "work: SMTP: ") || strings.Contains(r.Message, "IMAP:") {
		t.Fatalf("verify with a wrong SMTP login: %+v", r)
	}
	f.dir = t.TempDir()
	f.start(nil)
	r, err = f.h.Verify(ctx60(t))
	if err != nil || !r.OK || r.Message != "work: IMAP and SMTP logins work" {
		t.Fatalf("verify: %+v, %v", r, err)
	}
	if n := len(f.smtp.sent()); n != 0 {
		t.Fatalf("verify sent %d mails", n)
	}
	f.svc.Credentials.Set("work", "wrong")
	r, _ = f.h.Verify(ctx60(t))
	if r.OK || !strings.Contains(r.Message, "IMAP: the IMAP server of account work refused the login") || strings.Contains(r.Message, "wrong") {
		t.Fatalf("verify with a wrong password: %+v", r)
	}
}

func TestWatchAfterTheInboxIsRebuilt(t *testing.T) {
	f := newServers(t)
	f.start(f.config(func(acct, _ map[string]any) { acct["inbound_group"] = "main" }))
	waitFor(t, "the baseline", func() bool { _, _, ok, _ := f.h.st.cursor(context.Background(), "work"); return ok })
	v1 := mustUIDValidity(t, f)
	f.seed("INBOX", alice(1))
	waitFor(t, "the first event", func() bool { return len(f.svc.Events()) == 1 })
	// The server rebuilds the inbox (new UIDVALIDITY), with old mail in
	// it: the watch starts again after it, publishing none of it. (The
	// new inbox is filled aside and put in place at once.)
	if err := f.user.Create("Rebuilt", nil); err != nil {
		t.Fatal(err)
	}
	f.seed("Rebuilt", alice(2))
	f.seed("Rebuilt", alice(3))
	if err := f.user.Delete("INBOX"); err != nil {
		t.Fatal(err)
	}
	if err := f.user.Rename("Rebuilt", "INBOX", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new baseline", func() bool {
		v, last, _, _ := f.h.st.cursor(context.Background(), "work")
		return v != v1 && last == 2
	})
	f.seed("INBOX", alice(4))
	waitFor(t, "the next event", func() bool { return len(f.svc.Events()) == 2 })
	in, _ := inboundOf(t, f.svc.Events()[1])
	if !strings.Contains(in.Text, "note 4") {
		t.Errorf("the second event is not mail 4:\n%s", in.Text)
	}
}

func TestDoctorHelpers(t *testing.T) {
	f := newServers(t)
	// As config.toml decodes it: a list of tables, integers as int64.
	cfg := map[string]any{"accounts": []map[string]any{{"name": "work", "imap": f.imapAddr, "imap_security": "plain", "smtp": f.smtpAddr,
		"smtp_security": "plain", "username": testUser, "from": testUser}},
		"groups": map[string]any{"main": map[string]any{"accounts": []any{"work"}, "daily_send_cap": int64(4)}}}
	names, err := AccountNames(cfg)
	if err != nil || len(names) != 1 || names[0] != "work" {
		t.Fatalf("AccountNames: %v, %v", names, err)
	}
	if _, err := AccountNames(map[string]any{"accounts": []any{map[string]any{"name": "x"}}}); err == nil || !strings.Contains(err.Error(), "missing imap") {
		t.Fatalf("AccountNames of a bad config: %v", err)
	}
	var d net.Dialer
	for _, tc := range []struct {
		pass string
		ok   bool
		msg  string
	}{
		{testPass, true, "work: IMAP and SMTP logins work"},
		{"wrong", false, "work: IMAP: the IMAP server of account work refused the login"},
		{"", false, "has no password"},
	} {
		r, err := verifyAccounts(ctx60(t), cfg, func(string) (string, error) {
			if tc.pass == "" {
				return "", plugin.ErrNoCredential
			}
			return tc.pass, nil
		}, d.DialContext)
		if err != nil || r.OK != tc.ok || !strings.Contains(r.Message, tc.msg) || (tc.pass != "" && strings.Contains(r.Message, tc.pass)) {
			t.Errorf("Verify with %q: %+v, %v", tc.pass, r, err)
		}
	}
}

// verifyAccounts runs the handler's Verify (what `carapace doctor --online`
// asks of the running plugin) on cfg as config.toml decodes it, with
// password giving each account's password and dial reaching the servers.
func verifyAccounts(ctx context.Context, cfg map[string]any, password func(account string) (string, error), dial DialFunc) (*plugin.VerifyResult, error) {
	n, err := normalise(cfg)
	if err != nil {
		return nil, err
	}
	c, err := parseConfig(n)
	if err != nil {
		return nil, err
	}
	h := New(Options{Dial: dial, Logger: slog.New(slog.DiscardHandler)})
	h.cfg, h.services = c, passwords(password)
	return h.Verify(ctx)
}

// passwords is the one service Verify uses: ReadCredential.
type passwords func(account string) (string, error)

func (p passwords) ReadCredential(_ context.Context, key string) (string, error) { return p(key) }
func (passwords) GetAuditLog(context.Context, plugin.AuditFilter) ([]plugin.AuditEntry, error) {
	return nil, plugin.ErrNoRequest
}
func (passwords) GetToolCatalog(context.Context) ([]plugin.ToolInfo, error) { return nil, nil }
func (passwords) GetSessionInfo(context.Context) (plugin.SessionInfo, error) {
	return plugin.SessionInfo{}, plugin.ErrNoRequest
}
func (passwords) PublishEvent(context.Context, *plugin.Event) error { return plugin.ErrNotChannel }
func (passwords) AuditDropped(context.Context, string) error        { return plugin.ErrNotChannel }
func (passwords) ReportHealth(context.Context, bool, string) error  { return nil }
func (passwords) Paused(context.Context) (bool, error)              { return false, plugin.ErrNotChannel }
func (passwords) Decide(context.Context, plugin.Decision) error     { return plugin.ErrNotSurface }
func (passwords) CoreStatus(context.Context) (plugin.CoreStatus, error) {
	return plugin.CoreStatus{}, plugin.ErrNotSurface
}
func (passwords) SetPaused(context.Context, bool) error     { return plugin.ErrNotSurface }
func (passwords) StopSession(context.Context, string) error { return plugin.ErrNotSurface }
