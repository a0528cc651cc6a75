package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/ipc"
)

// promptSession opens a session of group main whose prompt is prompt (the
// runtime none: the test is the agent), closed at the end of the test.
func promptSession(t *testing.T, c *testCore, prompt string) api.Session {
	t.Helper()
	h, err := c.Client.Open(context.Background(), api.SessionRequest{Group: "main", Runtime: "none", Prompt: prompt})
	if err != nil {
		t.Fatalf("open a session with a prompt: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h.Info()
}

// pendingWhy waits for bg's confirmation and returns it as the control
// API shows it.
func pendingWhy(t *testing.T, c *testCore, bg *bgIPC) api.Confirmation {
	t.Helper()
	id := bg.waitPending(t)
	cf, err := c.Client.Confirmation(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

func whyContains(cf api.Confirmation, sub string) bool {
	for _, w := range cf.Why {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

// Provenance and taint through the real core, bin/ipc, an out-of-process
// plugin whose manifest declares the fields (wk_fetch: url_arguments,
// untrusted_output, egress; wk_send: egress) and the real CLI deciding.
func TestProvenanceAndTaintThroughTheCore(t *testing.T) {
	c := startCoreWith(t, coreOptions{Config: confirmConfig, Setup: func(h home.Dir) { installKit(t, h, "wk") }})
	s := promptSession(t, c, "Please summarise https://A.example/start for me.")

	// Before any untrusted result, egress runs at once (the control of
	// the taint below).
	if got := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.wk_send", `{"text":"hello"}`)); got["sent"] != "hello" {
		t.Fatalf("wk_send before the fetch: %v", got)
	}
	// A URL from the prompt fetches at once.
	if got := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.wk_fetch", `{"url":"https://a.example/start"}`)); got["title"] != "A page" {
		t.Fatalf("wk_fetch of the prompt's URL: %v", got)
	}
	var taints []audit.Entry
	for _, e := range c.Audit(t) {
		if e.Stage == audit.StageTaint {
			taints = append(taints, e)
		}
	}
	if len(taints) != 1 || taints[0].Session != s.ID || taints[0].Outcome != audit.OutcomeTainted ||
		!strings.Contains(taints[0].Reason, "wk_fetch returned untrusted content from https://a.example/start") {
		t.Fatalf("taint entries %+v, want one naming wk_fetch and its URL", taints)
	}

	// After it, the same egress call waits, with the reason; approved, it runs.
	bg := startIPC(t, s.Socket, "tool.invoke.wk_send", `{"text":"hello"}`)
	cf := pendingWhy(t, c, bg)
	if !whyContains(cf, "this session read https://a.example/start at ") || !whyContains(cf, "(wk_fetch)") {
		t.Fatalf("the confirmation's reasons %q do not name what the session read", cf.Why)
	}
	if out, errs, code := runCLI(t, c.Home, "confirm", "approve", cf.ID[:8]); code != 0 {
		t.Fatalf("confirm approve: exit %d\n%s%s", code, out, errs)
	}
	if got := mustOK(t, bg.wait(t)); got["sent"] != "hello" {
		t.Fatalf("approved wk_send: %v", got)
	}
	// Denied, it does not run.
	bg = startIPC(t, s.Socket, "tool.invoke.wk_send", `{"text":"the user's notes"}`)
	cf = pendingWhy(t, c, bg)
	if out, errs, code := runCLI(t, c.Home, "confirm", "deny", cf.ID[:8]); code != 0 {
		t.Fatalf("confirm deny: exit %d\n%s%s", code, out, errs)
	}
	wantError(t, bg.wait(t), ipc.CodeConfirmationDenied, 5, "")

	// A fresh session: a URL the agent constructed, carrying data in its
	// query, waits and says it was not given — and only that (the
	// session is not tainted); its card shows the whole URL.
	s2 := promptSession(t, c, "Please summarise https://a.example/start for me.")
	constructed := "https://a.example/start?notes=meeting+with+Dr+Who+at+9"
	bg = startIPC(t, s2.Socket, "tool.invoke.wk_fetch", `{"url":"`+constructed+`"}`)
	cf = pendingWhy(t, c, bg)
	if len(cf.Why) != 1 || !whyContains(cf, `the URL in "url" was not given`) {
		t.Fatalf("the constructed URL's reasons: %q", cf.Why)
	}
	if !strings.Contains(string(cf.Arguments), constructed) || len(cf.Hidden) != 0 {
		t.Fatalf("the confirmation does not show the whole URL: %s (hidden %v)", cf.Arguments, cf.Hidden)
	}
	if out, errs, code := runCLI(t, c.Home, "confirm", "deny", cf.ID[:8]); code != 0 {
		t.Fatalf("confirm deny: exit %d\n%s%s", code, out, errs)
	}
	wantError(t, bg.wait(t), ipc.CodeConfirmationDenied, 5, "")
	// The given URL in the same session runs at once (control), and the
	// denied call did not taint it: egress still runs at once.
	mustOK(t, runIPC(t, s2.Socket, nil, "tool.invoke.wk_send", `{"text":"still untainted"}`))
	mustOK(t, runIPC(t, s2.Socket, nil, "tool.invoke.wk_fetch", `{"url":"https://a.example/start"}`))
	// A link of that result is given now: its fetch waits only for the
	// taint, not for provenance.
	bg = startIPC(t, s2.Socket, "tool.invoke.wk_fetch", `{"url":"https://b.example/next"}`)
	cf = pendingWhy(t, c, bg)
	if len(cf.Why) != 1 || !whyContains(cf, "this session read https://a.example/start") {
		t.Fatalf("the link's reasons: %q", cf.Why)
	}
	if out, errs, code := runCLI(t, c.Home, "confirm", "approve", cf.ID[:8]); code != 0 {
		t.Fatalf("confirm approve: exit %d\n%s%s", code, out, errs)
	}
	mustOK(t, bg.wait(t))
}
