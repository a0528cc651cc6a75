package web

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// fixedNow is the tests' clock.
var fixedNow = time.Date(2026, 1, 2, 10, 42, 0, 0, time.UTC)

// directDial is a dialer without an egress point: the plugin's own checks
// alone.
func directDial(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// newHandler returns an initialised handler with cfg, dialling directly.
func newHandler(t *testing.T, cfg map[string]any, creds map[string]string, braveURL string) *Handler {
	t.Helper()
	h := New(Options{Dial: directDial, BraveURL: braveURL, Now: func() time.Time { return fixedNow }})
	svc := &plugintest.Services{Credentials: plugintest.NewFakeCredentials(creds)}
	if err := h.Init(context.Background(), cfg, svc); err != nil {
		t.Fatalf("init: %v", err)
	}
	t.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	return h
}

// call invokes a tool for group.
func call(h *Handler, group, tool string, args map[string]any) (map[string]any, error) {
	return h.Invoke(context.Background(), &plugin.Request{Tool: tool, Group: group, Arguments: args})
}

// server is an httptest server on the loopback; its address.
func server(t testing.TB, h http.HandlerFunc) (*httptest.Server, string) {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s, strings.TrimPrefix(s.URL, "http://")
}

// wantCode checks err is a ToolError with code whose message holds each of
// words.
func wantCode(t *testing.T, err error, code string, words ...string) {
	t.Helper()
	te, ok := plugin.AsToolError(err)
	if !ok {
		t.Fatalf("error %v, want a ToolError %s", err, code)
	}
	if te.Code != code {
		t.Fatalf("code %s (%s), want %s", te.Code, te.Message, code)
	}
	for _, w := range words {
		if !strings.Contains(te.Message, w) {
			t.Errorf("message %q does not say %q", te.Message, w)
		}
	}
}

// num is n as the core passes numbers.
func num(n int) json.Number { return json.Number(strconv.Itoa(n)) }

// httpsServer is a TLS server that redirects to ?to= or answers a page.
func httpsServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<html><head><title>Local page</title></head><body><article><p>Over TLS, a paragraph long enough to count as the main content of this page.</p></article></body></html>`))
	}))
	t.Cleanup(s.Close)
	return s
}
