package mail

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// draftArgs are a valid mail_draft call.
func draftArgs() map[string]any {
	return map[string]any{"to": []any{"Alice <alice@example.org>"}, "cc": []any{"carol@example.org"}, "bcc": []any{"dave@example.org"},
		"subject": "Friday", "body": "Hello Alice,\n\nyes, noon works.\n" + strings.Repeat("A line of the body that goes on. ", 40) + "\n\n-- \nMe\n"}
}

func ctx60(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPreviewThenSend(t *testing.T) {
	f := newServers(t)
	f.start(nil)
	args := draftArgs()
	id := f.must("mail_draft", args)["draft_id"].(string)

	text, digest, err := f.h.previewSend(ctx60(t), "main", id)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`From: "Me" <me@example.com>`, `To: "Alice" <alice@example.org>`, "Cc: <carol@example.org>", "Bcc: <dave@example.org>",
		"Subject: Friday", args["body"].(string)} {
		if !strings.Contains(text, want) {
			t.Errorf("preview lacks %q:\n%s", want, text)
		}
	}
	if len(f.smtp.sent()) != 0 {
		t.Fatal("a preview sent mail")
	}
	out, err := f.sendAs("main", id, digest)
	if err != nil {
		t.Fatal(err)
	}
	if out["sent"] != true || out["notes"] != nil || out["sent_today"] != 1 || out["daily_send_cap"] != 3 {
		t.Errorf("send: %v", out)
	}
	sent := f.smtp.sent()
	if len(sent) != 1 {
		t.Fatalf("%d mails sent, want 1", len(sent))
	}
	m := sent[0]
	if m.From != "me@example.com" || strings.Join(m.To, ",") != "alice@example.org,carol@example.org,dave@example.org" {
		t.Errorf("envelope %s → %v", m.From, m.To)
	}
	// What the server got is exactly what was approved.
	got := (&wire{From: m.From, To: m.To, Data: m.Data}).digest()
	if got != digest {
		t.Errorf("the digest of what the server got (%s) is not the approved one (%s)", got, digest)
	}
	data := string(m.Data)
	if strings.Contains(strings.ToLower(data), "bcc:") || strings.Contains(data, "dave@") {
		t.Errorf("the Bcc shows in the data sent:\n%s", data)
	}
	back, err := parseDraft(m.Data, DefaultMaxBody)
	if err != nil {
		t.Fatal(err)
	}
	if back.Body != args["body"] {
		t.Errorf("body sent differs from the body drafted:\n%q\n%q", back.Body, args["body"])
	}
	// A copy in Sent, with the Bcc; the draft is gone from Drafts.
	if s := f.folderRaw("Sent"); len(s) != 1 || !strings.Contains(s[0], "Bcc: <dave@example.org>") {
		t.Errorf("Sent holds %d mails: %q", len(s), s)
	}
	if d := f.folderRaw("Drafts"); len(d) != 0 {
		t.Errorf("Drafts still holds %d mails", len(d))
	}

	// save_sent = false: the server files it; no copy of ours.
	f.dir = t.TempDir()
	f.start(f.config(func(acct, _ map[string]any) { acct["save_sent"] = false }))
	id = f.must("mail_draft", args)["draft_id"].(string)
	_, digest, err = f.h.previewSend(ctx60(t), "main", id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.sendAs("main", id, digest); err != nil {
		t.Fatal(err)
	}
	if n, s := len(f.smtp.sent()), f.folderRaw("Sent"); n != 2 || len(s) != 1 {
		t.Errorf("with save_sent false: %d sent, Sent holds %d (want 2 and still 1)", n, len(s))
	}
}

func TestReplyThreading(t *testing.T) {
	f := newServers(t)
	f.seed("INBOX", "From: Alice <alice@example.org>\nTo: me@example.com\nSubject: Re: Lunch\nMessage-ID: <m3@example.org>\nIn-Reply-To: <m2@example.com>\nReferences: <m1@example.org> <m2@example.com>\n\nNoon?\n")
	f.seed("INBOX", "From: Bob <bob@example.org>\nTo: me@example.com\nSubject: Plans\nMessage-ID: <b1@example.org>\n\nHi\n")
	f.start(nil)
	hits := results(t, f.must("mail_search", map[string]any{}))
	cases := []struct {
		subject  string
		argSubj  string
		wantSubj string
		wantRefs string
		wantIRT  string
	}{
		{"Re: Lunch", "", "Re: Lunch", "<m1@example.org> <m2@example.com> <m3@example.org>", "<m3@example.org>"},
		{"Plans", "", "Re: Plans", "<b1@example.org>", "<b1@example.org>"},
		{"Plans", "Other subject", "Other subject", "<b1@example.org>", "<b1@example.org>"},
		// The spaces around a subject are not kept: the mail would read
		// back without them, unlike what the approval showed.
		{"Plans", " \tPadded subject  ", "Padded subject", "<b1@example.org>", "<b1@example.org>"},
	}
	for _, tc := range cases {
		var hit map[string]any
		for _, h := range hits {
			if h["subject"] == tc.subject {
				hit = h
			}
		}
		out := f.must("mail_draft", map[string]any{"to": []any{"alice@example.org"}, "subject": tc.argSubj, "body": "ok", "in_reply_to": hit["id"]})
		raw := f.folderRaw("Drafts")
		d := raw[len(raw)-1]
		for _, want := range []string{"Subject: " + tc.wantSubj + "\r\n", "In-Reply-To: " + tc.wantIRT + "\r\n", "References: " + tc.wantRefs + "\r\n"} {
			if !strings.Contains(d, want) {
				t.Errorf("%s: the draft lacks %q:\n%s", tc.subject, want, d)
			}
		}
		if mustID(t, out["draft_id"]).Folder != "Drafts" {
			t.Errorf("draft id of folder %q", mustID(t, out["draft_id"]).Folder)
		}
	}
}

func TestDraftRefusals(t *testing.T) {
	f := newServers(t)
	f.start(f.config(func(_, cfg map[string]any) { cfg["max_body_bytes"] = json.Number("2048") }))
	many := []any{}
	for i := range 51 {
		many = append(many, "r"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+"@example.org")
	}
	cases := []struct {
		name string
		mod  func(map[string]any)
		want string
	}{
		{"valid", func(map[string]any) {}, ""},
		{"CRLF in the subject", func(a map[string]any) { a["subject"] = "Hi\r\nBcc: evil@example.net" }, CodeHeaderInjection},
		{"LF in the subject", func(a map[string]any) { a["subject"] = "Hi\nX: y" }, CodeHeaderInjection},
		{"CRLF in an address", func(a map[string]any) { a["to"] = []any{"alice@example.org\r\nBcc: evil@example.net"} }, CodeHeaderInjection},
		{"LF in a cc name", func(a map[string]any) { a["cc"] = []any{"\"A\nB\" <a@example.org>"} }, CodeHeaderInjection},
		{"two addresses in one item", func(a map[string]any) { a["to"] = []any{"a@example.org, b@example.org"} }, CodeInvalidAddress},
		{"no at", func(a map[string]any) { a["to"] = []any{"alice"} }, CodeInvalidAddress},
		{"bad domain", func(a map[string]any) { a["bcc"] = []any{"alice@exa mple.org"} }, CodeInvalidAddress},
		{"oversize body", func(a map[string]any) { a["body"] = strings.Repeat("x", 2049) }, CodeBodyTooLarge},
		{"no recipient", func(a map[string]any) { a["to"], a["cc"], a["bcc"] = []any{}, []any{}, []any{} }, CodeNoRecipient},
		{"too many", func(a map[string]any) { a["to"] = many }, CodeTooManyRecipients},
		{"NUL in the body", func(a map[string]any) { a["body"] = "a\x00b" }, CodeBadArgument},
		{"terminal escape in the body", func(a map[string]any) { a["body"] = "hi\x1b[2J\x1b[Hsomething else" }, CodeBadArgument},
		{"backspaces in the subject", func(a map[string]any) { a["subject"] = "invoice\b\b\b\b\b\b\bhello" }, CodeBadArgument},
		{"direction override in the body", func(a map[string]any) { a["body"] = "pay \u202e0001$\u202c now" }, CodeBadArgument},
		{"direction override in a name", func(a map[string]any) { a["to"] = []any{"\"\u202eecila\" <mallory@example.net>"} }, CodeInvalidAddress},
		{"tabs and right-to-left text", func(a map[string]any) { a["body"] = "a\tb\nשלום עולם\n" }, ""},
		{"bad in_reply_to", func(a map[string]any) { a["in_reply_to"] = "<m1@example.org>" }, CodeInvalidID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := draftArgs()
			args["body"] = "short"
			tc.mod(args)
			before := len(f.folderRaw("Drafts"))
			_, err := f.call("mail_draft", args)
			if got := code(err); got != tc.want {
				t.Fatalf("code %q (%v), want %q", got, err, tc.want)
			}
			if after := len(f.folderRaw("Drafts")); tc.want != "" && after != before {
				t.Errorf("a refused draft was saved")
			}
		})
	}
}

func TestSendRefusals(t *testing.T) {
	f := newServers(t)
	f.start(f.config(func(acct, cfg map[string]any) {
		cfg["groups"] = map[string]any{"main": map[string]any{"accounts": []any{"work"}, "daily_send_cap": json.Number("2")},
			"other": map[string]any{"accounts": []any{"*"}, "daily_send_cap": json.Number("0")}}
		cfg["recipient_allowlist"] = []any{"alice@example.org", "@example.net"}
	}))
	draft := func(to ...any) (string, string) {
		id := f.must("mail_draft", map[string]any{"to": to, "subject": "s", "body": "b " + strings.Repeat("x", len(f.smtp.sent()))})["draft_id"].(string)
		// The digest as the preview computes it, without the preview's
		// own refusals: the send must refuse by itself.
		c := f.rawConn()
		defer c.close()
		p, err := f.h.prepareSend(c, mustID(t, id))
		if err != nil {
			t.Fatal(err)
		}
		return id, p.wire.digest()
	}
	// Unbound: the tool refuses without the core's bound digest.
	id, digest := draft("alice@example.org")
	if _, err := f.call("mail_send", map[string]any{"draft_id": id}); code(err) != CodeContentChanged {
		t.Fatalf("mail_send without a bound digest: %v, want %s", err, CodeContentChanged)
	}
	// Another mail's digest does not send this one.
	id2, digest2 := draft("bob@example.net")
	if _, err := f.sendAs("main", id2, digest); code(err) != CodeContentChanged {
		t.Fatalf("send with another draft's digest: %v, want %s", err, CodeContentChanged)
	}
	if n := len(f.smtp.sent()); n != 0 {
		t.Fatalf("%d mails sent by refused sends", n)
	}
	// Not on the allow-list: neither previewed nor sent.
	id3, digest3 := draft("eve@example.com")
	if _, _, err := f.h.previewSend(ctx60(t), "main", id3); code(err) != CodeRecipientNotAllowed {
		t.Fatalf("preview to eve: %v, want %s", err, CodeRecipientNotAllowed)
	}
	if _, err := f.sendAs("main", id3, digest3); code(err) != CodeRecipientNotAllowed {
		t.Fatalf("send to eve: %v, want %s", err, CodeRecipientNotAllowed)
	}
	// A group whose cap is 0 sends nothing (and is not asked to approve).
	if _, _, err := f.h.previewSend(ctx60(t), "other", id); code(err) != CodeCapReached {
		t.Fatalf("preview by a group with cap 0: %v, want %s", err, CodeCapReached)
	}
	if _, err := f.sendAs("other", id, digest); code(err) != CodeCapReached {
		t.Fatalf("send by a group with cap 0: %v, want %s", err, CodeCapReached)
	}
	// An SMTP refusal sends nothing and does not use the cap.
	f.smtp.rejectRcpt = "bob@example.net"
	if _, err := f.sendAs("main", id2, digest2); code(err) != CodeSendFailed {
		t.Fatalf("send refused by SMTP: %v, want %s", err, CodeSendFailed)
	}
	f.smtp.rejectRcpt = ""
	// Positive controls: two sends pass (the cap is 2) …
	if _, err := f.sendAs("main", id, digest); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sendAs("main", id2, digest2); err != nil {
		t.Fatal(err)
	}
	// … a third does not, and the same mail is never sent twice.
	id4, digest4 := draft("alice@example.org")
	if _, _, err := f.h.previewSend(ctx60(t), "main", id4); code(err) != CodeCapReached {
		t.Fatalf("preview of a third send of the day: %v, want %s", err, CodeCapReached)
	}
	if _, err := f.sendAs("main", id4, digest4); code(err) != CodeCapReached {
		t.Fatalf("third send of the day: %v, want %s", err, CodeCapReached)
	}
	f.now = f.now.Add(24 * time.Hour)
	if _, err := f.sendAs("main", id, digest); code(err) != CodeNotFound {
		t.Fatalf("send of a sent (and removed) draft: %v, want %s", err, CodeNotFound)
	}
	if n := len(f.smtp.sent()); n != 2 {
		t.Fatalf("%d mails sent, want 2", n)
	}
	// A mail outside Drafts is not a draft.
	f.seed("INBOX", "From: me@example.com\nTo: alice@example.org\nSubject: x\nMessage-ID: <i@example.com>\nDate: Sat, 28 Feb 2026 10:00:00 +0000\n\nbody\n")
	inbox := results(t, f.must("mail_search", map[string]any{}))[0]["id"].(string)
	if _, _, err := f.h.previewSend(ctx60(t), "main", inbox); code(err) != CodeNotADraft {
		t.Fatalf("preview of an inbox mail: %v, want %s", err, CodeNotADraft)
	}
}

func TestDraftEditedAfterPreview(t *testing.T) {
	// IMAP mails do not change: editing a draft in a mail client saves a
	// new one and deletes the old. Either way the approved one is not sent.
	f := newServers(t)
	f.start(nil)
	id := f.must("mail_draft", draftArgs())["draft_id"].(string)
	_, digest, err := f.h.previewSend(ctx60(t), "main", id)
	if err != nil {
		t.Fatal(err)
	}
	// The user's client replaces the draft with an edited one.
	old := f.folderRaw("Drafts")[0]
	edited := strings.Replace(old, "Subject: Friday", "Subject: Friday (edited)", 1)
	c := f.rawConn()
	uid := mustID(t, id).UID
	if _, err := c.c.Select("Drafts", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.c.UIDExpunge(imap.UIDSetNum(uid)).Close(); err != nil {
		t.Fatal(err)
	}
	newID, err := c.appendMsg("Drafts", []byte(edited), []imap.Flag{imap.FlagDraft}, f.now, "")
	if err != nil {
		t.Fatal(err)
	}
	c.close()
	if _, err := f.sendAs("main", id, digest); code(err) != CodeNotFound {
		t.Fatalf("send of the replaced draft: %v, want %s", err, CodeNotFound)
	}
	if _, err := f.sendAs("main", newID.String(), digest); code(err) != CodeContentChanged {
		t.Fatalf("send of the edited draft under the old approval: %v, want %s", err, CodeContentChanged)
	}
	if n := len(f.smtp.sent()); n != 0 {
		t.Fatalf("%d mails sent", n)
	}
	// Positive control: the edited draft, previewed again, is sent.
	_, d2, err := f.h.previewSend(ctx60(t), "main", newID.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.sendAs("main", newID.String(), d2); err != nil {
		t.Fatal(err)
	}
	if s := f.smtp.sent(); len(s) != 1 || !strings.Contains(string(s[0].Data), "Subject: Friday (edited)") {
		t.Fatalf("sent %d mails", len(s))
	}
}

func TestDraftWithInjectedHeaders(t *testing.T) {
	// A draft saved by someone else (a client, or a hostile server) is
	// checked again before it is sent.
	f := newServers(t)
	f.start(nil)
	base := "From: Me <me@example.com>\nTo: alice@example.org\nDate: Sat, 28 Feb 2026 10:00:00 +0000\nMessage-ID: <d@example.com>\n"
	cases := []struct {
		name, raw, want string
	}{
		{"valid", base + "Subject: ok\n\nbody\n", ""},
		{"encoded CRLF in the subject", base + "Subject: =?utf-8?q?a=0D=0ABcc:_evil@example.net?=\n\nbody\n", CodeHeaderInjection},
		{"another From", strings.Replace(base, "me@example.com", "boss@example.com", 1) + "Subject: x\n\nbody\n", CodeFromMismatch},
		{"html", base + "Subject: x\nContent-Type: text/html\n\n<p>x</p>\n", CodeDraftUnsupported},
		{"multipart", base + "Subject: x\nContent-Type: multipart/mixed; boundary=B\n\n--B\n\nx\n--B--\n", CodeDraftUnsupported},
		{"no recipient", strings.Replace(base, "To: alice@example.org\n", "", 1) + "Subject: x\n\nbody\n", CodeNoRecipient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f.seed("Drafts", tc.raw, imap.FlagDraft)
			raw := f.folderRaw("Drafts")
			_ = raw
			c := f.rawConn()
			sel, err := c.selectFolder("Drafts", true)
			if err != nil {
				t.Fatal(err)
			}
			c.close()
			id := msgID{Account: "work", Folder: "Drafts", UIDValidity: sel.UIDValidity, UID: imap.UID(sel.UIDNext - 1)}
			_, _, err = f.h.previewSend(ctx60(t), "main", id.String())
			if got := code(err); got != tc.want {
				t.Fatalf("code %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}

// rawConn is a logged-in connection to the fixture's IMAP server.
func (f *fixture) rawConn() *conn {
	f.t.Helper()
	c, err := f.h.connect(ctx60(f.t), f.h.cfg.Accounts[0], nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func TestRenderRoundTrip(t *testing.T) {
	from, _ := parseOneAddress("Zoë Ünïcode <zoe@example.com>")
	to, _ := addressList("to", []string{"\"Last, First\" <lf@example.org>", "plain@example.org"})
	for _, body := range []string{"", "one line", "trailing spaces   \nand tabs\t\n", "=3D not encoded =\n" + strings.Repeat("long ", 100), "ünïcødé 🙂\n\n\nend"} {
		m := &composed{From: from, To: to, Subject: "Grüße, and a long subject " + strings.Repeat("x", 100), Date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
			MessageID: "abc@example.com", InReplyTo: "p@example.org", References: []string{"o@example.org", "p@example.org"}, Body: body}
		raw := m.render(true)
		back, err := parseDraft(raw, DefaultMaxBody)
		if err != nil {
			t.Fatalf("parse of rendered %q: %v\n%s", body, err, raw)
		}
		if back.Body != body || back.Subject != m.Subject || back.InReplyTo != m.InReplyTo || len(back.References) != 2 || !back.Date.Equal(m.Date) {
			t.Errorf("round trip of %q: %+v", body, back)
		}
		back.From = from
		if string(back.render(true)) != string(raw) {
			t.Errorf("render is not stable for %q:\n%s\n---\n%s", body, raw, back.render(true))
		}
		for _, line := range strings.Split(string(raw), "\r\n") {
			if len(line) > 998 {
				t.Errorf("a line of %d bytes", len(line))
			}
		}
	}
}

// TestPreviewAndBind drives mail_send as the core does, through the SDK's
// harness: Preview (twice, as before asking and before running), then the
// call with the approved digest. A call without a digest, with another
// preview's, or for content that now renders otherwise is refused
// CONTENT_CHANGED and sends nothing; the approved one sends exactly the
// previewed transaction.
func TestPreviewAndBind(t *testing.T) {
	f := newServers(t)
	cfg := f.config(nil)
	svc := &plugintest.Services{Plugin: Name, Channel: true, Credentials: plugintest.NewFakeCredentials(map[string]string{"work": testPass})}
	f.svc = svc // folderRaw logs in with it
	var d net.Dialer
	newHandler := func(dir string) *Handler {
		return New(Options{Dial: d.DialContext, DataDir: dir, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return f.now }})
	}
	hs := plugintest.New(t, newHandler(f.dir), plugintest.WithConfig(cfg), plugintest.WithServices(svc))
	main := plugintest.WithGroup("main")
	args := draftArgs()
	draft := func(a map[string]any) map[string]any {
		r := plugintest.AssertSuccess(t, hs.Invoke("mail_draft", a, main))
		return map[string]any{"draft_id": r["draft_id"]}
	}
	send := draft(args)

	pv, err := hs.Preview("mail_send", send, main)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`From: "Me" <me@example.com>`, `To: "Alice" <alice@example.org>`, "Cc: <carol@example.org>", "Bcc: <dave@example.org>",
		"Subject: Friday\n", "\n\n" + args["body"].(string)} {
		if !strings.Contains(pv.Text, want) {
			t.Errorf("preview lacks %q:\n%s", want, pv.Text)
		}
	}
	if !strings.HasPrefix(pv.Digest, "sha256:") {
		t.Errorf("digest %q", pv.Digest)
	}
	// Deterministic and without side effects: the core previews twice.
	again, err := hs.Preview("mail_send", send, main)
	if err != nil || *again != *pv {
		t.Fatalf("a second preview differs: %+v, %v", again, err)
	}
	if n := len(f.smtp.sent()); n != 0 || len(f.folderRaw("Drafts")) != 1 {
		t.Fatalf("previews sent %d mails or touched Drafts", n)
	}
	// Another group may not even preview it; nor is any other tool previewed.
	if _, err := hs.Preview("mail_send", send, plugintest.WithGroup("kids")); code(err) != CodeAccountNotAllowed {
		t.Fatalf("preview for a group without the account: %v", err)
	}
	if _, err := hs.Preview("mail_search", map[string]any{}, main); code(err) != CodeBadArgument {
		t.Fatalf("preview of mail_search: %v", err)
	}

	other := draft(map[string]any{"to": []any{"bob@example.org"}, "subject": "Other", "body": "another mail\n"})
	otherPv, err := hs.Preview("mail_send", other, main)
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name string
		opts []plugintest.RequestOption
	}{
		{"no digest", nil},
		{"another draft's digest", []plugintest.RequestOption{plugintest.WithPreviewDigest(otherPv.Digest)}},
		{"a made-up digest", []plugintest.RequestOption{plugintest.WithPreviewDigest("sha256:" + strings.Repeat("0", 64))}},
	}
	for _, tc := range refused {
		r := hs.Invoke("mail_send", send, append([]plugintest.RequestOption{main}, tc.opts...)...)
		if r.HandlerCode != CodeContentChanged {
			t.Errorf("%s: %s, want %s", tc.name, r, CodeContentChanged)
		}
	}
	if n := len(f.smtp.sent()); n != 0 {
		t.Fatalf("%d mails sent by refused calls", n)
	}

	// The same draft rendering otherwise (the account's From name changed
	// in the config since the user approved) is not sent under the old
	// approval.
	renamed := f.config(func(acct, _ map[string]any) { acct["from"] = "Someone Else <me@example.com>" })
	hs2 := plugintest.New(t, newHandler(t.TempDir()), plugintest.WithConfig(renamed), plugintest.WithServices(svc))
	if r := hs2.Invoke("mail_send", send, main, plugintest.WithPreviewDigest(pv.Digest)); r.HandlerCode != CodeContentChanged {
		t.Fatalf("send after the From changed: %s, want %s", r, CodeContentChanged)
	}
	if n := len(f.smtp.sent()); n != 0 {
		t.Fatalf("%d mails sent after the From changed", n)
	}
	hs2.Shutdown()

	// Approved: exactly the previewed transaction goes out, once.
	r := plugintest.AssertSuccess(t, hs.Invoke("mail_send", send, main, plugintest.WithPreviewDigest(pv.Digest)))
	if r["sent"] != true {
		t.Fatalf("send: %v", r)
	}
	sent := f.smtp.sent()
	if len(sent) != 1 {
		t.Fatalf("%d mails sent, want 1", len(sent))
	}
	if got := (&wire{From: sent[0].From, To: sent[0].To, Data: sent[0].Data}).digest(); got != pv.Digest {
		t.Errorf("the server got a transaction of digest %s, the user approved %s", got, pv.Digest)
	}
	// The approval is used: the draft is gone, a repeat finds nothing.
	if r := hs.Invoke("mail_send", send, main, plugintest.WithPreviewDigest(pv.Digest)); r.HandlerCode != CodeNotFound {
		t.Fatalf("a repeated approved send: %s, want %s", r, CodeNotFound)
	}
	// Positive control for the other draft: its own digest sends it.
	plugintest.AssertSuccess(t, hs.Invoke("mail_send", other, main, plugintest.WithPreviewDigest(otherPv.Digest)))
	if n := len(f.smtp.sent()); n != 2 {
		t.Fatalf("%d mails sent, want 2", n)
	}
}
