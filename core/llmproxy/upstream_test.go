package llmproxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/keychain"
)

func TestCheckUpstream(t *testing.T) {
	tests := []struct {
		url     string
		wantErr string // "" accepts
	}{
		{"https://api.anthropic.com", ""},
		{"https://gateway.example:8443/", ""},
		{"http://127.0.0.1:11434", ""},
		{"http://127.8.9.10:8080", ""},
		{"http://localhost:11434", ""},
		{"http://LOCALHOST.:11434", ""},
		{"http://[::1]:8080", ""},
		{"http://10.0.0.5:11434", "plain http is allowed only to a loopback address (127.0.0.0/8, ::1, localhost)"},
		{"http://ollama.lan:11434", "use https:// for ollama.lan"},
		{"http://localhost.evil.example", "plain http is allowed only to a loopback address"},
		{"http://0.0.0.0:11434", "plain http is allowed only to a loopback address"},
		{"http://[fe80::1%25eth0]:11434", "plain http is allowed only to a loopback address"},
		{"ftp://127.0.0.1", "want an https:// origin"},
		{"https://gateway.example/anthropic", "without a path"},
		{"https://u:hunter2@gateway.example", "user name or password"},
		{"https://", "has no host"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			err = CheckUpstream(u)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("err %v, want one containing %q", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), "hunter2"):
				t.Errorf("the refusal quotes the password: %v", err)
			}
		})
	}
}

// TestProvidersMatchKeychain: every provider can have a credential stored
// (auth set --llm NAME), and anthropic's is the key the proxy has always
// read.
func TestProvidersMatchKeychain(t *testing.T) {
	if !slices.Equal(ProviderNames(), keychain.LLMProviders) {
		t.Errorf("providers %v, keychain.LLMProviders %v", ProviderNames(), keychain.LLMProviders)
	}
	if k, err := keychain.LLMKey(ProviderAnthropic, false); err != nil || k != keychain.LLMKeyAPI {
		t.Errorf("anthropic's key %q (%v), want %q", k, err, keychain.LLMKeyAPI)
	}
	if _, err := keychain.LLMKey(ProviderCustom, true); err == nil {
		t.Error("--oauth for custom accepted")
	}
}

func TestFromStoreFor(t *testing.T) {
	store := fakeStore{"custom-api-key": "gw-token", keychain.LLMKeyAPI: apiSecret, "llamacpp-api-key": "fail"}
	tests := []struct {
		provider, auth string
		want           Credential
		wantErr        error
	}{
		{ProviderAnthropic, "", Credential{KindAPIKey, apiSecret}, nil},
		{ProviderCustom, AuthBearer, Credential{KindBearer, "gw-token"}, nil},
		{ProviderCustom, AuthAPIKey, Credential{KindAPIKey, "gw-token"}, nil},
		{ProviderOllama, AuthNone, Credential{Kind: KindNone}, nil},
		{ProviderOllama, AuthBearer, Credential{}, ErrNoCredential},
		{ProviderLlamaCpp, AuthBearer, Credential{}, errors.New("store fails")},
	}
	for _, tt := range tests {
		t.Run(tt.provider+"/"+tt.auth, func(t *testing.T) {
			got, err := FromStoreFor(store, tt.provider, tt.auth)(context.Background())
			switch {
			case tt.wantErr == nil && (err != nil || got != tt.want):
				t.Errorf("got %v (%v), want kind %s", got, err, tt.want.Kind)
			case tt.wantErr == ErrNoCredential && !errors.Is(err, ErrNoCredential):
				t.Errorf("err %v, want ErrNoCredential", err)
			case tt.wantErr != nil && tt.wantErr != ErrNoCredential && (err == nil || errors.Is(err, ErrNoCredential)):
				t.Errorf("err %v, want a store error", err)
			}
			if err == nil {
				if cerr := got.Check(); cerr != nil {
					t.Errorf("Check: %v", cerr)
				}
			}
		})
	}
}

// TestCredentialStyles: each style reaches the upstream as itself, and
// nothing the client sent as a credential does.
func TestCredentialStyles(t *testing.T) {
	const gwToken = "gw-token-REALSECRET-42"
	tests := []struct {
		name       string
		cred       Credential
		wantAPIKey string
		wantAuthz  string
	}{
		{"x-api-key", Credential{KindAPIKey, apiSecret}, apiSecret, ""},
		{"bearer", Credential{KindBearer, gwToken}, "", "Bearer " + gwToken},
		{"none", Credential{Kind: KindNone}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, replyJSON, func(o *Options) { o.Credential = staticCredential(tt.cred) })
			if resp, body := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody)); resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			reqs := h.api.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests upstream", len(reqs))
			}
			hd := reqs[0].Header
			if hd.Get("X-Api-Key") != tt.wantAPIKey || hd.Get("Authorization") != tt.wantAuthz {
				t.Errorf("x-api-key %q, authorization %q; want %q, %q", hd.Get("X-Api-Key"), hd.Get("Authorization"), tt.wantAPIKey, tt.wantAuthz)
			}
			if strings.Contains(hd.Get("Anthropic-Beta"), OAuthBeta) {
				t.Errorf("the OAuth beta was added for %s", tt.name)
			}
			for k, vs := range hd {
				for _, v := range vs {
					if strings.Contains(v, placeholder) || strings.Contains(v, clientBearer) {
						t.Errorf("the client's credential reached the upstream in %s", k)
					}
				}
			}
			if tt.cred.Secret != "" && strings.Contains(h.audit.jsonl(t)+h.logs.String(), tt.cred.Secret) {
				t.Error("the credential is in the audit or the log")
			}
		})
	}
}

// TestPlainHTTPLoopback: an Ollama-like upstream on plain http on
// loopback is reached with the default transport; one elsewhere is
// refused by New.
func TestPlainHTTPLoopback(t *testing.T) {
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		_, _ = io.Copy(io.Discard, r.Body)
		replyJSON(w, r)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	a := newMemAudit()
	p, err := New(Options{Upstream: u, Provider: ProviderOllama, Credential: staticCredential(Credential{Kind: KindNone}), Audit: a, Group: testGroup})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r := claudeRequest(t, "POST", "/v1/messages", messagesBody)
	r.RequestURI = "/v1/messages"
	p.ServeHTTP(rec, r)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), replyMarker) {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if seen.Get("X-Api-Key") != "" || seen.Get("Authorization") != "" {
		t.Errorf("a credential reached the keyless upstream: %v", seen)
	}
	_, err = New(Options{Upstream: &url.URL{Scheme: "http", Host: "192.168.1.20:11434"}, Credential: staticCredential(Credential{Kind: KindNone}), Audit: a})
	if err == nil || !errors.Is(err, ErrPlainHTTP) {
		t.Errorf("New with http to a LAN host: %v, want ErrPlainHTTP", err)
	}
}

// TestModelsAllowed: a group limited to some models gets only those; any
// other, a duplicate key naming another, or none at all is refused with
// the API's error shape and audited, and never sent.
func TestModelsAllowed(t *testing.T) {
	h := newHarness(t, replyJSON, func(o *Options) { o.Models = []string{"qwen3-coder", "claude-sonnet-4-5"} })
	tests := []struct {
		name, path, body string
		ok               bool
		wantNamed        string
	}{
		{"allowed", "/v1/messages", messagesBody, true, ""},
		{"allowed count_tokens", "/v1/messages/count_tokens", `{"model":"qwen3-coder","messages":[]}`, true, ""},
		{"other model", "/v1/messages", `{"model":"claude-opus-4-1","max_tokens":1,"messages":[]}`, false, `"claude-opus-4-1"`},
		{"other on count_tokens", "/v1/messages/count_tokens", `{"model":"gpt-oss:120b","messages":[]}`, false, `"gpt-oss:120b"`},
		{"duplicate key", "/v1/messages", `{"model":"qwen3-coder","Model":"claude-opus-4-1","messages":[]}`, false, `"claude-opus-4-1"`},
		{"no model", "/v1/messages", `{"max_tokens":1,"messages":[]}`, false, "no model"},
		{"not a string", "/v1/messages", `{"model":["qwen3-coder"],"messages":[]}`, false, "not a string"},
		{"injection", "/v1/messages", `{"model":"x\n` + promptMarker + `","messages":[]}`, false, `"(invalid)"`},
	}
	n := 0
	for _, tt := range tests {
		resp, body := h.do(t, claudeRequest(t, "POST", tt.path, tt.body))
		n++
		e := h.audit.wait(t, n)
		if tt.ok {
			if resp.StatusCode != 200 || e.Outcome != audit.OutcomeOK {
				t.Errorf("%s: status %d, audit %+v; want it forwarded", tt.name, resp.StatusCode, e)
			}
			continue
		}
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", tt.name, resp.StatusCode)
			continue
		}
		ae := decodeAPIError(t, body)
		if ae.Error.Type != "permission_error" || !strings.Contains(ae.Error.Message, "group family may use only the models qwen3-coder, claude-sonnet-4-5") || !strings.Contains(ae.Error.Message, tt.wantNamed) {
			t.Errorf("%s: error %+v", tt.name, ae.Error)
		}
		if e.Code != CodeModelNotAllowed || e.Outcome != audit.OutcomeRejected || !strings.Contains(e.Reason, tt.wantNamed) {
			t.Errorf("%s: audit %+v", tt.name, e)
		}
	}
	if got := len(h.api.requests()); got != 2 {
		t.Errorf("the upstream saw %d requests, want the 2 allowed", got)
	}
}

// TestUsageNotReported: a reply without usage (JSON or stream) is audited
// as not reported, not as 0 tokens, and charges nothing; Ollama's stream
// shape (an estimate in message_start, the counts in message_delta) is
// counted.
func TestUsageNotReported(t *testing.T) {
	const noUsageJSON = `{"id":"msg_1","type":"message","role":"assistant","model":"local-model","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}`
	const noUsageSSE = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"local-model\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	const ollamaSSE = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_a\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"qwen3-coder\",\"content\":[],\"usage\":{\"input_tokens\":7,\"output_tokens\":0}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":9,\"output_tokens\":4}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	tests := []struct {
		name, ctype, reply string
		wantReason         string
		wantUsed           int64
	}{
		{"json without usage", "application/json", noUsageJSON, "model local-model, status 200, usage not reported by the upstream; not charged to the budget", 0},
		{"stream without usage", "text/event-stream", noUsageSSE, "model local-model, status 200, usage not reported by the upstream; not charged to the budget", 0},
		{"ollama stream", "text/event-stream", ollamaSSE, "model qwen3-coder, status 200, 9 in / 4 out tokens", 13},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budget := NewDailyBudget(1000, nil)
			h := newHarness(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tt.ctype)
				_, _ = io.WriteString(w, tt.reply)
			}, func(o *Options) { o.Budget = budget })
			resp, body := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
			if resp.StatusCode != 200 || string(body) != tt.reply {
				t.Fatalf("status %d, body %q", resp.StatusCode, body)
			}
			e := h.audit.wait(t, 1)
			if !strings.HasSuffix(e.Reason, tt.wantReason) || strings.Contains(e.Reason, "0 in / 0 out") {
				t.Errorf("reason %q, want it to end %q", e.Reason, tt.wantReason)
			}
			if got := budget.Used(testGroup); got != tt.wantUsed {
				t.Errorf("budget charged %d, want %d", got, tt.wantUsed)
			}
		})
	}
}

func TestMissingModels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/tags" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `{"models":[{"name":"qwen3-coder:latest","model":"qwen3-coder:latest"},{"name":"gpt-oss:20b"}]}`)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ctx := context.Background()
	none := Credential{Kind: KindNone}
	have, err := OllamaModels(ctx, u, nil, none)
	if err != nil || !slices.Equal(have, []string{"qwen3-coder:latest", "gpt-oss:20b"}) {
		t.Fatalf("OllamaModels: %v, %v", have, err)
	}
	if missing, err := MissingModels(u.Host, have, []string{"qwen3-coder", "gpt-oss:20b"}); err != nil || len(missing) != 0 {
		t.Errorf("present models reported missing: %v, %v", missing, err)
	}
	missing, err := MissingModels(u.Host, have, []string{"qwen3-coder", "glm-4.7-flash", "gpt-oss:120b"})
	if !errors.Is(err, ErrModelMissing) || !slices.Equal(missing, []string{"glm-4.7-flash", "gpt-oss:120b"}) ||
		!strings.Contains(err.Error(), "run ollama pull glm-4.7-flash && ollama pull gpt-oss:120b") {
		t.Errorf("MissingModels: %v, %v", missing, err)
	}
	srv.Close()
	if _, err := OllamaModels(ctx, u, nil, none); err == nil || !strings.Contains(err.Error(), "could not reach Ollama") {
		t.Errorf("a stopped Ollama: %v", err)
	}
}
