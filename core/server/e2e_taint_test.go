package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/runtime"
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

// pendingOne waits until exactly one confirmation is pending and returns
// it as the control API shows it.
func pendingOne(t *testing.T, c *testCore, a *agentRun, what string) api.Confirmation {
	t.Helper()
	var list []api.Confirmation
	waitWithin(t, 90*time.Second, what, func() bool {
		var err error
		list, err = c.Client.Confirmations(context.Background(), false)
		return err == nil && len(list) > 0
	})
	if len(list) != 1 {
		t.Fatalf("%d confirmations pending, want 1 (%s): %+v\n%s", len(list), what, list, a.output())
	}
	cf, err := c.Client.Confirmation(context.Background(), list[0].ID)
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

// A session started by an event its plugin marked untrusted starts
// tainted: its agent's first egress call waits, with the event as the
// reason, and the audit log says when and why; the same event unmarked
// (the owner's own message) starts a session whose same call runs at once
// (control). The agent is the real bin/ipc, run by a fake engine as the
// container's first call.
func TestUntrustedEventStartsTainted(t *testing.T) {
	e := &firstCallEngine{fakeEngine: fakeEngine{info: homebrewApple}, args: []string{"tool.invoke.wk_send", `{"text":"the owner's notes"}`}}
	topics := []string{plugin.TopicMessageInbound.Name(), plugin.TopicChannelStarted.Name(), plugin.TopicChannelReply.Name()}
	c := startCoreWith(t, coreOptions{
		Config: "[runtime]\nengine = \"apple\"\n[groups.main]\n[confirm]\ntimeout = \"20s\"\n",
		NewEngine: func(name string) (runtime.Engine, error) {
			if name != "apple" {
				return nil, fmt.Errorf("no engine %s in this test", name)
			}
			return e, nil
		},
		Setup: func(h home.Dir) {
			m := strings.Replace(kitManifest("wk", topics...), `"channels": []`, `"channels": ["wk"]`, 1)
			if _, err := install.Install(h, kitSource(t, "wk", m), install.Options{}); err != nil {
				t.Fatal(err)
			}
		},
	})
	s := c.Session(t, "main")
	publish := func(untrusted bool) {
		args := fmt.Sprintf(`{"topic":"message.inbound","text":"see https://a.example/x","untrusted":%v}`, untrusted)
		if res := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.wk_publish", args)); res["published"] != true {
			t.Fatalf("publish: %v", res)
		}
	}

	// Control: the owner's own message; the first call runs at once.
	publish(false)
	waitFor(t, "the first session's agent call", func() bool { return len(e.calls()) == 1 })
	if r := e.calls()[0]; r.Code != 0 || !strings.Contains(r.Stdout, "the owner's notes") {
		t.Fatalf("egress in a session of a trusted event: exit %d, %s %s", r.Code, r.Stdout, r.Stderr)
	}

	// An untrusted event: the same call waits, saying why; denied.
	publish(true)
	var cf api.Confirmation
	waitFor(t, "the untrusted session's confirmation", func() bool {
		list, err := c.Client.Confirmations(context.Background(), false)
		if err != nil || len(list) == 0 {
			return false
		}
		cf = list[0]
		return true
	})
	if cf.Tool != "wk_send" || !whyContains(cf, "the event message.inbound from wk (marked untrusted)") {
		t.Fatalf("confirmation %+v, want wk_send waiting for the untrusted event", cf)
	}
	if out, errs, code := runCLI(t, c.Home, "confirm", "show", cf.ID[:8]); code != 0 || !strings.Contains(out, "why:      this session read the event message.inbound from wk") {
		t.Errorf("confirm show: exit %d, does not say why:\n%s%s", code, out, errs)
	}
	if out, errs, code := runCLI(t, c.Home, "confirm", "deny", cf.ID[:8]); code != 0 {
		t.Fatalf("confirm deny: exit %d\n%s%s", code, out, errs)
	}
	waitFor(t, "the second session's agent call", func() bool { return len(e.calls()) == 2 })
	if r := e.calls()[1]; r.Code != 1 || !strings.Contains(r.Stderr, string(ipc.CodeConfirmationDenied)) {
		t.Fatalf("egress in a session of an untrusted event: exit %d, %s", r.Code, r.Stderr)
	}
	var taints []audit.Entry
	for _, en := range c.Audit(t) {
		if en.Stage == audit.StageTaint {
			taints = append(taints, en)
		}
	}
	if len(taints) != 1 || taints[0].Session != cf.Session || !strings.Contains(taints[0].Reason, "tainted from its start: the event message.inbound from wk") {
		t.Fatalf("taint entries %+v, want one for the untrusted event's session", taints)
	}
}
