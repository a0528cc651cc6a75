package server_test

// End-to-end tests of the request pipeline: every one drives the real
// bin/ipc (or, for identity spoofing, a raw ZeroMQ DEALER on the same
// hardened transport) against a real core started with server.Run, and
// checks what the agent sees, what the audit log records, and what the user
// does through the real carapace CLI.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/ipc/zmtp"
)

// pipelineConfig is the core configuration most tests here use: short
// timeouts, a tight rate for tk_count, and testkit restricted to group
// "other" (so group "main" exercises UNAUTHORIZED and list_tools filtering).
const pipelineConfig = `
[core]
handler_timeout = "1s"
[confirm]
timeout = "2s"

[rate_limit.tools.tk_count]
per_minute = 2
burst = 2

[plugins.testkit]
allowed_groups = ["other"]
`

// confirmConfig gives the user time to answer through the CLI.
const confirmConfig = `
[core]
handler_timeout = "1s"
[confirm]
timeout = "20s"
`

// leaks are strings a handler planted that must never reach the agent.
var leaks = []string{"10.0.0.7", "hunter2", "/home/secret", "goroutine", "exploded", "chan int"}

// secrets are the credentials tk_fail "secret" returns.
var secrets = []string{"sk-ant-api03-AAAA", "abc.def.ghi", "ghp_0123456789abcdef", "AAAAAAAAAAAAAAAAAAAA"}

// lastCall returns the audit entries of the most recent request of session
// on topic, all linked by its correlation.
func lastCall(t *testing.T, c *testCore, session, topic string) (string, []audit.Entry) {
	t.Helper()
	var corr string
	es := c.Audit(t)
	for _, e := range es {
		if e.Session == session && e.Topic == topic && e.Correlation != "" {
			corr = e.Correlation
		}
	}
	if corr == "" {
		t.Fatalf("no audit entry for %s in session %s", topic, session)
	}
	var out []audit.Entry
	for _, e := range es {
		if e.Correlation == corr && e.Session == session {
			out = append(out, e)
		}
	}
	return corr, out
}

// entryAt returns the one entry at stage, failing the test if there is not
// exactly one.
func entryAt(t *testing.T, es []audit.Entry, stage string) audit.Entry {
	t.Helper()
	var found []audit.Entry
	for _, e := range es {
		if e.Stage == stage {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s entry, got %d in %+v", stage, len(found), es)
	}
	return found[0]
}

// stages lists the stages of es in order.
func stages(es []audit.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Stage)
	}
	return out
}

// auditText returns the audit log file as written.
func auditText(t *testing.T, c *testCore) string {
	t.Helper()
	b, err := os.ReadFile(c.Home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mustOK checks an ipc run succeeded.
func mustOK(t *testing.T, r ipcRun) map[string]any {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want success", r.Code, r.Stdout, r.Stderr)
	}
	return r.Result
}

// ---- 1. every error code through the real binary ----

func TestE2EErrorCodes(t *testing.T) {
	t.Parallel()
	c := startCore(t, pipelineConfig)

	cases := []struct {
		name      string
		group     string
		topic     string
		args      string
		code      ipc.Code
		stage     int
		field     string
		retriable bool
		message   string // the whole message, when it is fixed
		contains  string // part of the message
	}{
		{name: "unknown tool", group: "main", topic: "tool.invoke.no_such_tool", args: `{}`,
			code: ipc.CodeUnknownTool, stage: 2, contains: "list_tools"},
		{name: "bare tool name gets a hint", group: "main", topic: "echo", args: `{"message":"x"}`,
			code: ipc.CodeUnknownTool, stage: 2, contains: "did you mean tool.invoke.echo"},
		{name: "other topic gets a hint", group: "main", topic: "memory.search", args: `{}`,
			code: ipc.CodeUnknownTool, stage: 2, contains: "tool.invoke.<name>"},
		{name: "extra property", group: "main", topic: "tool.invoke.echo", args: `{"message":"hi","priority":"high"}`,
			code: ipc.CodeValidationFailed, stage: 3, field: "priority", contains: "priority"},
		{name: "missing required", group: "main", topic: "tool.invoke.echo", args: `{"uppercase":true}`,
			code: ipc.CodeValidationFailed, stage: 3, field: "message"},
		{name: "wrong type", group: "main", topic: "tool.invoke.echo", args: `{"message":42}`,
			code: ipc.CodeValidationFailed, stage: 3, field: "message"},
		{name: "maxLength", group: "main", topic: "tool.invoke.echo", args: `{"message":"` + strings.Repeat("a", 4097) + `"}`,
			code: ipc.CodeValidationFailed, stage: 3, field: "message"},
		{name: "maximum", group: "other", topic: "tool.invoke.tk_count", args: `{"sleep_ms":60001}`,
			code: ipc.CodeValidationFailed, stage: 3, field: "sleep_ms"},
		{name: "integer", group: "other", topic: "tool.invoke.tk_count", args: `{"sleep_ms":1.5}`,
			code: ipc.CodeValidationFailed, stage: 3, field: "sleep_ms"},
		{name: "unauthorized group", group: "main", topic: "tool.invoke.tk_count", args: `{}`,
			code: ipc.CodeUnauthorized, stage: 4, contains: `"main"`},
		{name: "confirmation timeout", group: "main", topic: "tool.invoke.echo_confirm", args: `{"message":"nobody answers"}`,
			code: ipc.CodeConfirmationTimeout, stage: 5, retriable: true},
		{name: "plugin timeout", group: "other", topic: "tool.invoke.tk_fail", args: `{"mode":"hang"}`,
			code: ipc.CodePluginTimeout, stage: 6, retriable: true, contains: "testkit"},
		{name: "plugin error: error", group: "other", topic: "tool.invoke.tk_fail", args: `{"mode":"error"}`,
			code: ipc.CodePluginError, message: "Internal plugin error"},
		{name: "plugin error: panic", group: "other", topic: "tool.invoke.tk_fail", args: `{"mode":"panic"}`,
			code: ipc.CodePluginError, message: "Internal plugin error"},
		{name: "plugin error: unserializable", group: "other", topic: "tool.invoke.tk_fail", args: `{"mode":"unserializable"}`,
			code: ipc.CodePluginError, message: "Internal plugin error"},
		{name: "handler error: tool error", group: "other", topic: "tool.invoke.tk_fail", args: `{"mode":"tool_error"}`,
			code: ipc.CodeHandlerError, retriable: true, message: "the widget is out of stock"},
		{name: "handler error: reserved code", group: "other", topic: "tool.invoke.tk_fail", args: `{"mode":"reserved_code"}`,
			code: ipc.CodeHandlerError, retriable: true, message: "upstream API said slow down"},
		{name: "handler error: nil result", group: "other", topic: "tool.invoke.tk_fail", args: `{"mode":"nil"}`,
			code: ipc.CodeHandlerError},
		{name: "handler error: huge result", group: "other", topic: "tool.invoke.tk_fail", args: `{"mode":"huge"}`,
			code: ipc.CodeHandlerError, contains: "Response exceeded maximum size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := c.Session(t, tc.group)
			r := runIPC(t, s.Socket, nil, tc.topic, tc.args)
			wantError(t, r, tc.code, tc.stage, tc.field)
			if r.Err.Retriable != tc.retriable {
				t.Errorf("retriable %v; want %v", r.Err.Retriable, tc.retriable)
			}
			if r.Err.RetryAfter != 0 && tc.code != ipc.CodeHandlerError {
				t.Errorf("retry_after %d on %s; only rate limits carry it", r.Err.RetryAfter, tc.code)
			}
			if tc.message != "" && r.Err.Message != tc.message {
				t.Errorf("message %q; want %q", r.Err.Message, tc.message)
			}
			if !strings.Contains(r.Err.Message, tc.contains) {
				t.Errorf("message %q; want it to contain %q", r.Err.Message, tc.contains)
			}
			if r.Stdout != "" {
				t.Errorf("stdout %q on an error", r.Stdout)
			}
			for _, l := range leaks {
				if strings.Contains(r.Stderr, l) {
					t.Errorf("internal detail %q reached the agent: %q", l, r.Stderr)
				}
			}
		})
	}

	t.Run("unauthorized group is allowed in its own group", func(t *testing.T) {
		r := runIPC(t, c.Session(t, "other").Socket, nil, "tool.invoke.tk_count", `{}`)
		if res := mustOK(t, r); res["count"] == nil {
			t.Fatalf("tk_count from group other: %+v", res)
		}
	})

	t.Run("rate limited per session", func(t *testing.T) {
		s := c.Session(t, "other")
		for range 2 {
			mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.tk_count", `{}`))
		}
		before := c.Kit.calls.Load()
		r := runIPC(t, s.Socket, nil, "tool.invoke.tk_count", `{}`)
		wantError(t, r, ipc.CodeRateLimited, 4, "")
		if !r.Err.Retriable || r.Err.RetryAfter < 1 {
			t.Fatalf("rate limit %+v; want retriable with retry_after >= 1", r.Err)
		}
		if !strings.Contains(r.Err.Message, "tk_count") {
			t.Errorf("message %q does not name the tool", r.Err.Message)
		}
		if n := c.Kit.calls.Load(); n != before {
			t.Fatalf("the limited call reached the handler (%d calls, want %d)", n, before)
		}
		// Another session of the same group has its own budget.
		s2 := c.Session(t, "other")
		mustOK(t, runIPC(t, s2.Socket, nil, "tool.invoke.tk_count", `{}`))
		// And the limit is per tool: the limited session can still echo.
		mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.echo", `{"message":"still here"}`))
	})

	t.Run("confirmation denied through the CLI", func(t *testing.T) {
		s := c.Session(t, "main")
		bg := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"please deny"}`)
		id := bg.waitPending(t)
		if out, errs, code := runCLI(t, c.Home, "confirm", "deny", id); code != 0 {
			t.Fatalf("confirm deny: exit %d\n%s%s", code, out, errs)
		}
		r := bg.wait(t)
		wantError(t, r, ipc.CodeConfirmationDenied, 5, "")
		if r.Err.Retriable {
			t.Errorf("a denial is not retriable: %+v", r.Err)
		}
	})

	t.Run("plugin error audited with sanitised detail", func(t *testing.T) {
		s := c.Session(t, "other")
		for _, mode := range []string{"error", "panic", "unserializable"} {
			t.Run(mode, func(t *testing.T) {
				r := runIPC(t, s.Socket, nil, "tool.invoke.tk_fail", `{"mode":"`+mode+`"}`)
				wantError(t, r, ipc.CodePluginError, 0, "")
				corr, es := lastCall(t, c, s.ID, "tool.invoke.tk_fail")
				h := entryAt(t, es, audit.StageHandler)
				if h.Outcome != audit.OutcomeError || h.Code != string(ipc.CodePluginError) || h.Source != "testkit" || h.Reason == "" {
					t.Errorf("%s: handler entry %+v; want error PLUGIN_ERROR from testkit with a reason", mode, h)
				}
				resp := entryAt(t, es, audit.StageResponse)
				if resp.Code != string(ipc.CodePluginError) || resp.Reason != "Internal plugin error" {
					t.Errorf("%s: response entry %+v; want what the agent saw", mode, resp)
				}
				switch mode {
				case "error":
					if !strings.Contains(h.Reason, "connection refused") {
						t.Errorf("handler entry lost the detail: %q", h.Reason)
					}
				case "panic":
					if !strings.Contains(h.Reason, "testkit exploded") {
						t.Errorf("handler entry lost the panic: %q", h.Reason)
					}
				}
				// The agent's own diagnostics never show the handler's detail.
				d := runIPC(t, s.Socket, nil, "tool.invoke.get_diagnostics", `{"correlation":"`+corr+`"}`)
				mustOK(t, d)
				if d.Result["handler_code"] != string(ipc.CodePluginError) {
					t.Errorf("%s: diagnostics handler_code %v", mode, d.Result["handler_code"])
				}
				for _, l := range leaks {
					if strings.Contains(d.Stdout, l) {
						t.Errorf("%s: get_diagnostics leaked %q: %s", mode, l, d.Stdout)
					}
				}
			})
		}
		if strings.Contains(auditText(t, c), "hunter2") {
			t.Fatal("the password from the handler's error is in the audit log")
		}
	})

	t.Run("reserved code visible in trace", func(t *testing.T) {
		s := c.Session(t, "other")
		r := runIPC(t, s.Socket, nil, "tool.invoke.tk_fail", `{"mode":"reserved_code"}`)
		wantError(t, r, ipc.CodeHandlerError, 0, "")
		corr, es := lastCall(t, c, s.ID, "tool.invoke.tk_fail")
		if h := entryAt(t, es, audit.StageHandler); h.Code != string(ipc.CodeRateLimited) {
			t.Errorf("handler entry code %q; want the original RATE_LIMITED", h.Code)
		}
		if resp := entryAt(t, es, audit.StageResponse); resp.Code != string(ipc.CodeHandlerError) || resp.Source != "testkit" {
			t.Errorf("response entry %+v; want HANDLER_ERROR from testkit", resp)
		}
		d := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.get_diagnostics", `{"correlation":"`+corr+`"}`))
		if d["mode"] != "trace" || d["handler_code"] != string(ipc.CodeRateLimited) {
			t.Fatalf("trace %+v; want handler_code RATE_LIMITED", d)
		}
	})
}

// PLUGIN_UNAVAILABLE from the core itself: when the audit log cannot be
// written, the pipeline fails closed and runs nothing; it recovers once the
// log is writable again.
func TestE2EPluginUnavailableWhenAuditFails(t *testing.T) {
	t.Parallel()
	c := startCore(t, "")
	s := c.Session(t, "main")
	mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.tk_count", `{}`))

	path := c.Home.AuditLog()
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	// The log notices the replaced file on its next background check (1 s).
	var r ipcRun
	deadline := time.Now().Add(10 * time.Second)
	for {
		before := c.Kit.calls.Load()
		r = runIPC(t, s.Socket, nil, "tool.invoke.tk_count", `{}`)
		if r.Code == 1 && r.Err.Code == ipc.CodePluginUnavailable {
			if n := c.Kit.calls.Load(); n != before {
				t.Fatalf("a request that could not be audited ran (%d calls, want %d)", n, before)
			}
			break
		}
		mustOK(t, r)
		if time.Now().After(deadline) {
			t.Fatal("the core kept answering with an unwritable audit log")
		}
		time.Sleep(150 * time.Millisecond)
	}
	wantError(t, r, ipc.CodePluginUnavailable, 6, "")
	if !r.Err.Retriable || !strings.Contains(r.Err.Message, "audit log") {
		t.Fatalf("error %+v; want retriable, naming the audit log", r.Err)
	}
	// A high-risk call is refused before it asks the user: no confirmation
	// is left pending for a request that could not be audited.
	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.echo_confirm", `{"message":"x"}`), ipc.CodePluginUnavailable, 5, "")
	if list := cliConfirmations(t, c); len(list) != 0 {
		t.Fatalf("confirmations pending with an unwritable audit log: %+v", list)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.tk_count", `{}`))
	if _, es := lastCall(t, c, s.ID, "tool.invoke.tk_count"); !slices.Contains(stages(es), audit.StageResponse) {
		t.Fatalf("after recovery the call was not audited: %+v", es)
	}
}

// ---- 2. the audit log ----

func TestE2EAuditLog(t *testing.T) {
	t.Parallel()
	c := startCore(t, pipelineConfig)
	s := c.Session(t, "other")
	const canary = "zebra-canary-42"

	// A success: routed, then the response.
	if res := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.echo", `{"message":"`+canary+`"}`)); res["message"] != canary {
		t.Fatalf("echo: %+v", res)
	}
	corr, es := lastCall(t, c, s.ID, "tool.invoke.echo")
	if got := stages(es); !slices.Equal(got, []string{audit.StageRoute, audit.StageResponse}) {
		t.Fatalf("echo stages %v; want route, response", got)
	}
	if r := entryAt(t, es, audit.StageRoute); r.Outcome != audit.OutcomeRouted || r.Source != "echo" {
		t.Errorf("route entry %+v", r)
	}
	if r := entryAt(t, es, audit.StageResponse); r.Outcome != audit.OutcomeOK || r.Source != "echo" {
		t.Errorf("response entry %+v", r)
	}

	// A rejection at stage 3, whose value is a canary too.
	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.echo", `{"message":"hi","priority":"`+canary+`"}`), ipc.CodeValidationFailed, 3, "priority")
	rcorr, res := lastCall(t, c, s.ID, "tool.invoke.echo")
	if rcorr == corr {
		t.Fatal("two calls share a correlation")
	}
	rej := entryAt(t, res, audit.StagePayload)
	if len(res) != 1 || rej.Outcome != audit.OutcomeRejected || rej.Code != string(ipc.CodeValidationFailed) ||
		rej.Field != "priority" || !strings.Contains(rej.Reason, "priority") || rej.Source != "core" {
		t.Errorf("rejection entries %+v; want one payload-stage rejection with field and reason", res)
	}
	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.echo", `{"message":`+`["`+canary+`"]}`), ipc.CodeValidationFailed, 3, "message")

	// A handler error: two linked entries, the handler's code and what the
	// agent saw.
	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.tk_fail", `{"mode":"tool_error"}`), ipc.CodeHandlerError, 0, "")
	_, hes := lastCall(t, c, s.ID, "tool.invoke.tk_fail")
	if got := stages(hes); !slices.Equal(got, []string{audit.StageRoute, audit.StageHandler, audit.StageResponse}) {
		t.Fatalf("handler error stages %v; want route, handler, response", got)
	}
	h, resp := entryAt(t, hes, audit.StageHandler), entryAt(t, hes, audit.StageResponse)
	if h.Code != string(ipc.CodeHandlerError) || h.Outcome != audit.OutcomeError || h.Source != "testkit" {
		t.Errorf("handler entry %+v", h)
	}
	if resp.Code != string(ipc.CodeHandlerError) || resp.Reason != "the widget is out of stock" || resp.Outcome != audit.OutcomeError {
		t.Errorf("response entry %+v", resp)
	}

	// An unauthorised call is a stage-4 rejection under the caller's group.
	m := c.Session(t, "main")
	wantError(t, runIPC(t, m.Socket, nil, "tool.invoke.tk_count", `{}`), ipc.CodeUnauthorized, 4, "")
	_, ues := lastCall(t, c, m.ID, "tool.invoke.tk_count")
	if u := entryAt(t, ues, audit.StageAuthorize); u.Group != "main" || u.Outcome != audit.OutcomeRejected || u.Code != string(ipc.CodeUnauthorized) {
		t.Errorf("unauthorized entry %+v", u)
	}

	// Every request entry, as written on disk, carries the seed's fields.
	text := auditText(t, c)
	n := 0
	for _, line := range scanLines(text) {
		var raw map[string]any
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			t.Fatalf("audit line is not JSON: %q", line)
		}
		if raw["topic"] == nil { // session and core lifecycle
			continue
		}
		n++
		for _, k := range []string{"timestamp", "group", "source", "topic", "correlation", "stage", "outcome"} {
			if v, _ := raw[k].(string); v == "" {
				t.Errorf("audit entry lacks %q: %s", k, line)
			}
		}
		if ts, _ := raw["timestamp"].(string); ts != "" {
			if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
				t.Errorf("timestamp %q: %v", ts, err)
			}
		}
		for _, k := range []string{"arguments", "result", "payload"} {
			if _, ok := raw[k]; ok {
				t.Errorf("audit entry has %q: %s", k, line)
			}
		}
	}
	if n < 8 {
		t.Errorf("only %d request entries in the audit log", n)
	}
	if strings.Contains(text, canary) {
		t.Fatalf("arguments or results reached the audit log:\n%s", text)
	}
	if !strings.Contains(text, "out of stock") {
		t.Error("the handler's error message is missing from the audit log")
	}
}

// ---- 3. the sanitiser end to end ----

func TestE2ESanitiser(t *testing.T) {
	t.Parallel()
	c := startCore(t, pipelineConfig)
	s := c.Session(t, "other")
	r := runIPC(t, s.Socket, nil, "tool.invoke.tk_fail", `{"mode":"secret"}`)
	mustOK(t, r)
	for _, sec := range secrets {
		if strings.Contains(r.Stdout, sec) || strings.Contains(r.Stderr, sec) {
			t.Errorf("secret %q reached the agent: %s", sec, r.Stdout)
		}
	}
	if !strings.Contains(r.Stdout, "[REDACTED]") {
		t.Fatalf("no redaction marker in %s", r.Stdout)
	}
	if note, _ := r.Result["note"].(string); !strings.HasPrefix(note, "use key ") || !strings.HasSuffix(note, " for that") {
		t.Errorf("the clean text around the secret was lost: %q", note)
	}
	_, es := lastCall(t, c, s.ID, "tool.invoke.tk_fail")
	resp := entryAt(t, es, audit.StageResponse)
	if resp.Outcome != audit.OutcomeSanitized {
		t.Fatalf("response entry %+v; want outcome sanitized", resp)
	}
	for _, p := range []string{"result.note", "result.nested.authorization", "result.nested.list[0]"} {
		if !slices.Contains(resp.Redacted, p) {
			t.Errorf("redacted paths %v lack %q", resp.Redacted, p)
		}
	}
	text := auditText(t, c)
	for _, sec := range secrets {
		if strings.Contains(text, sec) {
			t.Errorf("secret %q is in the audit log", sec)
		}
	}
	// get_diagnostics reports the redaction without the secret.
	d := runIPC(t, s.Socket, nil, "tool.invoke.get_diagnostics", `{"last_n":5,"filter_outcome":"sanitized"}`)
	mustOK(t, d)
	if !strings.Contains(d.Stdout, `"sanitized"`) {
		t.Errorf("diagnostics do not show the sanitised response: %s", d.Stdout)
	}
}

// ---- 4. confirmations through the real CLI ----

func TestE2EConfirmations(t *testing.T) {
	t.Parallel()
	c := startCore(t, confirmConfig)

	t.Run("approve", func(t *testing.T) {
		s := c.Session(t, "main")
		bg := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"launch the rocket"}`)
		id := bg.waitPending(t)
		list := cliConfirmations(t, c)
		if len(list) != 1 {
			t.Fatalf("confirm list: %+v", list)
		}
		p := list[0]
		if p.ID != id || p.Tool != "echo_confirm" || p.Group != "main" || p.Session != s.ID {
			t.Fatalf("confirmation %+v; want %s of echo_confirm in group main, session %s", p, id, s.ID)
		}
		var args map[string]any
		if err := json.Unmarshal(p.Arguments, &args); err != nil || args["message"] != "launch the rocket" {
			t.Fatalf("confirmation arguments %s", p.Arguments)
		}
		out, errs, code := runCLI(t, c.Home, "confirm", "approve", id)
		if code != 0 || !strings.Contains(out, "echo_confirm") || !strings.Contains(out, "launch the rocket") {
			t.Fatalf("confirm approve: exit %d\n%s%s", code, out, errs)
		}
		r := bg.wait(t)
		res := mustOK(t, r)
		if res["message"] != "launch the rocket" || res["confirmed"] != true {
			t.Fatalf("result %+v", res)
		}
		_, es := lastCall(t, c, s.ID, "tool.invoke.echo_confirm")
		var outcomes []string
		for _, e := range es {
			if e.Stage == audit.StageConfirm {
				outcomes = append(outcomes, e.Outcome)
				if e.Confirmation != id {
					t.Errorf("confirm entry %+v lacks the confirmation id %s", e, id)
				}
			}
		}
		if !slices.Equal(outcomes, []string{audit.OutcomePending, audit.OutcomeApproved}) {
			t.Errorf("confirm outcomes %v; want pending, approved", outcomes)
		}
		if left := cliConfirmations(t, c); len(left) != 0 {
			t.Errorf("confirmations left after approval: %+v", left)
		}
	})

	t.Run("deny", func(t *testing.T) {
		s := c.Session(t, "main")
		bg := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"delete everything"}`)
		id := bg.waitPending(t)
		if out, errs, code := runCLI(t, c.Home, "confirm", "deny", id); code != 0 {
			t.Fatalf("confirm deny: exit %d\n%s%s", code, out, errs)
		}
		wantError(t, bg.wait(t), ipc.CodeConfirmationDenied, 5, "")
		_, es := lastCall(t, c, s.ID, "tool.invoke.echo_confirm")
		if slices.Contains(stages(es), audit.StageRoute) {
			t.Fatalf("a denied call was routed: %+v", es)
		}
		var outcomes []string
		for _, e := range es {
			if e.Stage == audit.StageConfirm {
				outcomes = append(outcomes, e.Outcome)
			}
		}
		// The confirmation's lines (requested, denied on the CLI), then the
		// call's (refused).
		if !slices.Equal(outcomes, []string{audit.OutcomePending, audit.OutcomeDenied, audit.OutcomeDenied}) {
			t.Errorf("confirm outcomes %v; want pending, denied (the decision), denied (the call)", outcomes)
		}
		if d := es[slices.IndexFunc(es, func(e audit.Entry) bool { return e.Outcome == audit.OutcomeDenied })]; !strings.Contains(d.Reason, "decided on cli by ") || d.Confirmation != id {
			t.Errorf("the decision's entry %+v does not say where and who", d)
		}
	})

	t.Run("approval is bound to its call", func(t *testing.T) {
		s := c.Session(t, "main")
		first := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"first"}`)
		firstID := first.waitPending(t)
		second := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"second"}`)
		secondID := second.waitPending(t)
		if firstID == secondID {
			t.Fatal("two calls share a confirmation id")
		}
		byID := map[string]api.Confirmation{}
		for _, p := range cliConfirmations(t, c) {
			byID[p.ID] = p
		}
		if len(byID) != 2 || !strings.Contains(string(byID[firstID].Arguments), "first") || !strings.Contains(string(byID[secondID].Arguments), "second") {
			t.Fatalf("confirmations %+v", byID)
		}
		if byID[firstID].ArgsHash == byID[secondID].ArgsHash {
			t.Fatal("different arguments, same hash")
		}

		if out, errs, code := runCLI(t, c.Home, "confirm", "approve", firstID); code != 0 {
			t.Fatalf("confirm approve: exit %d\n%s%s", code, out, errs)
		}
		if res := mustOK(t, first.wait(t)); res["message"] != "first" {
			t.Fatalf("first call: %+v", res)
		}
		if second.exited() {
			t.Fatal("approving the first call finished the second")
		}

		// The first call's hash does not approve the second.
		_, err := c.Client.Decide(context.Background(), api.Decision{ID: secondID, Approve: true, ArgsHash: byID[firstID].ArgsHash, Surface: "cli"})
		if !errors.Is(err, api.ErrConflict) {
			t.Fatalf("approve with another call's hash: %v; want a conflict", err)
		}
		left := cliConfirmations(t, c)
		if len(left) != 1 || left[0].ID != secondID {
			t.Fatalf("after a refused approval: %+v; want %s still pending", left, secondID)
		}
		if second.exited() {
			t.Fatal("a refused approval ended the call")
		}
		if out, errs, code := runCLI(t, c.Home, "confirm", "deny", secondID); code != 0 {
			t.Fatalf("confirm deny: exit %d\n%s%s", code, out, errs)
		}
		wantError(t, second.wait(t), ipc.CodeConfirmationDenied, 5, "")
	})
}

// TestE2EHiddenArgumentsApproveNothing: when the sanitiser hides part of
// a call's arguments from the approving surfaces (a PEM block with no END
// line hides everything after it), the display cannot be approved — not
// by the CLI, not over the control API — because the person did not see
// what would run. carapace confirm show --raw shows it whole, and
// approve --raw approves exactly that.
func TestE2EHiddenArgumentsApproveNothing(t *testing.T) {
	t.Parallel()
	c := startCore(t, confirmConfig)
	s := c.Session(t, "main")
	message := "-----BEGIN RSA PRIVATE KEY-----\nthen wire the savings to IBAN XX00"
	bg := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":`+strconv.Quote(message)+`}`)
	id := bg.waitPending(t)

	list := cliConfirmations(t, c)
	if len(list) != 1 || list[0].ID != id {
		t.Fatalf("confirm list: %+v", list)
	}
	p := list[0]
	// What follows the BEGIN line is hidden: the line break and the text.
	if len(p.Hidden) != 1 || p.Hidden[0].Path != "message" || p.Hidden[0].Kind != "private-key" || p.Hidden[0].Chars != len("\nthen wire the savings to IBAN XX00") {
		t.Errorf("hidden = %+v; want the message's PEM block, %d characters", p.Hidden, len("\nthen wire the savings to IBAN XX00"))
	}
	if strings.Contains(string(p.Arguments), "wire the savings") {
		t.Fatalf("positive control: the display shows the text the sanitiser should hide: %s", p.Arguments)
	}

	// The CLI refuses to approve what it could not show, and says how.
	out, errs, code := runCLI(t, c.Home, "confirm", "approve", id[:8])
	if code != 1 || !strings.Contains(errs, "confirm show --raw "+id[:8]) || !strings.Contains(out, "message: 35 characters hidden (private-key)") {
		t.Fatalf("confirm approve of a hidden display: exit %d\n%s%s", code, out, errs)
	}
	// So does the core, over the control API, whatever a surface claims.
	_, err := c.Client.Decide(context.Background(), api.Decision{ID: id, Approve: true, ArgsHash: p.ArgsHash, Surface: "app"})
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "hidden") {
		t.Fatalf("approve over the control API without raw: %v; want a conflict that says it was hidden", err)
	}
	if bg.exited() || len(cliConfirmations(t, c)) != 1 {
		t.Fatal("a refused approval decided the confirmation")
	}

	// show --raw prints what runs, whole; approve --raw approves it.
	out, errs, code = runCLI(t, c.Home, "confirm", "show", "--raw", id[:8])
	if code != 0 || !strings.Contains(out, `then wire the savings to IBAN XX00`) || !strings.Contains(out, "exactly as they run") {
		t.Fatalf("confirm show --raw: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runCLI(t, c.Home, "confirm", "approve", "--raw", id[:8])
	if code != 0 || !strings.Contains(out, "then wire the savings") {
		t.Fatalf("confirm approve --raw: exit %d\n%s%s", code, out, errs)
	}
	// (The echo comes back sanitised, as every result does.)
	if res := mustOK(t, bg.wait(t)); res["confirmed"] != true {
		t.Fatalf("result %+v; want the call run after its approval", res)
	}
	text := auditText(t, c)
	for _, want := range []string{"approval on app refused", "were shown on the control API", "decided on cli"} {
		if !strings.Contains(text, want) {
			t.Errorf("the audit log lacks %q", want)
		}
	}
}

// cliConfirmations runs `carapace confirm list --json`.
func cliConfirmations(t *testing.T, c *testCore) []api.Confirmation {
	t.Helper()
	out, errs, code := runCLI(t, c.Home, "confirm", "list", "--json")
	if code != 0 {
		t.Fatalf("confirm list --json: exit %d\n%s", code, errs)
	}
	var list []api.Confirmation
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("confirm list --json is not JSON: %v\n%s", err, out)
	}
	return list
}

// bgIPC is a run of bin/ipc in the background.
type bgIPC struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr testutil.Buffer
	done   chan struct{}
	err    error
}

func startIPC(t *testing.T, socket string, args ...string) *bgIPC {
	t.Helper()
	bg := &bgIPC{done: make(chan struct{})}
	bg.cmd = exec.Command(bins.ipc, args...)
	bg.cmd.Env = []string{"CARAPACE_IPC_ENDPOINT=ipc://" + socket, "PATH=/usr/bin:/bin"}
	bg.cmd.Stdout, bg.cmd.Stderr = &bg.stdout, &bg.stderr
	if err := bg.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { bg.err = bg.cmd.Wait(); close(bg.done) }()
	t.Cleanup(func() {
		if !bg.exited() {
			_ = bg.cmd.Process.Kill()
			<-bg.done
		}
	})
	return bg
}

func (bg *bgIPC) exited() bool {
	select {
	case <-bg.done:
		return true
	default:
		return false
	}
}

// waitPending waits for ipc's status line and returns its confirmation id.
func (bg *bgIPC) waitPending(t *testing.T) string {
	t.Helper()
	var id string
	waitFor(t, "ipc's waiting_for_confirmation status line", func() bool {
		if bg.exited() {
			t.Fatalf("ipc exited before it was asked to wait: %v\nstdout %s\nstderr %s", bg.err, bg.stdout.String(), bg.stderr.String())
		}
		for _, line := range scanLines(bg.stderr.String()) {
			var st struct {
				Status       string    `json:"status"`
				Confirmation string    `json:"confirmation"`
				ExpiresAt    time.Time `json:"expires_at"`
			}
			if json.Unmarshal([]byte(line), &st) == nil && st.Status == "waiting_for_confirmation" && st.Confirmation != "" {
				if st.ExpiresAt.Before(time.Now()) {
					t.Fatalf("status line with an expiry in the past: %s", line)
				}
				id = st.Confirmation
				return true
			}
		}
		return false
	})
	return id
}

// wait waits for the run to end and parses it like runIPC does.
func (bg *bgIPC) wait(t *testing.T) ipcRun {
	t.Helper()
	select {
	case <-bg.done:
	case <-time.After(30 * time.Second):
		t.Fatal("ipc did not exit within 30s")
	}
	r := ipcRun{Stdout: bg.stdout.String(), Stderr: bg.stderr.String()}
	var ee *exec.ExitError
	switch {
	case bg.err == nil:
	case errors.As(bg.err, &ee):
		r.Code = ee.ExitCode()
	default:
		t.Fatalf("run ipc: %v", bg.err)
	}
	parseIPCRun(t, &r)
	return r
}

// ---- 5. identity cannot be spoofed ----

// rawDealer is a hostile client: a ZeroMQ DEALER with an identity of its
// choosing, sending wire messages that bin/ipc never would.
type rawDealer struct {
	sock   zmq4.Socket
	frames chan []byte
}

func dialRaw(t *testing.T, socket, identity string) *rawDealer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sock := zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity(identity)), zmq4.WithDialerMaxRetries(0),
		zmq4.WithLogger(log.New(io.Discard, "", 0)))
	if err := sock.Dial(zmtp.Scheme + "://" + socket); err != nil {
		cancel()
		t.Fatalf("dial %s: %v", socket, err)
	}
	d := &rawDealer{sock: sock, frames: make(chan []byte, 16)}
	go func() {
		for {
			msg, err := sock.Recv()
			if err != nil {
				return
			}
			if msg.Type == zmq4.CmdMsg || len(msg.Frames) == 0 {
				continue
			}
			d.frames <- msg.Frames[len(msg.Frames)-1]
		}
	}()
	t.Cleanup(func() { sock.Close(); cancel() })
	return d
}

// call sends wire and returns the final response.
func (d *rawDealer) call(t *testing.T, wire string) *ipc.Response {
	t.Helper()
	if err := d.sock.Send(zmq4.NewMsgString(wire)); err != nil {
		t.Fatalf("send: %v", err)
	}
	timeout := time.After(15 * time.Second)
	for {
		select {
		case f := <-d.frames:
			r, err := ipc.DecodeResponse(f)
			if err != nil {
				t.Fatalf("core sent an invalid envelope: %v\n%s", err, f)
			}
			if r.Type == ipc.TypeResponse {
				return r
			}
		case <-timeout:
			t.Fatalf("no answer to %s", wire)
		}
	}
}

func TestE2EIdentitySpoofing(t *testing.T) {
	t.Parallel()
	c := startCore(t, "")
	s := c.Session(t, "main")
	victim := c.Session(t, "admin")

	for _, claimed := range []string{"some-other-session", victim.ID} {
		t.Run(claimed, func(t *testing.T) {
			d := dialRaw(t, s.Socket, claimed)
			rejects := []struct{ name, wire, field, corr string }{
				{"group", `{"topic":"tool.invoke.get_session_info","correlation":"sp-group","arguments":{},"group":"admin"}`, "group", "sp-group"},
				{"source", `{"topic":"tool.invoke.get_session_info","correlation":"sp-source","arguments":{},"source":"core"}`, "source", "sp-source"},
				{"id", `{"topic":"tool.invoke.get_session_info","correlation":"sp-id","arguments":{},"id":"` + victim.ID + `"}`, "id", "sp-id"},
				{"version", `{"topic":"tool.invoke.get_session_info","correlation":"sp-version","arguments":{},"version":2}`, "version", "sp-version"},
				{"session first", `{"session":"` + victim.ID + `","topic":"tool.invoke.get_session_info","correlation":"sp-session","arguments":{}}`, "session", "sp-session"},
				{"duplicate topic", `{"topic":"tool.invoke.echo","topic":"tool.invoke.get_session_info","correlation":"sp-dup","arguments":{}}`, "topic", "sp-dup"},
				{"missing arguments", `{"topic":"tool.invoke.get_session_info","correlation":"sp-noargs"}`, "arguments", "sp-noargs"},
				{"arguments not an object", `{"topic":"tool.invoke.get_session_info","correlation":"sp-arr","arguments":[]}`, "arguments", "sp-arr"},
				{"bad correlation", `{"topic":"tool.invoke.get_session_info","correlation":"no spaces allowed","arguments":{}}`, "correlation", ""},
				// Rejected, but its first object's correlation is echoed so the client can match it.
				{"trailing bytes", `{"topic":"tool.invoke.get_session_info","correlation":"sp-trail","arguments":{}} {}`, "", "sp-trail"},
			}
			for _, rj := range rejects {
				r := d.call(t, rj.wire)
				e := r.Payload.Error
				if e == nil || e.Code != ipc.CodeValidationFailed || e.Stage != 1 || e.Field != rj.field {
					t.Errorf("%s: error %+v; want VALIDATION_FAILED stage 1 field %q", rj.name, e, rj.field)
					continue
				}
				if r.Source != "core" || r.Group != "main" || r.Correlation != rj.corr {
					t.Errorf("%s: envelope source %q group %q correlation %q", rj.name, r.Source, r.Group, r.Correlation)
				}
			}
			// The rejections are audited under the socket's session.
			for _, e := range c.Audit(t) {
				if e.Correlation == "sp-group" {
					if e.Session != s.ID || e.Group != "main" || e.Stage != audit.StageEnvelope || e.Field != "group" || e.Outcome != audit.OutcomeRejected {
						t.Errorf("stage-1 rejection audited as %+v", e)
					}
				}
			}

			corr := "sp-valid-" + strings.ReplaceAll(claimed, "-", "")
			r := d.call(t, `{"topic":"tool.invoke.get_session_info","correlation":"`+corr+`","arguments":{}}`)
			if r.Payload.Error != nil {
				t.Fatalf("valid request refused: %+v", r.Payload.Error)
			}
			var info map[string]any
			if err := json.Unmarshal(r.Payload.Result, &info); err != nil {
				t.Fatal(err)
			}
			if info["group"] != "main" || info["session"] != s.ID || r.Group != "main" {
				t.Fatalf("session info %v (envelope group %q); want group main, session %s", info, r.Group, s.ID)
			}
			var seen int
			for _, e := range c.Audit(t) {
				if e.Correlation == corr {
					seen++
					if e.Session != s.ID || e.Group != "main" {
						t.Errorf("request from a spoofing dealer audited as session %q group %q; want %s main", e.Session, e.Group, s.ID)
					}
				}
			}
			if seen == 0 {
				t.Fatal("the dealer's request is not in the audit log")
			}

			// A correlation reused for a different request is refused.
			r = d.call(t, `{"topic":"tool.invoke.echo","correlation":"`+corr+`","arguments":{"message":"again"}}`)
			if e := r.Payload.Error; e == nil || e.Code != ipc.CodeValidationFailed || e.Stage != 1 || e.Field != "correlation" {
				t.Fatalf("reused correlation: %+v", e)
			}
		})
	}
	// Whatever the dealer claimed, the victim session saw nothing.
	for _, e := range c.Audit(t) {
		if e.Session == victim.ID && e.Stage != audit.StageSession && e.Stage != audit.StageBrief {
			t.Errorf("entry in the victim's session: %+v", e)
		}
	}
	// And bin/ipc's own view agrees.
	info := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.get_session_info", `{}`))
	if info["group"] != "main" {
		t.Fatalf("get_session_info through ipc: %+v", info)
	}
}

// ---- 6. diagnostics are scoped to the session ----

func diagEntries(t *testing.T, res map[string]any) []map[string]any {
	t.Helper()
	raw, _ := res["entries"].([]any)
	var out []map[string]any
	for _, e := range raw {
		m, ok := e.(map[string]any)
		if !ok {
			t.Fatalf("diagnostic entry %v is not an object", e)
		}
		out = append(out, m)
	}
	return out
}

func TestE2EDiagnosticsIsolation(t *testing.T) {
	t.Parallel()
	c := startCore(t, "")
	a := c.Session(t, "alpha")
	b := c.Session(t, "beta")
	a2 := c.Session(t, "alpha")

	mustOK(t, runIPC(t, a.Socket, nil, "tool.invoke.tk_count", `{}`))
	corrA, _ := lastCall(t, c, a.ID, "tool.invoke.tk_count")
	mustOK(t, runIPC(t, b.Socket, nil, "tool.invoke.echo", `{"message":"b"}`))
	wantError(t, runIPC(t, b.Socket, nil, "tool.invoke.nope", `{}`), ipc.CodeUnknownTool, 2, "")

	trace := `{"correlation":"` + corrA + `"}`
	for name, sess := range map[string]api.Session{"other group": b, "same group": a2} {
		res := mustOK(t, runIPC(t, sess.Socket, nil, "tool.invoke.get_diagnostics", trace))
		if es := diagEntries(t, res); len(es) != 0 || res["handler_code"] != nil {
			t.Errorf("%s: session %s sees another session's trace: %+v", name, sess.ID, res)
		}
	}

	res := mustOK(t, runIPC(t, a.Socket, nil, "tool.invoke.get_diagnostics", trace))
	es := diagEntries(t, res)
	if res["mode"] != "trace" || len(es) < 2 {
		t.Fatalf("A's own trace: %+v", res)
	}
	for _, e := range es {
		if e["correlation"] != corrA || e["topic"] != "tool.invoke.tk_count" {
			t.Errorf("trace entry %v is not of %s", e, corrA)
		}
		if _, ok := e["session"]; ok {
			t.Errorf("trace entry shows a session: %v", e)
		}
	}

	var mine []string
	for _, e := range c.Audit(t) {
		if e.Session == b.ID && e.Correlation != "" {
			mine = append(mine, e.Correlation)
		}
	}
	res = mustOK(t, runIPC(t, b.Socket, nil, "tool.invoke.get_diagnostics", `{"last_n":100}`))
	es = diagEntries(t, res)
	if len(es) < 3 {
		t.Fatalf("B's recent requests: %+v", res)
	}
	for _, e := range es {
		corr, _ := e["correlation"].(string)
		if !slices.Contains(mine, corr) || e["topic"] == "tool.invoke.tk_count" {
			t.Errorf("B's diagnostics show an entry that is not B's: %v", e)
		}
	}
	res = mustOK(t, runIPC(t, b.Socket, nil, "tool.invoke.get_diagnostics", `{"last_n":5,"filter_outcome":"error"}`))
	es = diagEntries(t, res)
	if len(es) != 1 || es[0]["code"] != string(ipc.CodeUnknownTool) {
		t.Errorf("B's recent failures: %+v; want the one UNKNOWN_TOOL", res)
	}
	for _, sess := range []api.Session{a2} {
		res := mustOK(t, runIPC(t, sess.Socket, nil, "tool.invoke.get_diagnostics", `{"last_n":100}`))
		for _, e := range diagEntries(t, res) {
			if e["correlation"] == corrA {
				t.Errorf("A2's recent requests show A's: %v", e)
			}
		}
	}
}

// ---- 7. list_tools and get_session_info ----

func TestE2EListToolsAndSessionInfo(t *testing.T) {
	t.Parallel()
	c := startCore(t, pipelineConfig)
	names := func(t *testing.T, group string) []string {
		t.Helper()
		res := mustOK(t, runIPC(t, c.Session(t, group).Socket, nil, "tool.invoke.list_tools", `{}`))
		tools, _ := res["tools"].([]any)
		var out []string
		for _, x := range tools {
			m, _ := x.(map[string]any)
			name, _ := m["name"].(string)
			out = append(out, name)
			if m["topic"] != "tool.invoke."+name || m["arguments_schema"] == nil || m["risk_level"] == nil {
				t.Errorf("tool entry %v is incomplete", m)
			}
		}
		return out
	}
	mainTools := names(t, "main")
	for _, want := range []string{"echo", "echo_confirm", "list_tools", "get_session_info", "get_diagnostics"} {
		if !slices.Contains(mainTools, want) {
			t.Errorf("list_tools for main lacks %s: %v", want, mainTools)
		}
	}
	for _, hidden := range []string{"tk_count", "tk_fail"} {
		if slices.Contains(mainTools, hidden) {
			t.Errorf("list_tools for main shows %s, restricted to group other: %v", hidden, mainTools)
		}
	}
	otherTools := names(t, "other")
	for _, want := range []string{"echo", "tk_count", "tk_fail"} {
		if !slices.Contains(otherTools, want) {
			t.Errorf("list_tools for other lacks %s: %v", want, otherTools)
		}
	}

	s := c.Session(t, "other")
	info := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.get_session_info", `{}`))
	if info["group"] != "other" || info["session"] != s.ID {
		t.Errorf("session info %+v; want group other, session %s", info, s.ID)
	}
	plugins, _ := info["plugins"].(map[string]any)
	healthy, _ := plugins["healthy"].([]any)
	failed, ok := plugins["failed"].([]any)
	for _, p := range []string{"echo", "testkit"} {
		if !slices.Contains(healthy, any(p)) {
			t.Errorf("plugin %s not reported healthy: %+v", p, plugins)
		}
	}
	if !ok || len(failed) != 0 {
		t.Errorf("failed plugins %+v; want an empty list", plugins["failed"])
	}
	// An identity claimed in the arguments is refused, not honoured.
	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.get_session_info", `{"group":"main"}`), ipc.CodeValidationFailed, 3, "group")
}

// ---- 8. bin/ipc usage and client-side errors ----

func TestE2EIPCUsage(t *testing.T) {
	t.Parallel()
	c := startCore(t, "")
	s := c.Session(t, "main")

	run := func(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(bins.ipc, args...)
		cmd.Env = append([]string{"CARAPACE_IPC_ENDPOINT=ipc://" + s.Socket, "PATH=/usr/bin:/bin"}, env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(errb.String(), "goroutine ") || strings.Contains(errb.String(), "panic") {
			t.Fatalf("stack trace on stderr: %q", errb.String())
		}
		return out.String(), errb.String(), code
	}

	usage := []struct {
		name string
		env  []string
		args []string
		code int
		want string // on stderr, or stdout for exit 0
	}{
		{"no arguments", nil, nil, 2, "usage: ipc"},
		{"too many arguments", nil, []string{"tool.invoke.echo", "{}", "{}"}, 2, "usage: ipc"},
		{"flag as topic", nil, []string{"-x"}, 2, "usage: ipc"},
		{"help", nil, []string{"--help"}, 0, "usage: ipc"},
		{"-h", nil, []string{"-h"}, 0, "usage: ipc"},
		{"bad timeout", []string{"CARAPACE_IPC_TIMEOUT=garbage"}, []string{"tool.invoke.echo", `{"message":"x"}`}, 2, "CARAPACE_IPC_TIMEOUT"},
		{"negative timeout", []string{"CARAPACE_IPC_TIMEOUT=-5s"}, []string{"tool.invoke.echo", `{"message":"x"}`}, 2, "CARAPACE_IPC_TIMEOUT"},
		{"bad retry", []string{"CARAPACE_IPC_RETRY=soon"}, []string{"tool.invoke.echo", `{"message":"x"}`}, 2, "CARAPACE_IPC_RETRY"},
	}
	for _, u := range usage {
		t.Run(u.name, func(t *testing.T) {
			out, errs, code := run(t, u.env, u.args...)
			if code != u.code {
				t.Fatalf("exit %d; want %d\nstdout %s\nstderr %s", code, u.code, out, errs)
			}
			where := errs
			if code == 0 {
				where = out
				if errs != "" {
					t.Errorf("stderr %q on help", errs)
				}
			} else if out != "" {
				t.Errorf("stdout %q on a usage error", out)
			}
			if !strings.Contains(where, u.want) {
				t.Errorf("output %q lacks %q", where, u.want)
			}
		})
	}

	t.Run("invalid arguments never reach the core", func(t *testing.T) {
		for _, args := range []string{`{not json`, `[1,2]`, `"text"`, `{"message":"x"} trailing`} {
			r := runIPC(t, s.Socket, nil, "tool.invoke.echo", args)
			wantError(t, r, ipc.CodeValidationFailed, 0, "arguments")
		}
		r := runIPCStdin(t, s.Socket, nil, []byte(`{"message":`), "tool.invoke.echo", "-")
		wantError(t, r, ipc.CodeValidationFailed, 0, "arguments")
		for _, e := range c.Audit(t) {
			if e.Session == s.ID && e.Stage != audit.StageSession && e.Stage != audit.StageBrief {
				t.Errorf("a client-side rejection reached the core: %+v", e)
			}
		}
	})

	t.Run("arguments from stdin", func(t *testing.T) {
		r := runIPCStdin(t, s.Socket, nil, []byte("{\"message\": \"from stdin\",\n \"uppercase\": true}\n"), "tool.invoke.echo", "-")
		if res := mustOK(t, r); res["message"] != "FROM STDIN" {
			t.Fatalf("echo from stdin: %+v", res)
		}
		r = runIPC(t, s.Socket, nil, "tool.invoke.list_tools")
		if _, ok := mustOK(t, r)["tools"]; !ok {
			t.Fatalf("omitted arguments: %+v", r.Result)
		}
	})

	t.Run("unreachable core", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nobody.sock")
		start := time.Now()
		r := runIPC(t, missing, nil, "tool.invoke.echo", `{"message":"x"}`)
		took := time.Since(start)
		wantError(t, r, ipc.CodePluginUnavailable, 0, "")
		if !r.Err.Retriable {
			t.Errorf("unreachable core not retriable: %+v", r.Err)
		}
		if took > 20*time.Second {
			t.Errorf("ipc took %s to give up on a missing socket; want a few seconds, not its whole timeout", took)
		}
		if r.Stdout != "" {
			t.Errorf("stdout %q", r.Stdout)
		}
	})

	t.Run("bad endpoint", func(t *testing.T) {
		cmd := exec.Command(bins.ipc, "tool.invoke.echo", `{"message":"x"}`)
		cmd.Env = []string{"CARAPACE_IPC_ENDPOINT=tcp://127.0.0.1:5560", "PATH=/usr/bin:/bin"}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("tcp endpoint: %v, stderr %q; want exit 1", err, errb.String())
		}
		var e ipc.Error
		lines := scanLines(errb.String())
		if len(lines) == 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &e) != nil || e.Code != ipc.CodePluginUnavailable {
			t.Fatalf("tcp endpoint: stderr %q; want PLUGIN_UNAVAILABLE", errb.String())
		}
	})
}
