package llmproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/audit"
)

// TestCredentialInjected checks what reaches the model API: the real
// credential in the form its kind needs, the allowed headers, and none of
// what the container sent to authenticate or to route.
func TestCredentialInjected(t *testing.T) {
	tests := []struct {
		name string
		cred Credential
	}{
		{"api key", Credential{Kind: KindAPIKey, Secret: apiSecret}},
		{"oauth", Credential{Kind: KindOAuth, Secret: oauthSecret}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, replyJSON, func(o *Options) { o.Credential = staticCredential(tt.cred) })
			resp, body := h.do(t, claudeRequest(t, "POST", "/v1/messages?beta=true", messagesBody))
			if resp.StatusCode != http.StatusOK || string(body) != messageJSON {
				t.Fatalf("reply %d %q, want 200 and the API's body", resp.StatusCode, body)
			}
			seen := h.api.requests()
			if len(seen) != 1 {
				t.Fatalf("the API saw %d requests, want 1", len(seen))
			}
			got := seen[0]
			if got.Method != "POST" || got.Path != "/v1/messages" || got.RawQuery != "beta=true" {
				t.Errorf("the API saw %s %s?%s, want POST /v1/messages?beta=true", got.Method, got.Path, got.RawQuery)
			}
			if want := h.api.url(t).Host; got.Host != want {
				t.Errorf("Host %q, want the upstream's %q", got.Host, want)
			}
			if string(got.Body) != messagesBody {
				t.Errorf("body %q, want it unchanged", got.Body)
			}

			switch tt.cred.Kind {
			case KindAPIKey:
				if v := got.Header.Get("X-Api-Key"); v != apiSecret {
					t.Errorf("X-Api-Key = %q, want the stored key", v)
				}
				if v := got.Header.Values("Authorization"); len(v) != 0 {
					t.Errorf("Authorization = %q, want none with an API key", v)
				}
			case KindOAuth:
				if v := got.Header.Get("Authorization"); v != "Bearer "+oauthSecret {
					t.Errorf("Authorization = %q, want the stored token", v)
				}
				if v := got.Header.Values("X-Api-Key"); len(v) != 0 {
					t.Errorf("X-Api-Key = %q, want none with OAuth", v)
				}
			}
			wantBeta := "claude-code-20250219,interleaved-thinking-2025-05-14"
			if tt.cred.Kind == KindOAuth {
				wantBeta += "," + OAuthBeta
			}
			if v := got.Header.Values("Anthropic-Beta"); len(v) != 1 || v[0] != wantBeta {
				t.Errorf("Anthropic-Beta = %q, want [%q] (merged, deduplicated, no network betas)", v, wantBeta)
			}

			for k, vs := range got.Header {
				for _, v := range vs {
					for _, s := range []string{placeholder, clientBearer, cookieValue} {
						if strings.Contains(v, s) {
							t.Errorf("header %s carries the client's %q", k, s)
						}
					}
				}
			}
			for _, k := range []string{"Cookie", "Proxy-Authorization", "X-Forwarded-For", "Forwarded", "X-Evil", "Te"} {
				if v := got.Header.Values(k); len(v) != 0 {
					t.Errorf("%s = %q reached the API", k, v)
				}
			}
			for k, want := range map[string]string{
				"Anthropic-Version":        "2023-06-01",
				"Content-Type":             "application/json",
				"User-Agent":               "claude-cli/2.1.0 (external, cli)",
				"X-App":                    "cli",
				"X-Stainless-Os":           "Linux",
				"X-Claude-Code-Session-Id": "cc-session-1",
				"Accept-Encoding":          "identity",
				"Content-Length":           strconv.Itoa(len(messagesBody)),
			} {
				if v := got.Header.Get(k); v != want {
					t.Errorf("%s = %q, want %q", k, v, want)
				}
			}
		})
	}
}

// TestCredentialReadPerCall checks that a new credential is used from the
// next request on, without a restart.
func TestCredentialReadPerCall(t *testing.T) {
	var key atomic.Value
	key.Store("sk-ant-first")
	var calls atomic.Int32
	h := newHarness(t, replyJSON, func(o *Options) {
		o.Credential = func(context.Context) (Credential, error) {
			calls.Add(1)
			return Credential{Kind: KindAPIKey, Secret: key.Load().(string)}, nil
		}
	})
	h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
	key.Store("sk-ant-second")
	h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
	seen := h.api.requests()
	if len(seen) != 2 || seen[0].Header.Get("X-Api-Key") != "sk-ant-first" || seen[1].Header.Get("X-Api-Key") != "sk-ant-second" {
		t.Fatalf("keys seen %q, want the first then the second", []string{seen[0].Header.Get("X-Api-Key"), seen[len(seen)-1].Header.Get("X-Api-Key")})
	}
	if calls.Load() != 2 {
		t.Errorf("the credential was read %d times, want once per request", calls.Load())
	}
}

// TestAllowedEndpoints checks every allowed endpoint passes.
func TestAllowedEndpoints(t *testing.T) {
	tests := []struct{ method, target, body string }{
		{"POST", "/v1/messages", messagesBody},
		{"POST", "/v1/messages?beta=true", messagesBody},
		{"POST", "/v1/messages/count_tokens?beta=true", messagesBody},
		{"GET", "/v1/models", ""},
		{"GET", "/v1/models?limit=20", ""},
		{"GET", "/v1/models/claude-sonnet-4-5-20250929", ""},
	}
	h := newHarness(t, replyJSON, func(o *Options) { o.RequestsPerMinute = 600 })
	for i, tt := range tests {
		resp, _ := rawRequest(t, h.sock, tt.method, tt.target, tt.body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s %s: status %d, want 200", tt.method, tt.target, resp.StatusCode)
		}
		seen := h.api.requests()
		if len(seen) != i+1 {
			t.Fatalf("%s %s: the API saw %d requests, want %d", tt.method, tt.target, len(seen), i+1)
		}
		path, query, _ := strings.Cut(tt.target, "?")
		if got := seen[i]; got.Method != tt.method || got.Path != path || got.RawQuery != query || string(got.Body) != tt.body {
			t.Errorf("%s %s: the API saw %s %s?%s body %q", tt.method, tt.target, got.Method, got.Path, got.RawQuery, got.Body)
		}
	}
}

// TestRefused checks that paths, methods and request forms outside the
// allowed endpoints are refused in the API's error shape, audited, and
// never reach the model API.
func TestRefused(t *testing.T) {
	tests := []struct {
		method, target string
		status         int
		errType        string
	}{
		{"GET", "/v1/messages", 405, "invalid_request_error"},
		{"PUT", "/v1/messages", 405, "invalid_request_error"},
		{"DELETE", "/v1/models/claude-sonnet-4-5", 405, "invalid_request_error"},
		{"POST", "/v1/models", 405, "invalid_request_error"},
		{"POST", "/v1/complete", 403, "permission_error"},
		{"POST", "/v1/files", 403, "permission_error"},
		{"GET", "/v1/files", 403, "permission_error"},
		{"POST", "/v1/messages/batches", 403, "permission_error"},
		{"GET", "/v1/messages/batches/msgbatch_1/results", 403, "permission_error"},
		{"POST", "/v1/messages/../files", 403, "permission_error"},
		{"POST", "/v1/messages/./count_tokens", 403, "permission_error"},
		{"POST", "//v1/messages", 403, "permission_error"},
		{"POST", "/v1//messages", 403, "permission_error"},
		{"POST", "/v1/messages/", 403, "permission_error"},
		{"POST", "/V1/messages", 403, "permission_error"},
		{"POST", "/v1/messages%2F..%2Ffiles", 403, "permission_error"},
		{"POST", "/v1/messages/%2e%2e/files", 403, "permission_error"},
		{"POST", "/v1/%6messages", 400, ""}, // bad escape: net/http refuses it before the proxy
		{"POST", "/v1/%6Dessages", 403, "permission_error"},
		{"GET", "/v1/models/%2e%2e", 403, "permission_error"},
		{"GET", "/v1/models/..", 403, "permission_error"},
		{"GET", "/v1/models/.", 403, "permission_error"},
		{"GET", "/v1/models/../files", 403, "permission_error"},
		{"GET", "/v1/models/a/b", 403, "permission_error"},
		{"POST", "/v1/messages;jsessionid=1", 403, "permission_error"},
		{"POST", "/v1/organizations/usage", 403, "permission_error"},
		{"POST", "/api/oauth/usage", 403, "permission_error"},
		{"HEAD", "/", 403, "permission_error"},
		{"POST", "http://evil.example/v1/messages", 403, "permission_error"},
		{"POST", "https://api.anthropic.com/v1/messages", 403, "permission_error"},
		{"POST", "/v1/messages?" + strings.Repeat("a", maxQuery+1), 403, "permission_error"},
	}
	h := newHarness(t, replyJSON, nil)
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target[:min(len(tt.target), 60)], func(t *testing.T) {
			before := len(h.audit.finals())
			resp, body := rawRequest(t, h.sock, tt.method, tt.target, messagesBody)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.errType == "" {
				return
			}
			if tt.method != "HEAD" {
				if e := decodeAPIError(t, body); e.Error.Type != tt.errType || !strings.Contains(e.Error.Message, "Carapace allows only") {
					t.Errorf("error %+v, want %s saying what Carapace allows", e.Error, tt.errType)
				}
			}
			if tt.status == 405 && resp.Header.Get("Allow") == "" {
				t.Error("a 405 without Allow")
			}
			e := h.audit.wait(t, before+1)
			if e.Outcome != audit.OutcomeRejected || e.Code != CodeNotAllowed || e.Stage != StageLLM || e.Session != testSession || e.Group != testGroup {
				t.Errorf("audit entry %+v, want a rejected %s entry of the session", e, CodeNotAllowed)
			}
		})
	}
	if n := len(h.api.requests()); n != 0 {
		t.Errorf("the API saw %d refused requests: %+v", n, h.api.requests())
	}
}

// sseStream is a streamed Messages reply, cut after its first event:
// message_start (10 fresh input tokens, 5 read from the cache), then the
// rest with the final output count (42).
var (
	sseFirst = "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-1","content":[],"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":5,"output_tokens":1}}}` + "\n\n"
	sseRest = "event: content_block_start\n" +
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
		"event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + replyMarker + `"}}` + "\n\n" +
		"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\n" +
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":42}}` + "\n\n" +
		"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"
)

// TestStreamIncremental checks that a stream's events reach the client as
// the API sends them: the fake API sends message_start and then waits until
// the client has received it through the proxy before it sends the rest.
// A proxy that buffered would never deliver the first event. It also checks
// the tokens read from the stream.
func TestStreamIncremental(t *testing.T) {
	release := make(chan struct{})
	budget := NewDailyBudget(0, nil)
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, sseFirst)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, sseRest)
	}, func(o *Options) { o.Budget = budget })

	// The client side runs apart so that a proxy holding back the headers
	// or the first event cannot block the test: the guard below fails it.
	type firstEvent struct {
		resp  *http.Response
		br    *bufio.Reader
		event string
		err   error
	}
	first := make(chan firstEvent, 1)
	req := claudeRequest(t, "POST", "/v1/messages?beta=true", strings.Replace(messagesBody, `"max_tokens"`, `"stream":true,"max_tokens"`, 1))
	go func() {
		resp, err := h.client.Do(req)
		if err != nil {
			first <- firstEvent{err: err}
			return
		}
		br := bufio.NewReader(resp.Body)
		var b strings.Builder
		for {
			line, err := br.ReadString('\n')
			b.WriteString(line)
			if err != nil || line == "\n" {
				first <- firstEvent{resp: resp, br: br, event: b.String(), err: err}
				return
			}
		}
	}()
	var got firstEvent
	select {
	case got = <-first:
	case <-time.After(30 * time.Second): // a failure guard: the API waits for us, so only holding back gets here
		close(release)
		t.Fatal("message_start did not arrive before the API sent the rest: the proxy holds the stream back")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	resp, br := got.resp, got.br
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q, want an event stream", ct)
	}
	if got.event != sseFirst {
		t.Fatalf("first event %q, want %q", got.event, sseFirst)
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if string(rest) != sseRest {
		t.Fatalf("rest of the stream %q, want %q", rest, sseRest)
	}

	e := h.audit.wait(t, 1)
	if e.Outcome != audit.OutcomeOK || !strings.Contains(e.Reason, "model claude-opus-4-1, status 200, 15 in / 42 out tokens (5 cache read, 0 cache write)") {
		t.Errorf("audit %+v, want ok with the stream's model and tokens", e)
	}
	if got := budget.Used(testGroup); got != 57 {
		t.Errorf("budget charged %d tokens, want 57", got)
	}
}

// TestTokensFromJSON checks the tokens read from a non-streamed reply and
// the audit entry's fields.
func TestTokensFromJSON(t *testing.T) {
	budget := NewDailyBudget(0, nil)
	h := newHarness(t, replyJSON, func(o *Options) { o.Budget = budget })
	h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
	e := h.audit.wait(t, 1)
	want := "POST /v1/messages: model claude-sonnet-4-5, status 200, 150 in / 50 out tokens (30 cache read, 20 cache write)"
	if e.Reason != want {
		t.Errorf("reason %q, want %q", e.Reason, want)
	}
	if e.Outcome != audit.OutcomeOK || e.Stage != StageLLM || e.Session != testSession || e.Group != testGroup || e.Source != "agent" || e.ID == "" || e.DurationMS <= 0 {
		t.Errorf("entry %+v lacks a field", e)
	}
	routed := h.audit.all()[0]
	if routed.Outcome != audit.OutcomeRouted || routed.ID != e.ID {
		t.Errorf("first entry %+v, want the routed entry of the same call", routed)
	}
	if got := budget.Used(testGroup); got != 200 {
		t.Errorf("budget charged %d tokens, want 200", got)
	}

	// count_tokens and models replies are not usage.
	h.do(t, claudeRequest(t, "POST", "/v1/messages/count_tokens", messagesBody))
	h.do(t, claudeRequest(t, "GET", "/v1/models", ""))
	h.audit.wait(t, 3)
	if got := budget.Used(testGroup); got != 200 {
		t.Errorf("budget charged %d tokens after count_tokens and models, want still 200", got)
	}
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestBudget checks that a spent budget refuses the next call with the
// API's rate-limit shape, and that it resets the next day.
func TestBudget(t *testing.T) {
	clk := &clock{now: time.Date(2026, 3, 10, 22, 0, 0, 0, time.Local)}
	budget := NewDailyBudget(100, clk.Now)
	h := newHarness(t, replyJSON, func(o *Options) { o.Budget = budget })

	if resp, _ := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody)); resp.StatusCode != 200 {
		t.Fatalf("first call %d, want 200", resp.StatusCode)
	}
	h.audit.wait(t, 1) // the call is charged before it is audited
	resp, body := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("over budget: %d, want 429", resp.StatusCode)
	}
	e := decodeAPIError(t, body)
	if want := "Carapace: the daily token budget of group family is spent; it resets at midnight"; e.Error.Type != "rate_limit_error" || e.Error.Message != want {
		t.Errorf("error %+v, want rate_limit_error %q", e.Error, want)
	}
	if resp.Header.Get("X-Should-Retry") != "false" {
		t.Error("a spent budget must tell Claude Code not to retry")
	}
	if ra := resp.Header.Get("Retry-After"); ra != strconv.Itoa(2*3600) {
		t.Errorf("Retry-After %q, want the 7200 s until midnight", ra)
	}
	if a := h.audit.wait(t, 2); a.Outcome != audit.OutcomeRejected || a.Code != CodeBudget {
		t.Errorf("audit %+v, want a rejected %s", a, CodeBudget)
	}
	if n := len(h.api.requests()); n != 1 {
		t.Errorf("the API saw %d requests, want only the first", n)
	}
	// Not a Messages call: not refused.
	if resp, _ := h.do(t, claudeRequest(t, "GET", "/v1/models", "")); resp.StatusCode != 200 {
		t.Errorf("models over budget: %d, want 200", resp.StatusCode)
	}

	clk.add(3 * time.Hour) // 01:00 the next day
	if resp, _ := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody)); resp.StatusCode != 200 {
		t.Errorf("the next day: %d, want 200", resp.StatusCode)
	}
}

// TestRate checks the session's request rate.
func TestRate(t *testing.T) {
	h := newHarness(t, replyJSON, func(o *Options) { o.RequestsPerMinute = 1 })
	if resp, _ := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody)); resp.StatusCode != 200 {
		t.Fatalf("first call %d, want 200", resp.StatusCode)
	}
	resp, body := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second call %d, want 429", resp.StatusCode)
	}
	if e := decodeAPIError(t, body); e.Error.Type != "rate_limit_error" {
		t.Errorf("error type %q, want rate_limit_error", e.Error.Type)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 60 {
		t.Errorf("Retry-After %q, want 1-60 s", resp.Header.Get("Retry-After"))
	}
	if a := h.audit.wait(t, 2); a.Outcome != audit.OutcomeRejected || a.Code != CodeRateLimited {
		t.Errorf("audit %+v, want a rejected %s", a, CodeRateLimited)
	}
	if n := len(h.api.requests()); n != 1 {
		t.Errorf("the API saw %d requests, want 1", n)
	}
}

// TestUpstreamErrorsRelayed checks that the API's own errors reach the
// client unchanged, with the headers Claude Code's retries read.
func TestUpstreamErrorsRelayed(t *testing.T) {
	tests := []struct {
		status  int
		errType string
	}{
		{500, "api_error"},
		{529, "overloaded_error"},
		{400, "invalid_request_error"},
		{401, "authentication_error"},
		{429, "rate_limit_error"},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			reply := fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":"upstream says %d"},"request_id":"req_x"}`, tt.errType, tt.status)
			h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Should-Retry", "true")
				w.Header().Set("Retry-After", "3")
				w.WriteHeader(tt.status)
				io.WriteString(w, reply)
			}, nil)
			resp, body := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
			if resp.StatusCode != tt.status || string(body) != reply {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, body, tt.status, reply)
			}
			if resp.Header.Get("X-Should-Retry") != "true" || resp.Header.Get("Retry-After") != "3" {
				t.Errorf("retry headers not relayed: %v", resp.Header)
			}
			e := h.audit.wait(t, 1)
			if e.Outcome != audit.OutcomeError || e.Code != CodeUpstream ||
				!strings.Contains(e.Reason, fmt.Sprintf("status %d", tt.status)) || !strings.Contains(e.Reason, tt.errType) ||
				!strings.Contains(e.Reason, "model claude-sonnet-4-5") {
				t.Errorf("audit %+v, want an error with the status, the error type and the request's model", e)
			}
		})
	}
}

// TestUpstreamDown checks a model API that cannot be reached: 502 in the
// API's shape, with the cause in the audit only.
func TestUpstreamDown(t *testing.T) {
	h := newHarness(t, replyJSON, nil)
	h.api.srv.Close()
	resp, body := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	if e := decodeAPIError(t, body); e.Error.Type != "api_error" || e.Error.Message != "Carapace could not reach the model API" {
		t.Errorf("error %+v", e.Error)
	}
	for _, s := range leaks {
		if strings.Contains(string(body), s) || strings.Contains(fmt.Sprint(resp.Header), s) {
			t.Errorf("the reply carries %q", s)
		}
	}
	if e := h.audit.wait(t, 1); e.Outcome != audit.OutcomeError || e.Code != CodeUnreachable || !strings.Contains(e.Reason, "could not reach the model API: ") {
		t.Errorf("audit %+v, want %s with the cause", e, CodeUnreachable)
	}
}

// TestTLSVerified checks that the default transport verifies the API's
// certificate: the fake API's is trusted only by the tests' transport, so
// a proxy with the default one must fail before sending anything.
func TestTLSVerified(t *testing.T) {
	h := newHarness(t, replyJSON, func(o *Options) { o.Transport = nil })
	resp, body := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d %q, want 502", resp.StatusCode, body)
	}
	if n := len(h.api.requests()); n != 0 {
		t.Fatalf("the API received %d requests over an unverified connection", n)
	}
	if e := h.audit.wait(t, 1); e.Code != CodeUnreachable || !strings.Contains(e.Reason, "certificate") {
		t.Errorf("audit %+v, want a certificate failure", e)
	}
}

func TestNewRefuses(t *testing.T) {
	insecure := NewTransport(nil)
	insecure.TLSClientConfig.InsecureSkipVerify = true
	base := func() Options {
		return Options{Credential: staticCredential(Credential{Kind: KindAPIKey, Secret: apiSecret}), Audit: newMemAudit()}
	}
	tests := []struct {
		name   string
		mutate func(*Options)
	}{
		{"no credential", func(o *Options) { o.Credential = nil }},
		{"no audit", func(o *Options) { o.Audit = nil }},
		{"insecure transport", func(o *Options) { o.Transport = insecure }},
		{"http upstream", func(o *Options) { o.Upstream = &url.URL{Scheme: "http", Host: "api.anthropic.com"} }},
		{"upstream with a path", func(o *Options) { o.Upstream = &url.URL{Scheme: "https", Host: "api.anthropic.com", Path: "/v1"} }},
		{"upstream with user", func(o *Options) {
			o.Upstream = &url.URL{Scheme: "https", Host: "api.anthropic.com", User: url.UserPassword("u", "p")}
		}},
		{"upstream without host", func(o *Options) { o.Upstream = &url.URL{Scheme: "https"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.mutate(&o)
			if _, err := New(o); err == nil {
				t.Error("New succeeded")
			}
		})
	}
	if _, err := New(base()); err != nil {
		t.Errorf("New with the defaults: %v", err)
	}
}

// TestTooLarge checks the request body bound, announced or not.
func TestTooLarge(t *testing.T) {
	h := newHarness(t, replyJSON, func(o *Options) { o.MaxRequestBytes = 1024 })
	big := `{"model":"claude-sonnet-4-5","pad":"` + strings.Repeat("x", 2048) + `"}`
	for i, chunked := range []bool{false, true} {
		r := claudeRequest(t, "POST", "/v1/messages", big)
		if chunked {
			r.Body = io.NopCloser(io.MultiReader(strings.NewReader(big)))
			r.ContentLength = -1
		}
		resp, body := h.do(t, r)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked=%v: status %d, want 413", chunked, resp.StatusCode)
		}
		if e := decodeAPIError(t, body); e.Error.Type != "request_too_large" {
			t.Errorf("chunked=%v: error type %q", chunked, e.Error.Type)
		}
		if e := h.audit.wait(t, i+1); e.Code != CodeTooLarge || e.Outcome != audit.OutcomeRejected {
			t.Errorf("chunked=%v: audit %+v", chunked, e)
		}
	}
	if n := len(h.api.requests()); n != 0 {
		t.Errorf("the API saw %d requests", n)
	}
	// At the bound passes.
	ok := `{"model":"m","pad":"` + strings.Repeat("x", 1024-len(`{"model":"m","pad":""}`)) + `"}`
	if resp, _ := h.do(t, claudeRequest(t, "POST", "/v1/messages", ok)); resp.StatusCode != 200 {
		t.Errorf("a body of exactly the bound: %d", resp.StatusCode)
	}
}

// TestCredentialMissing checks the answer when no credential is stored or
// the store fails: nothing is sent, and the user learns what to do without
// the detail.
func TestCredentialMissing(t *testing.T) {
	tests := []struct {
		name    string
		cred    func(context.Context) (Credential, error)
		status  int
		errType string
		code    string
	}{
		{"not stored", FromStore(fakeStore{}), 401, "authentication_error", CodeNoCredential},
		{"store fails", func(context.Context) (Credential, error) {
			return Credential{}, errors.New("keychain locked")
		}, 500, "api_error", CodeCredential},
		{"malformed", staticCredential(Credential{Kind: KindAPIKey, Secret: "sk-ant\r\nX-Evil: 1"}), 500, "api_error", CodeCredential},
		{"unknown kind", staticCredential(Credential{Kind: "basic", Secret: apiSecret}), 500, "api_error", CodeCredential},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, replyJSON, func(o *Options) { o.Credential = tt.cred })
			resp, body := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			e := decodeAPIError(t, body)
			if e.Error.Type != tt.errType || strings.Contains(e.Error.Message, "keychain locked") {
				t.Errorf("error %+v", e.Error)
			}
			if tt.code == CodeNoCredential && !strings.Contains(e.Error.Message, "carapace auth set --llm anthropic") {
				t.Errorf("message %q does not say how to store a credential", e.Error.Message)
			}
			if a := h.audit.wait(t, 1); a.Code != tt.code {
				t.Errorf("audit %+v, want %s", a, tt.code)
			}
			if n := len(h.api.requests()); n != 0 {
				t.Errorf("the API saw %d requests", n)
			}
		})
	}
}

// TestAuditFailsClosed checks that a call whose routed entry cannot be
// written is not sent.
func TestAuditFailsClosed(t *testing.T) {
	h := newHarness(t, replyJSON, nil)
	h.audit.failWrite = func(e *audit.Entry) bool { return e.Outcome == audit.OutcomeRouted }
	resp, body := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", resp.StatusCode)
	}
	decodeAPIError(t, body)
	if n := len(h.api.requests()); n != 0 {
		t.Errorf("the API saw %d requests without an audit entry", n)
	}
}

// TestResponseHeaders checks that only the listed response headers reach
// the container.
func TestResponseHeaders(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Set-Cookie", "__cf_bm=abc; path=/")
		hd.Set("Anthropic-Organization-Id", "org-123")
		hd.Set("Anthropic-Ratelimit-Unified-Status", "allowed")
		hd.Set("Anthropic-Ratelimit-Tokens-Remaining", "1000")
		hd.Set("Request-Id", "req_1")
		hd.Set("Server", "cloudflare")
		hd.Set("Via", "1.1 google")
		hd.Set("Strict-Transport-Security", "max-age=1")
		replyJSON(w, r)
	}, nil)
	resp, _ := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
	for _, k := range []string{"Anthropic-Ratelimit-Unified-Status", "Anthropic-Ratelimit-Tokens-Remaining", "Request-Id", "Content-Type", "Content-Length"} {
		if resp.Header.Get(k) == "" {
			t.Errorf("%s was not relayed", k)
		}
	}
	for _, k := range []string{"Set-Cookie", "Anthropic-Organization-Id", "Server", "Via", "Strict-Transport-Security"} {
		if v := resp.Header.Values(k); len(v) != 0 {
			t.Errorf("%s = %q was relayed", k, v)
		}
	}
}

// TestClientGoesAway checks a client that leaves mid-stream: the call to
// the API is cancelled, and the audit records it with the input tokens the
// stream had reported.
func TestClientGoesAway(t *testing.T) {
	upstreamDone := make(chan struct{})
	budget := NewDailyBudget(0, nil)
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(upstreamDone)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sseFirst)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // only the proxy cancelling ends this
	}, func(o *Options) { o.Budget = budget })
	resp, err := h.client.Do(claudeRequest(t, "POST", "/v1/messages", messagesBody))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('}'); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h.client.CloseIdleConnections()
	<-upstreamDone
	e := h.audit.wait(t, 1)
	if e.Outcome != audit.OutcomeError || e.Code != CodeCanceled || !strings.Contains(e.Reason, "model claude-opus-4-1") {
		t.Errorf("audit %+v, want %s with the model", e, CodeCanceled)
	}
	if got := budget.Used(testGroup); got != 16 {
		t.Errorf("budget charged %d, want the 16 tokens message_start reported", got)
	}
}

// TestStreamErrorEvent checks an error event in a stream (an overload
// after the stream started).
func TestStreamErrorEvent(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sseFirst+"event: error\n"+`data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`+"\n\n")
	}, nil)
	resp, body := h.do(t, claudeRequest(t, "POST", "/v1/messages", messagesBody))
	if resp.StatusCode != 200 || !strings.Contains(string(body), "overloaded_error") {
		t.Fatalf("got %d %q, want the stream relayed", resp.StatusCode, body)
	}
	if e := h.audit.wait(t, 1); e.Outcome != audit.OutcomeError || e.Code != CodeStream || !strings.Contains(e.Reason, "overloaded_error") {
		t.Errorf("audit %+v, want %s naming the error", e, CodeStream)
	}
}

// TestStreamBreaksOff checks an API connection that dies mid-stream: the
// client's connection is broken too rather than ended as if whole.
func TestStreamBreaksOff(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sseFirst)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the fake API's connection drops
	}, nil)
	resp, err := h.client.Do(claudeRequest(t, "POST", "/v1/messages", messagesBody))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the client read a whole reply from a broken stream")
	}
	if e := h.audit.wait(t, 1); e.Code != CodeStream || !strings.Contains(e.Reason, "broke off") {
		t.Errorf("audit %+v, want %s", e, CodeStream)
	}
}

// TestRejectionsThrottled checks that a flood of refused requests is
// answered in full but audited only up to the bound, with a count.
func TestRejectionsThrottled(t *testing.T) {
	h := newHarness(t, replyJSON, func(o *Options) { o.RejectionsPerMinute = 6 }) // burst 1
	for range 5 {
		if resp, _ := rawRequest(t, h.sock, "POST", "/v1/files", ""); resp.StatusCode != 403 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	// One from the budget and one sample from the per-second limit: a
	// third within the same second would need more than the test's
	// speed allows, so expect 2 and at most 3.
	entries := h.audit.all()
	if len(entries) < 2 || len(entries) > 3 {
		t.Fatalf("%d audit entries for 5 refusals, want 2 or 3", len(entries))
	}
	h.proxy.rejects.mu.Lock()
	suppressed := h.proxy.rejects.suppressed
	h.proxy.rejects.mu.Unlock()
	if suppressed+len(entries) != 5 {
		t.Errorf("%d audited + %d counted, want 5", len(entries), suppressed)
	}
}

// TestServeHTTPDirect checks the handler used without Serve, with a
// ResponseWriter that cannot flush.
func TestServeHTTPDirect(t *testing.T) {
	api := newFakeAPI(t, replyJSON)
	p, err := New(Options{Upstream: api.url(t), Transport: api.transport(), Credential: staticCredential(Credential{Kind: KindAPIKey, Secret: apiSecret}), Audit: newMemAudit()})
	if err != nil {
		t.Fatal(err)
	}
	r := claudeRequest(t, "POST", "/v1/messages", messagesBody)
	r.RequestURI = "/v1/messages"
	w := &plainWriter{h: http.Header{}}
	p.ServeHTTP(w, r)
	if w.status != 200 || w.body.String() != messageJSON {
		t.Errorf("got %d %q", w.status, w.body.String())
	}
}

// plainWriter is a ResponseWriter without Flush.
type plainWriter struct {
	h      http.Header
	status int
	body   strings.Builder
}

func (w *plainWriter) Header() http.Header { return w.h }
func (w *plainWriter) WriteHeader(s int)   { w.status = s }
func (w *plainWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	return w.body.Write(b)
}
