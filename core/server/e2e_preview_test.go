package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
)

// posted reads what the oopkit plugin "wk" posted (posted.jsonl in its
// data folder): each post's draft id, text and the digest it was given.
func posted(t *testing.T, c *testCore) []map[string]string {
	t.Helper()
	b, err := os.ReadFile(c.Home.DataDir("wk") + "/posted.jsonl")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, l := range scanLines(string(b)) {
		var m map[string]string
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("posted.jsonl: %v: %s", err, l)
		}
		out = append(out, m)
	}
	return out
}

// Previews through the real core, bin/ipc, the real CLI and an
// out-of-process plugin whose wk_post {id} declares a preview (its content
// is a draft in the plugin's data folder, as a mail_send's is a draft on
// a server):
//
//   - the confirmation carries the preview whole (control API, watch
//     stream, carapace confirm show), control characters escaped on the
//     CLI; approved, the call runs and the handler gets the digest;
//   - a draft changed after the request, then approved, is refused with
//     CONTENT_CHANGED and not posted: by the core, which previews the
//     call again right before it runs, and, for a change after that, by
//     the handler's own CheckDigest;
//   - a preview that fails refuses the call at once: no confirmation;
//   - the audit log keeps the digest, never the preview's text.
func TestPreviewThroughTheCore(t *testing.T) {
	c := startCoreWith(t, coreOptions{Config: confirmConfig, Setup: func(h home.Dir) { installKit(t, h, "wk") }})
	w := watch(t, c)
	s := c.Session(t, "main")
	ctx := context.Background()

	// (a) The preview, shown whole; approved, the post runs with its digest.
	text := "To: anna@example.org\nSubject: Lunch\n\nTomorrow at 12? \x1b[2J\u202eevil\n-- \nMe"
	mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.wk_draft", mustJSON(t, map[string]string{"id": "d1", "text": text})))
	bg := startIPC(t, s.Socket, "tool.invoke.wk_post", `{"id":"d1"}`)
	id := bg.waitPending(t)
	cf, err := c.Client.Confirmation(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	wantPreview := "Post draft d1:\n" + text + "\n"
	if cf.Preview != wantPreview || !strings.HasPrefix(cf.PreviewDigest, "sha256:") || cf.PreviewOmitted || !cf.Exact() {
		t.Fatalf("the control API's confirmation: preview %q, digest %q, omitted %v; want the preview whole and its digest", cf.Preview, cf.PreviewDigest, cf.PreviewOmitted)
	}
	ev := w.find(t, "confirmation.requested", confirmationEvent(api.WatchConfirmationRequested, id)).Confirmation
	if ev.Preview != wantPreview || ev.PreviewDigest != cf.PreviewDigest {
		t.Fatalf("the watch stream's confirmation: preview %q, digest %q", ev.Preview, ev.PreviewDigest)
	}
	out, errs, code := runCLI(t, c.Home, "confirm", "show", id[:8])
	if code != 0 {
		t.Fatalf("confirm show: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"what it will do (the plugin's preview, whole):", "| Post draft d1:", "| To: anna@example.org", "| Subject: Lunch",
		`| Tomorrow at 12? \u001b[2J\u202eevil`, "| -- ", "| Me", "preview digest: " + cf.PreviewDigest} {
		if !strings.Contains(out, want) {
			t.Errorf("confirm show lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\u202e") {
		t.Errorf("confirm show prints the preview's control characters as they are:\n%q", out)
	}
	if strings.Index(out, "| Post draft d1:") > strings.Index(out, "arguments:") {
		t.Errorf("confirm show prints the preview below the arguments:\n%s", out)
	}
	// An approval without the digest is refused, and decides nothing.
	if _, err := c.Client.Decide(ctx, api.Decision{ID: id, Approve: true, ArgsHash: cf.ArgsHash, Surface: "cli"}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("an approval without the preview's digest: %v; want a conflict", err)
	}
	out, errs, code = runCLI(t, c.Home, "confirm", "approve", id[:8])
	if code != 0 || !strings.Contains(out, "| Tomorrow at 12?") || !strings.Contains(out, "approved "+id) {
		t.Fatalf("confirm approve: exit %d\n%s%s", code, out, errs)
	}
	got := mustOK(t, bg.wait(t))
	if got["posted"] != "d1" || got["digest"] != cf.PreviewDigest {
		t.Fatalf("the approved post: %v; want d1 posted with digest %s", got, cf.PreviewDigest)
	}
	if strings.Contains(bg.stdout.String(), "Post draft") {
		t.Errorf("the agent was sent the preview: %s", bg.stdout.String())
	}
	if p := posted(t, c); len(p) != 1 || p[0]["text"] != text || p[0]["digest"] != cf.PreviewDigest {
		t.Fatalf("posted %v; want d1 once, with the text shown", p)
	}

	// (b) The draft changes after the request; the approval of what was
	// shown does not post what it has become.
	mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.wk_draft", `{"id":"d2","text":"Hello Bob, see you at 9."}`))
	bg = startIPC(t, s.Socket, "tool.invoke.wk_post", `{"id":"d2"}`)
	id2 := bg.waitPending(t)
	cf2, err := c.Client.Confirmation(ctx, id2)
	if err != nil || !strings.Contains(cf2.Preview, "see you at 9") {
		t.Fatalf("confirmation %+v, %v", cf2, err)
	}
	mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.wk_draft", `{"id":"d2","text":"Hello Bob, wire 10000 EUR to attacker."}`))
	if _, err := c.Client.Decide(ctx, api.Decision{ID: id2, Approve: true, ArgsHash: cf2.ArgsHash, PreviewDigest: cf2.PreviewDigest, Surface: "cli", Decider: "test"}); err != nil {
		t.Fatalf("approve what was shown: %v", err)
	}
	r := bg.wait(t)
	wantError(t, r, ipc.CodeHandlerError, 0, "")
	if !strings.Contains(r.Err.Message, "the content changed after the user approved wk_post (the core checked before running it)") {
		t.Errorf("the agent's error: %q; want the core's check to refuse it", r.Err.Message)
	}
	if p := posted(t, c); len(p) != 1 {
		t.Fatalf("posted %v; the changed draft was posted", p)
	}
	var changed bool
	for _, e := range c.Audit(t) {
		if e.Correlation == cf2.Correlation && e.Stage == audit.StageHandler && e.Code == "CONTENT_CHANGED" {
			changed = true
		}
	}
	if !changed {
		t.Error("the audit log does not record CONTENT_CHANGED for the changed draft")
	}

	// (b, the handler's own check) The draft changes between the core's
	// last preview and the post (the kit edits a "flip" draft as its
	// second preview ends): the post's CheckDigest refuses it.
	mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.wk_draft", `{"id":"flip-1","text":"Hi Carol."}`))
	bg = startIPC(t, s.Socket, "tool.invoke.wk_post", `{"id":"flip-1"}`)
	id3 := bg.waitPending(t)
	cf3, err := c.Client.Confirmation(ctx, id3)
	if err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runCLI(t, c.Home, "confirm", "approve", id3[:8]); code != 0 {
		t.Fatalf("confirm approve: exit %d\n%s%s", code, out, errs)
	}
	r = bg.wait(t)
	wantError(t, r, ipc.CodeHandlerError, 0, "")
	if !strings.Contains(r.Err.Message, "the content changed after the user approved wk_post, so it was not run") {
		t.Errorf("the agent's error: %q; want the handler's CheckDigest to refuse it", r.Err.Message)
	}
	if p := posted(t, c); len(p) != 1 {
		t.Fatalf("posted %v; the draft edited after its last preview was posted", p)
	}
	var routedFlip bool
	for _, e := range c.Audit(t) {
		routedFlip = routedFlip || e.Correlation == cf3.Correlation && e.Stage == audit.StageRoute && e.PreviewDigest == cf3.PreviewDigest
	}
	if !routedFlip {
		t.Error("the flip draft's call was not routed with its digest: the core's check, not the handler's, refused it")
	}

	// (d) A preview that fails refuses the call at once, asking nobody;
	// the handler's detail stays in the audit log.
	before := len(cliConfirmations(t, c))
	r = runIPC(t, s.Socket, nil, "tool.invoke.wk_post", `{"id":"broken"}`)
	wantError(t, r, ipc.CodeConfirmationDenied, 5, "")
	if !strings.Contains(r.Err.Message, "could not show what it would do") || strings.Contains(r.Stderr, "/home/alice") {
		t.Errorf("a failed preview's error: %q", r.Stderr)
	}
	r = runIPC(t, s.Socket, nil, "tool.invoke.wk_post", `{"id":"nope"}`) // a ToolError: its message is the agent's
	wantError(t, r, ipc.CodeConfirmationDenied, 5, "")
	if !strings.Contains(r.Err.Message, "no draft nope") {
		t.Errorf("a missing draft's error: %q", r.Err.Message)
	}
	if n := len(cliConfirmations(t, c)); n != before || n != 0 {
		t.Errorf("%d confirmations pending after failed previews; want none", n)
	}
	if n := w.count(func(ev api.WatchEvent) bool {
		return ev.Type == api.WatchConfirmationRequested && ev.Confirmation != nil && ev.Confirmation.Tool == "wk_post"
	}); n != 3 {
		t.Errorf("%d wk_post confirmations requested; want 3 (d1, d2, flip-1): a failed preview asks nobody", n)
	}

	// The audit log: the digest with the confirmation and the routed call,
	// the failed preview's detail, never a preview's text.
	var pendingD, approvedD, routedD, failed int
	for _, e := range c.Audit(t) {
		line, _ := json.Marshal(e)
		if strings.Contains(string(line), "Tomorrow at 12") || strings.Contains(string(line), "see you at 9") {
			t.Errorf("the audit log holds a preview's text: %s", line)
		}
		switch {
		case e.PreviewDigest != cf.PreviewDigest:
		case e.Stage == audit.StageConfirm && e.Outcome == audit.OutcomePending:
			pendingD++
		case e.Stage == audit.StageConfirm && e.Outcome == audit.OutcomeApproved:
			approvedD++
		case e.Stage == audit.StageRoute && e.Outcome == audit.OutcomeRouted:
			routedD++
		}
		if e.Code == "PREVIEW_FAILED" && strings.Contains(e.Reason, "draft store is unreachable") {
			failed++
		}
	}
	if pendingD != 1 || approvedD != 1 || routedD != 1 || failed != 1 {
		t.Errorf("audit entries with d1's digest: pending %d, approved %d, routed %d; failed previews recorded %d; want 1 each", pendingD, approvedD, routedD, failed)
	}
}

// A preview too large for a watch event is left out of it (the menu then
// fetches it), and the control API has it whole.
func TestLargePreviewLeftOutOfTheWatchStream(t *testing.T) {
	c := startCoreWith(t, coreOptions{Config: confirmConfig, Setup: func(h home.Dir) { installKit(t, h, "wk") }})
	w := watch(t, c)
	s := c.Session(t, "main")
	long := strings.Repeat("All work and no play makes Jack a dull boy.\n", 500) // 22 000 bytes
	mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.wk_draft", mustJSON(t, map[string]string{"id": "big", "text": long})))
	bg := startIPC(t, s.Socket, "tool.invoke.wk_post", `{"id":"big"}`)
	id := bg.waitPending(t)
	ev := w.find(t, "confirmation.requested", confirmationEvent(api.WatchConfirmationRequested, id)).Confirmation
	if !ev.PreviewOmitted || ev.Preview != "" || ev.PreviewDigest == "" || ev.Exact() {
		t.Fatalf("the event: omitted %v, %d bytes of preview, digest %q", ev.PreviewOmitted, len(ev.Preview), ev.PreviewDigest)
	}
	cf, err := c.Client.Confirmation(context.Background(), id)
	if err != nil || cf.Preview != "Post draft big:\n"+long+"\n" || cf.PreviewOmitted {
		t.Fatalf("the control API: %d bytes, omitted %v, %v", len(cf.Preview), cf.PreviewOmitted, err)
	}
	if out, errs, code := runCLI(t, c.Home, "confirm", "deny", id[:8]); code != 0 {
		t.Fatalf("confirm deny: exit %d\n%s%s", code, out, errs)
	}
	wantError(t, bg.wait(t), ipc.CodeConfirmationDenied, 5, "")
	if p := posted(t, c); len(p) != 0 {
		t.Fatalf("posted %v after a denial", p)
	}
}

// mustJSON encodes v, for arguments with characters a shell literal would
// mangle.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A preview in which the core's sanitiser finds a secret (the agent put a
// private key in the mail) goes to the surfaces redacted — the watch
// stream, and so the phone, never carry the key — and cannot be approved
// as shown; read as it runs on the CLI (--raw, audited), it can.
func TestPreviewWithASecretApprovesOnlyRaw(t *testing.T) {
	c := startCoreWith(t, coreOptions{Config: confirmConfig, Setup: func(h home.Dir) { installKit(t, h, "wk") }})
	w := watch(t, c)
	s := c.Session(t, "main")
	const key = "MIIEowIBAAKCAQEAzL9d"
	text := "To: eve@example.org\n\nAs asked:\n-----BEGIN RSA PRIVATE KEY-----\n" + key
	mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.wk_draft", mustJSON(t, map[string]string{"id": "s1", "text": text})))
	bg := startIPC(t, s.Socket, "tool.invoke.wk_post", `{"id":"s1"}`)
	id := bg.waitPending(t)
	ev := w.find(t, "confirmation.requested", confirmationEvent(api.WatchConfirmationRequested, id)).Confirmation
	if strings.Contains(ev.Preview, key) || !strings.Contains(ev.Preview, "As asked:") || len(ev.Hidden) != 1 || ev.Hidden[0].Path != api.PreviewPath {
		t.Fatalf("the watch stream's preview %q, hidden %+v; want it redacted and the redaction listed", ev.Preview, ev.Hidden)
	}
	out, errs, code := runCLI(t, c.Home, "confirm", "approve", id[:8])
	if code == 0 || strings.Contains(out, key) || !strings.Contains(errs, "confirm approve --raw") {
		t.Fatalf("confirm approve of a redacted preview: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runCLI(t, c.Home, "confirm", "show", "--raw", id[:8])
	if code != 0 || !strings.Contains(out, "| "+key) {
		t.Fatalf("confirm show --raw: exit %d\n%s%s", code, out, errs)
	}
	if p := posted(t, c); len(p) != 0 {
		t.Fatalf("posted %v before any approval", p)
	}
	if out, errs, code = runCLI(t, c.Home, "confirm", "approve", "--raw", id[:8]); code != 0 {
		t.Fatalf("confirm approve --raw: exit %d\n%s%s", code, out, errs)
	}
	if got := mustOK(t, bg.wait(t)); got["posted"] != "s1" {
		t.Fatalf("the approved post: %v", got)
	}
	if p := posted(t, c); len(p) != 1 || p[0]["text"] != text {
		t.Fatalf("posted %v; want the draft as it was read", p)
	}
}

// Previews on the phone, end to end: the real core, the Telegram plugin's
// process (bundled, pinned), the fake Bot API and an out-of-process plugin
// whose wk_post declares a preview, called from a session over bin/ipc. A
// short preview is on the card whole and its Approve runs the post with
// the digest; a preview longer than a Telegram message is not on the
// card, which says where to read it and offers Deny only.
func TestTelegramPreviewCard(t *testing.T) {
	bot := fakebot.New(t)
	cfg := fmt.Sprintf(`
[confirm]
timeout = "60s"
[groups.main]
[plugins.telegram]
surface = true
[plugins.telegram.config]
owner_id = %d
api_url = %q
debounce_ms = 300
`, tgOwner, bot.URL())
	c := startCoreWith(t, coreOptions{Config: cfg, Bundled: []loader.Bundled{telegramBundle(t)},
		Setup: func(h home.Dir) { setToken(t, h); installKit(t, h, "wk") }})
	if p := pluginStatus(t, c, "telegram"); !p.Healthy {
		t.Fatalf("the telegram plugin: %+v\ncore log:\n%s", p, c.Log.String())
	}
	bot.WaitCount(t, "getUpdates", 1)
	s := c.Session(t, "main")

	// Short: whole on the card; Approve carries the digest, and the post runs.
	mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.wk_draft", `{"id":"p1","text":"To: anna@example.org\nSubject: Lunch <b>\n\nTomorrow at 12?"}`))
	bg := startIPC(t, s.Socket, "tool.invoke.wk_post", `{"id":"p1"}`)
	id := bg.waitPending(t)
	m, b := card(t, bot, "Post draft p1:")
	for _, want := range []string{"What it will do:", "To: anna@example.org", "Subject: Lunch &lt;b&gt;", "Tomorrow at 12?"} { // the card's HTML
		if !strings.Contains(m.Text, want) {
			t.Errorf("the card lacks %q:\n%s", want, m.Text)
		}
	}
	bot.Callback(tgOwner, fakebot.PrivateChat(tgOwner), m.MessageID, b["approve"])
	if got := mustOK(t, bg.wait(t)); got["posted"] != "p1" {
		t.Fatalf("the post approved on the phone: %v", got)
	}
	edited(t, bot, m.MessageID, "Approved on telegram by 4242")
	if p := posted(t, c); len(p) != 1 || !strings.HasPrefix(p[0]["digest"], "sha256:") {
		t.Fatalf("posted %v; want p1, with the approved digest", p)
	}
	if cf, err := c.Client.Confirmation(context.Background(), id); err != nil || cf.Decision != "approved" || cf.PreviewDigest != p0digest(t, c) {
		t.Fatalf("the confirmation %+v, %v", cf, err)
	}

	// Longer than a message: Deny only, and where to read it whole.
	long := strings.Repeat("All work and no play makes Jack a dull boy. ", 100)
	mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.wk_draft", mustJSON(t, map[string]string{"id": "p2", "text": long})))
	bg = startIPC(t, s.Socket, "tool.invoke.wk_post", `{"id":"p2"}`)
	id = bg.waitPending(t)
	denyOnly, deny := denyOnlyCard(t, bot, id, "All work and no play", "the long preview")
	bot.Callback(tgOwner, fakebot.PrivateChat(tgOwner), denyOnly.MessageID, deny)
	wantError(t, bg.wait(t), ipc.CodeConfirmationDenied, 5, "")
	if p := posted(t, c); len(p) != 1 {
		t.Fatalf("posted %v after a denial", p)
	}
}

// p0digest is the digest the first post was given.
func p0digest(t *testing.T, c *testCore) string {
	t.Helper()
	p := posted(t, c)
	if len(p) == 0 {
		t.Fatal("nothing posted")
	}
	return p[0]["digest"]
}
