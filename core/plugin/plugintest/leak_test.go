package plugintest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/sanitize"
	"github.com/carapace-dev/carapace/ipc"
)

func TestAssertNoCredentialLeak(t *testing.T) {
	const secret = "correct-horse-battery"
	type doc struct {
		Note string `json:"note"`
	}
	tests := []struct {
		name    string
		v       any
		secrets []string
		want    []string // substrings of the failures, one each; none: clean
	}{
		{name: "clean map", v: map[string]any{"a": "hello", "n": json.Number("1"), "l": []any{"x", true, nil}}, secrets: []string{secret}},
		{name: "clean string", v: "nothing to see"},
		{name: "empty secrets are ignored", v: "text", secrets: []string{""}},
		{name: "bearer", v: map[string]any{"h": []any{"ok", "Authorization: Bearer abcdef"}},
			want: []string{"value.h[1]: looks like a credential (authorization, bearer)"}},
		{name: "openai key", v: map[string]any{"cfg": map[string]any{"key": "sk-abcdefghijklmnopqrstuv"}},
			want: []string{"value.cfg.key: looks like a credential (openai-key)"}},
		{name: "github and slack", v: []any{"ghp_abcdefgh12345678", "xoxb-1234-abcd"},
			want: []string{"value[0]: looks like a credential (github-token)", "value[1]: looks like a credential (slack-token)"}},
		{name: "sensitive key", v: map[string]any{"api_key": "plain"}, want: []string{"value.api_key: looks like a credential (sensitive-key)"}},
		{name: "secret in a value", v: map[string]any{"msg": "the password is " + secret + "!"}, secrets: []string{"other", secret},
			want: []string{"value.msg: contains secret #2"}},
		{name: "secret in a key", v: map[string]any{"x" + secret: map[string]any{"y": 1}}, secrets: []string{secret},
			want: []string{"value: an object key contains secret #1"}},
		{name: "secret under a key with a secret", v: map[string]any{secret: secret}, secrets: []string{secret},
			want: []string{"value: an object key contains secret #1", "value.[key with secret #1]: contains secret #1"}},
		{name: "struct", v: doc{Note: "token=" + secret}, secrets: []string{secret},
			want: []string{"value.note: looks like a credential (assignment)", "value.note: contains secret #1"}},
		{name: "raw JSON", v: json.RawMessage(`{"a":"` + secret + `"}`), secrets: []string{secret}, want: []string{"value.a: contains secret #1"}},
		{name: "bytes", v: []byte("Bearer abcdef"), want: []string{"value: looks like a credential (bearer)"}},
		{name: "unencodable", v: map[string]any{"f": func() {}}, want: []string{"cannot be checked"}},

		{name: "clean result", v: Result{Value: map[string]any{"a": "b"}}, secrets: []string{secret}},
		{name: "result the core redacted", v: Result{Value: map[string]any{"a": "Bearer [REDACTED]"}, Redacted: []sanitize.Redaction{{Path: "result.a", Kind: "bearer"}}},
			want: []string{"result.a: the core's sanitiser had to redact a bearer"}},
		{name: "result with a secret", v: &Result{Value: map[string]any{"a": []any{secret}}}, secrets: []string{secret},
			want: []string{"result.a[0]: contains secret #1"}},
		{name: "error with a secret", v: Result{Code: ipc.CodeHandlerError, Message: "login as " + secret + " failed", Field: secret}, secrets: []string{secret},
			want: []string{"error.message: contains secret #1", "error.field: contains secret #1"}},
		{name: "detail is not checked", v: Result{Code: ipc.CodePluginError, Message: "Internal plugin error", Detail: secret}, secrets: []string{secret}},
		{name: "nil result", v: (*Result)(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var clean bool
			ft := fake(t, func(ft *fakeT) { clean = AssertNoCredentialLeak(ft, tt.v, tt.secrets...) })
			fs := ft.failures()
			if len(tt.want) == 0 {
				mustPass(t, ft)
				if !clean {
					t.Error("AssertNoCredentialLeak returned false for a clean value")
				}
				return
			}
			if clean {
				t.Error("AssertNoCredentialLeak returned true for a leak")
			}
			if len(fs) != len(tt.want) {
				t.Errorf("%d failures; want %d:\n%s", len(fs), len(tt.want), strings.Join(fs, "\n"))
			}
			mustFail(t, ft, tt.want...)
			for _, f := range fs {
				if strings.Contains(f, secret) || strings.Contains(f, "abcdef") || strings.Contains(f, "sk-abc") || strings.Contains(f, "ghp_") {
					t.Errorf("a failure message prints the secret: %s", f)
				}
			}
		})
	}
}

func TestAssertNoLeakOf(t *testing.T) {
	creds := NewFakeCredentials(map[string]string{"api-key": "k-9f8e7d6c", "empty": ""})
	ft := fake(t, func(ft *fakeT) {
		AssertNoLeakOf(ft, map[string]any{"debug": "called with k-9f8e7d6c"}, creds)
	})
	mustFail(t, ft, `value.debug: contains the value of credential "api-key"`)
	if strings.Contains(strings.Join(ft.failures(), ""), "k-9f8e7d6c") {
		t.Error("the failure prints the credential")
	}
	mustPass(t, fake(t, func(ft *fakeT) { AssertNoLeakOf(ft, map[string]any{"ok": "x"}, creds) }))
	mustPass(t, fake(t, func(ft *fakeT) { AssertNoLeakOf(ft, map[string]any{"ok": "x"}, nil) }))
	if creds.Reads() != nil {
		t.Error("the leak check counted as reading the credentials")
	}
}

func TestLeakFromAHandler(t *testing.T) {
	creds := NewFakeCredentials(map[string]string{"token": "tok-1234"})
	svc := &Services{Credentials: creds}
	h := &fnHandler{invoke: func(ctx context.Context, req *plugin.Request) (map[string]any, error) {
		tok, err := svc.ReadCredential(ctx, "token")
		if err != nil {
			return nil, err
		}
		switch req.Tool {
		case "debug":
			return map[string]any{"request": "GET /x?auth=" + tok}, nil
		case "shaped":
			return map[string]any{"key": "sk-ant-api03-abcdefghijklmnop"}, nil
		}
		return map[string]any{"ok": true}, nil
	}}
	hs := New(t, h, WithServices(svc))
	mustFail(t, fake(t, func(ft *fakeT) { AssertNoLeakOf(ft, hs.Invoke("debug", nil), creds) }),
		`result.request: contains the value of credential "token"`)
	mustFail(t, fake(t, func(ft *fakeT) { AssertNoCredentialLeak(ft, hs.Invoke("shaped", nil)) }),
		"result.key: the core's sanitiser had to redact a anthropic-key")
	mustPass(t, fake(t, func(ft *fakeT) { AssertNoLeakOf(ft, hs.Invoke("fine", nil), creds) }))
}

func TestAssertSuccessAndError(t *testing.T) {
	ok := Result{Value: map[string]any{"a": "b"}, JSON: json.RawMessage(`{"a":"b"}`)}
	bad := Result{Code: ipc.CodeHandlerError, Message: "nope", HandlerCode: "NOT_FOUND", Detail: "why"}
	if v := AssertSuccess(t, ok); v["a"] != "b" {
		t.Errorf("AssertSuccess returned %v", v)
	}
	if r := AssertError(t, bad, ipc.CodeHandlerError); r.Message != "nope" {
		t.Errorf("AssertError returned %v", r)
	}
	AssertError(t, bad, "")
	tests := []struct {
		name string
		f    func(tb *fakeT)
		want string
	}{
		{"success wanted", func(ft *fakeT) { AssertSuccess(ft, bad) }, "the tool call failed; want success:\nHANDLER_ERROR: nope (handler code NOT_FOUND)\ndetail: why"},
		{"error wanted", func(ft *fakeT) { AssertError(ft, ok, ipc.CodePluginError) }, `the tool call succeeded with {"a":"b"}; want an error PLUGIN_ERROR`},
		{"any error wanted", func(ft *fakeT) { AssertError(ft, ok, "") }, `the tool call succeeded with {"a":"b"}; want an error (any code)`},
		{"other code wanted", func(ft *fakeT) { AssertError(ft, bad, ipc.CodeUnknownTool) }, "the tool call failed with HANDLER_ERROR: nope (handler code NOT_FOUND)\ndetail: why; want UNKNOWN_TOOL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reached := false
			ft := fake(t, func(ft *fakeT) { tt.f(ft); reached = true })
			mustFail(t, ft, "fatal: "+strings.ReplaceAll(tt.want, `\n`, "\n"))
			if reached {
				t.Error("the assertion did not stop the test")
			}
		})
	}
}
