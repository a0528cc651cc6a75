package llmproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// Values that must never reach the model API (the client's) or the audit
// log and the logs (all of them).
const (
	apiSecret    = "sk-ant-api03-REALSECRET-7f3a2c"
	oauthSecret  = "sk-ant-oat01-REALOAUTH-91bc4e"
	placeholder  = "carapace-placeholder-sess-1"
	clientBearer = "client-bearer-must-not-pass"
	cookieValue  = "cookie-must-not-pass"
	promptMarker = "PROMPT-MARKER-not-for-logs"
	replyMarker  = "REPLY-MARKER-not-for-logs"
)

// leaks are the strings searched for in every test's audit and log output.
var leaks = []string{apiSecret, oauthSecret, placeholder, clientBearer, cookieValue, promptMarker, replyMarker}

// testSession and testGroup name the harness's session.
const (
	testSession = "sess-1"
	testGroup   = "family"
)

// seenRequest is a request as the fake model API received it.
type seenRequest struct {
	Method, Path, RawPath, RawQuery, Host string
	Header                                http.Header
	Body                                  []byte
}

// fakeAPI is a stand-in for the model API: a TLS server on loopback whose
// certificate only a transport given its root trusts.
type fakeAPI struct {
	srv    *httptest.Server
	mu     sync.Mutex
	seen   []seenRequest
	handle http.HandlerFunc
}

func newFakeAPI(t testing.TB, handle http.HandlerFunc) *fakeAPI {
	t.Helper()
	f := &fakeAPI{handle: handle}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{
			Method: r.Method, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery,
			Host: r.Host, Header: r.Header.Clone(), Body: body,
		})
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.handle(w, r)
	}))
	// TestTLSVerified's refused handshakes are the point, not news.
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

func (f *fakeAPI) url(t testing.TB) *url.URL {
	t.Helper()
	u, err := url.Parse(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// transport returns the proxy's default transport, trusting the fake
// API's certificate instead of the system roots.
func (f *fakeAPI) transport() *http.Transport {
	pool := x509.NewCertPool()
	pool.AddCert(f.srv.Certificate())
	return NewTransport(pool)
}

// messageJSON is a non-streamed Messages reply: 150 tokens in (100 fresh,
// 20 written to the cache, 30 read from it) and 50 out.
const messageJSON = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"` + replyMarker + `"}],"stop_reason":"end_turn","usage":{"input_tokens":100,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":50}}`

// replyJSON answers every request with messageJSON.
func replyJSON(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_test_1")
	_, _ = io.WriteString(w, messageJSON)
}

// memAudit is an Auditor that keeps its entries.
type memAudit struct {
	mu        sync.Mutex
	entries   []audit.Entry
	changed   chan struct{}
	failWrite func(e *audit.Entry) bool
}

func newMemAudit() *memAudit { return &memAudit{changed: make(chan struct{}, 1)} }

func (m *memAudit) Write(e *audit.Entry) error {
	if m.failWrite != nil && m.failWrite(e) {
		return errors.New("disk full")
	}
	m.mu.Lock()
	m.entries = append(m.entries, *e)
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
	return nil
}

func (m *memAudit) all() []audit.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]audit.Entry(nil), m.entries...)
}

// jsonl returns the entries as the audit log would hold them.
func (m *memAudit) jsonl(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, e := range m.all() {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// finals returns the entries that are not "routed" ones.
func (m *memAudit) finals() []audit.Entry {
	var out []audit.Entry
	for _, e := range m.all() {
		if e.Outcome != audit.OutcomeRouted {
			out = append(out, e)
		}
	}
	return out
}

// wait returns the n-th entry (from 1) that is not a "routed" one, waiting
// for the handler to write it: a client can hold the whole reply before
// the handler has audited it.
func (m *memAudit) wait(t *testing.T, n int) audit.Entry {
	t.Helper()
	guard := time.NewTimer(10 * time.Second) // a failure guard, not a timing assumption
	defer guard.Stop()
	for {
		if final := m.finals(); len(final) >= n {
			return final[n-1]
		}
		select {
		case <-m.changed:
		case <-guard.C:
			t.Fatalf("audit entry %d never came; have %d entries", n, len(m.all()))
		}
	}
}

// harness is a proxy serving on a real Unix socket in front of a fake API.
type harness struct {
	api    *fakeAPI
	proxy  *Proxy
	audit  *memAudit
	logs   *testutil.Buffer
	sock   string
	client *http.Client
}

// newHarness starts a proxy in front of a fake API answering with handle;
// mutate adjusts its options. At cleanup it checks that no secret, body or
// client credential reached the audit entries or the log.
func newHarness(t testing.TB, handle http.HandlerFunc, mutate func(*Options)) *harness {
	t.Helper()
	h := &harness{api: newFakeAPI(t, handle), audit: newMemAudit(), logs: &testutil.Buffer{}}
	o := Options{
		Upstream:   h.api.url(t),
		Transport:  h.api.transport(),
		Credential: staticCredential(Credential{Kind: KindAPIKey, Secret: apiSecret}),
		Session:    testSession,
		Group:      testGroup,
		Audit:      h.audit,
		Logger:     slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&o)
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.proxy = p
	h.sock = socketPath(t)
	ln, err := listen(h.sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, p) }()
	h.client = unixClient(h.sock)
	t.Cleanup(func() {
		h.client.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		h.checkNoLeaks(t)
	})
	return h
}

func (h *harness) checkNoLeaks(t testing.TB) {
	t.Helper()
	out := map[string]string{"audit": h.audit.jsonl(t), "log": h.logs.String()}
	for where, text := range out {
		for _, s := range leaks {
			if strings.Contains(text, s) {
				t.Errorf("the %s contains %q:\n%s", where, s, text)
			}
		}
	}
}

func staticCredential(c Credential) func(context.Context) (Credential, error) {
	return func(context.Context) (Credential, error) { return c, nil }
}

// socketPath returns a socket path in a fresh 0700 directory, short enough
// for sun_path on every platform.
func socketPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "llmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "llm.sock")
}

// unixClient is an HTTP client whose every connection goes to sock.
func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableCompression: true,
	}}
}

// claudeRequest returns a request as Claude Code in the container sends
// it: its placeholder key, plus the credentials and hop-by-hop headers a
// hostile client could add.
func claudeRequest(t testing.TB, method, target, body string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, "http://127.0.0.1"+target, rd)
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	h.Set("Anthropic-Version", "2023-06-01")
	h.Set("Anthropic-Beta", "claude-code-20250219, interleaved-thinking-2025-05-14,mcp-client-2025-04-04")
	h.Add("Anthropic-Beta", "web-fetch-2025-09-10,claude-code-20250219")
	h.Set("User-Agent", "claude-cli/2.1.0 (external, cli)")
	h.Set("X-App", "cli")
	h.Set("X-Stainless-Os", "Linux")
	h.Set("X-Claude-Code-Session-Id", "cc-session-1")
	h.Set("X-Api-Key", placeholder)
	h.Set("Authorization", "Bearer "+clientBearer)
	h.Set("Cookie", "session="+cookieValue)
	h.Set("Proxy-Authorization", "Basic "+clientBearer)
	h.Set("X-Forwarded-For", "10.0.0.1")
	h.Set("Forwarded", "for=10.0.0.1")
	h.Set("X-Evil", "1")
	h.Set("Accept-Encoding", "gzip, br")
	h.Set("Te", "trailers")
	return r
}

// messagesBody is a small Messages request carrying promptMarker.
const messagesBody = `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"` + promptMarker + `"}]}`

// do sends r through the harness and returns the response with its body.
func (h *harness) do(t testing.TB, r *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := h.client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// rawRequest writes a request line as given, byte for byte, so that no
// client normalises the target.
func rawRequest(t *testing.T, sock, method, target, body string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Api-Key: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		method, target, placeholder, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// decodeAPIError parses an error in the API's shape, failing the test if
// the body has another.
func decodeAPIError(t *testing.T, b []byte) apiError {
	t.Helper()
	var e apiError
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Type != "error" || e.Error.Type == "" || e.Error.Message == "" {
		t.Fatalf("body %q is not the API's error shape (%v)", b, err)
	}
	return e
}
