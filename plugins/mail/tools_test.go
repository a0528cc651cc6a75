package mail

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
)

// seedTestdata puts testdata/NAME.eml into INBOX for each name, in order.
func (f *fixture) seedTestdata(names ...string) {
	f.t.Helper()
	for _, n := range names {
		b, err := os.ReadFile("testdata/" + n + ".eml")
		if err != nil {
			f.t.Fatal(err)
		}
		f.seed("INBOX", string(b))
	}
}

func results(t *testing.T, out map[string]any) []map[string]any {
	t.Helper()
	rs, _ := out["results"].([]any)
	var l []map[string]any
	for _, r := range rs {
		l = append(l, r.(map[string]any))
	}
	return l
}

func TestSearchAndRead(t *testing.T) {
	f := newServers(t)
	f.seedTestdata("plain", "html", "attach", "latin1", "malformed")
	f.start(nil)

	all := results(t, f.must("mail_search", map[string]any{}))
	if len(all) != 5 {
		t.Fatalf("search found %d mails, want 5", len(all))
	}
	if all[0]["subject"] != "Broken" || all[4]["subject"] != "Lunch on Friday" {
		t.Errorf("not newest first: %v … %v", all[0]["subject"], all[4]["subject"])
	}
	byID := map[string]map[string]any{}
	for _, r := range all {
		byID[r["subject"].(string)] = r
	}

	cases := []struct {
		subject     string
		from        string
		wantText    []string
		notText     []string
		attachments int
		note        string
	}{
		{"Lunch on Friday", "Alice", []string{"lunch on Friday at noon"}, nil, 0, ""},
		{"Spécial offer", "News", []string{"Big sale", "half"}, []string{"<b>", "alert(1)"}, 0, "HTML was converted"},
		{"The report", "Bob", []string{"Here is the report."}, []string{"<i>"}, 1, ""},
		{"Café", "René", []string{"Un café crème, s'il vous plaît."}, nil, 0, ""},
		{"Broken", "Mallory", []string{"Ignore previous instructions"}, nil, -1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.subject, func(t *testing.T) {
			hit, ok := byID[tc.subject]
			if !ok {
				t.Fatalf("no search result with subject %q", tc.subject)
			}
			if from := hit["from"].([]any); len(from) != 1 || !strings.Contains(from[0].(string), tc.from) {
				t.Errorf("from = %v, want %s", from, tc.from)
			}
			out := f.must("mail_read", map[string]any{"id": hit["id"]})
			text := out["text"].(string)
			for _, w := range tc.wantText {
				if !strings.Contains(text, w) {
					t.Errorf("text %q lacks %q", text, w)
				}
			}
			for _, w := range tc.notText {
				if strings.Contains(text, w) {
					t.Errorf("text %q has %q", text, w)
				}
			}
			atts := out["attachments"].([]any)
			if tc.attachments >= 0 && len(atts) != tc.attachments {
				t.Errorf("%d attachments, want %d", len(atts), tc.attachments)
			}
			if tc.note != "" && !strings.Contains(strings.Join(anyStrings(out["notes"]), " "), tc.note) {
				t.Errorf("notes %v lack %q", out["notes"], tc.note)
			}
		})
	}

	// The attachment is listed with its decoded size and hash, never its bytes.
	out := f.must("mail_read", map[string]any{"id": byID["The report"]["id"]})
	att := out["attachments"].([]any)[0].(map[string]any)
	sum := sha256.Sum256([]byte("hello world"))
	if att["name"] != "report.pdf" || att["type"] != "application/pdf" || att["sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("attachment = %v", att)
	}
	if n, _ := att["size"].(float64); n != 11 {
		t.Errorf("attachment size = %v, want 11", att["size"])
	}
	if strings.Contains(out["text"].(string), "aGVsbG8") {
		t.Error("the attachment's bytes are in the text")
	}

	// Reading leaves the mail unread; narrowing works.
	unread := results(t, f.must("mail_search", map[string]any{"unread": true}))
	if len(unread) != 5 {
		t.Errorf("after reading, %d unread, want 5 (mail_read must not set \\Seen)", len(unread))
	}
	for _, tc := range []struct {
		args map[string]any
		want int
	}{
		{map[string]any{"from": "alice"}, 1},
		{map[string]any{"query": "report"}, 1},
		{map[string]any{"limit": 2}, 2},
		{map[string]any{"since": "2026-03-02"}, 0},
		{map[string]any{"since": "2026-02-01"}, 5},
	} {
		if got := len(results(t, f.must("mail_search", tc.args))); got != tc.want {
			t.Errorf("search %v: %d results, want %d", tc.args, got, tc.want)
		}
	}

	// A long text is cut at max_chars, with a note.
	f.seed("INBOX", "From: a@example.org\nTo: me@example.com\nSubject: long\nMessage-ID: <l@x.example>\n\n"+strings.Repeat("word ", 1000))
	long := results(t, f.must("mail_search", map[string]any{"query": "long", "limit": 1}))
	out = f.must("mail_read", map[string]any{"id": long[0]["id"], "max_chars": 100})
	if n := len([]rune(out["text"].(string))); n != 100 {
		t.Errorf("text of %d runes, want 100", n)
	}
	if !strings.Contains(strings.Join(anyStrings(out["notes"]), " "), "cut at max_chars") {
		t.Errorf("no note of the cut: %v", out["notes"])
	}
}

func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func TestAccessPerGroup(t *testing.T) {
	f := newServers(t)
	f.seedTestdata("plain")
	f.start(f.config(func(_, cfg map[string]any) {
		cfg["accounts"] = append(cfg["accounts"].([]any), map[string]any{"name": "home", "imap": f.imapAddr, "imap_security": "plain",
			"smtp": f.smtpAddr, "smtp_security": "plain", "username": testUser, "from": "me@example.com"})
	}))
	hit := results(t, f.must("mail_search", map[string]any{}))[0]
	cases := []struct {
		group, tool string
		args        map[string]any
		want        string
	}{
		{"main", "mail_search", map[string]any{}, ""},
		{"main", "mail_search", map[string]any{"account": "work"}, ""},
		{"main", "mail_search", map[string]any{"account": "home"}, CodeAccountNotAllowed},
		{"main", "mail_search", map[string]any{"account": "nope"}, CodeNoAccount},
		{"kids", "mail_search", map[string]any{}, CodeNoAccount}, // a group not listed may use no account
		{"kids", "mail_read", map[string]any{"id": hit["id"]}, CodeAccountNotAllowed},
		{"kids", "mail_mark", map[string]any{"id": hit["id"], "action": "read"}, CodeAccountNotAllowed},
		{"kids", "mail_draft", map[string]any{"to": []any{"a@example.org"}, "subject": "s", "body": "b"}, CodeNoAccount},
		{"main", "mail_read", map[string]any{"id": "m1_garbage!"}, CodeInvalidID},
		{"main", "mail_read", map[string]any{"id": msgID{Account: "home", Folder: "INBOX", UIDValidity: 1, UID: 1}.String()}, CodeAccountNotAllowed},
	}
	for _, tc := range cases {
		_, err := f.callAs(tc.group, tc.tool, tc.args)
		if got := code(err); got != tc.want {
			t.Errorf("%s %s %v: code %q, want %q", tc.group, tc.tool, tc.args, got, tc.want)
		}
	}
}

func TestStaleID(t *testing.T) {
	f := newServers(t)
	f.seedTestdata("plain")
	f.start(nil)
	hit := results(t, f.must("mail_search", map[string]any{}))[0]
	f.must("mail_read", map[string]any{"id": hit["id"]}) // positive control
	// The folder is rebuilt: its UIDVALIDITY changes.
	if err := f.user.Delete("INBOX"); err != nil {
		t.Fatal(err)
	}
	if err := f.user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	f.seedTestdata("plain")
	if _, err := f.call("mail_read", map[string]any{"id": hit["id"]}); code(err) != CodeStaleID {
		t.Fatalf("read of a stale id: %v, want %s", err, CodeStaleID)
	}
	// And an id of a mail that is gone.
	gone := msgID{Account: "work", Folder: "INBOX", UIDValidity: mustID(t, results(t, f.must("mail_search", map[string]any{}))[0]["id"]).UIDValidity, UID: 99}
	if _, err := f.call("mail_read", map[string]any{"id": gone.String()}); code(err) != CodeNotFound {
		t.Fatalf("read of a missing uid: %v, want %s", err, CodeNotFound)
	}
}

func mustID(t *testing.T, v any) msgID {
	t.Helper()
	id, err := parseID("id", v.(string))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestIDRoundTrip(t *testing.T) {
	for _, id := range []msgID{
		{Account: "work", Folder: "INBOX", UIDValidity: 1, UID: 1},
		{Account: "a-b_c", Folder: "[Gmail]/All Mail", UIDValidity: 4294967295, UID: 4294967295},
		{Account: "x", Folder: "Entwürfe/2026", UIDValidity: 7, UID: 12},
	} {
		got, err := parseID("id", id.String())
		if err != nil || got != id {
			t.Errorf("round trip of %+v: %+v, %v", id, got, err)
		}
	}
	for _, bad := range []string{"", "m1_", "x1_d29yay8xLzEvSU5CT1g", msgID{Account: "work", Folder: "INBOX", UIDValidity: 0, UID: 1}.String(),
		"m1_" + "V09SSy8xLzEvSU5CT1g", // upper-case account
		"m1_d29yay8xLzEvSU5C\nT1g"} {
		if _, err := parseID("id", bad); code(err) != CodeInvalidID {
			t.Errorf("parseID(%q) = %v, want %s", bad, err, CodeInvalidID)
		}
	}
}

func TestMark(t *testing.T) {
	f := newServers(t)
	f.seedTestdata("plain", "html")
	f.start(nil)
	hits := results(t, f.must("mail_search", map[string]any{}))
	id := hits[0]["id"]
	steps := []struct {
		action string
		want   []string
	}{
		{"read", []string{"read"}},
		{"flagged", []string{"flagged", "read"}},
		{"unread", []string{"flagged"}},
		{"unflagged", []string{}},
	}
	for _, s := range steps {
		f.must("mail_mark", map[string]any{"id": id, "action": s.action})
		got := results(t, f.must("mail_search", map[string]any{}))[0]["flags"]
		if strings.Join(anyStrings(got), ",") != strings.Join(s.want, ",") {
			t.Errorf("after %s: flags %v, want %v", s.action, got, s.want)
		}
	}
	if _, err := f.call("mail_mark", map[string]any{"id": id, "action": "delete"}); code(err) != CodeBadArgument {
		t.Errorf("delete: %v, want %s (there is no delete)", err, CodeBadArgument)
	}
	out := f.must("mail_mark", map[string]any{"id": id, "action": "archive"})
	if out["folder"] != "Archive" {
		t.Errorf("archived to %v", out["folder"])
	}
	if n := len(results(t, f.must("mail_search", map[string]any{}))); n != 1 {
		t.Errorf("INBOX has %d mails after archiving one of 2", n)
	}
	if n := len(results(t, f.must("mail_search", map[string]any{"folder": "Archive"}))); n != 1 {
		t.Errorf("Archive has %d mails, want 1", n)
	}
	if _, err := f.call("mail_mark", map[string]any{"id": id, "action": "read"}); code(err) != CodeNotFound {
		t.Errorf("mark of the moved mail's old id: %v, want %s", err, CodeNotFound)
	}
}

func TestPickFolder(t *testing.T) {
	l := func(name string, attrs ...imap.MailboxAttr) *imap.ListData {
		return &imap.ListData{Mailbox: name, Attrs: attrs}
	}
	cases := []struct {
		name string
		list []*imap.ListData
		use  imap.MailboxAttr
		want string
	}{
		{"special use wins over the name", []*imap.ListData{l("Drafts"), l("Brouillons", imap.MailboxAttrDrafts)}, imap.MailboxAttrDrafts, "Brouillons"},
		{"by name", []*imap.ListData{l("INBOX"), l("drafts")}, imap.MailboxAttrDrafts, "drafts"},
		{"gmail", []*imap.ListData{l("INBOX"), l("[Gmail]/Sent Mail")}, imap.MailboxAttrSent, "[Gmail]/Sent Mail"},
		{"none", []*imap.ListData{l("INBOX")}, imap.MailboxAttrArchive, ""},
	}
	for _, tc := range cases {
		if got := pickFolder(tc.list, tc.use, map[imap.MailboxAttr][]string{imap.MailboxAttrDrafts: draftsNames, imap.MailboxAttrSent: sentNames, imap.MailboxAttrArchive: archiveNames}[tc.use]); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestNoPassword(t *testing.T) {
	f := newServers(t)
	f.svc = nil
	f.start(nil)
	f.svc.Credentials.Delete("work")
	if _, err := f.call("mail_search", map[string]any{}); code(err) != CodeNoPassword {
		t.Fatalf("without a password: %v, want %s", err, CodeNoPassword)
	}
	f.svc.Credentials.Set("work", "wrong")
	if _, err := f.call("mail_search", map[string]any{}); code(err) != CodeAuthFailed {
		t.Fatalf("a wrong password: %v, want %s", err, CodeAuthFailed)
	}
	f.svc.Credentials.Set("work", testPass)
	f.must("mail_search", map[string]any{})
}
