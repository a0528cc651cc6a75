package llmproxy

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Probe sends the credential as the proxy would, to the models endpoint,
// and tells an accepted credential from a refused one and from an
// unreachable API; its errors never hold the secret.
func TestProbe(t *testing.T) {
	const good = "sk-ant-api03-good"
	var seen []http.Header
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Clone())
		if r.URL.Path != "/v1/models" || r.URL.RawQuery != "limit=1" || r.Method != http.MethodGet {
			http.Error(w, "wrong endpoint", http.StatusNotFound)
			return
		}
		if r.Header.Get("X-Api-Key") == good || r.Header.Get("Authorization") == "Bearer sk-ant-oat01-good" {
			w.Write([]byte(`{"data":[]}`))
			return
		}
		http.Error(w, `{"type":"error","error":{"type":"authentication_error"}}`, http.StatusUnauthorized)
	}))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := TransportFor(caFile)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL)
	ctx := context.Background()

	if err := Probe(ctx, u, tr, Credential{Kind: KindAPIKey, Secret: good}); err != nil {
		t.Fatalf("a good API key: %v", err)
	}
	if h := seen[len(seen)-1]; h.Get("Anthropic-Version") == "" || h.Get("Authorization") != "" {
		t.Errorf("headers of an API key's probe: %v", h)
	}
	if err := Probe(ctx, u, tr, Credential{Kind: KindOAuth, Secret: "sk-ant-oat01-good"}); err != nil {
		t.Fatalf("a good OAuth token: %v", err)
	}
	if h := seen[len(seen)-1]; !strings.Contains(h.Get("Anthropic-Beta"), OAuthBeta) || h.Get("X-Api-Key") != "" {
		t.Errorf("headers of an OAuth probe: %v", h)
	}
	err = Probe(ctx, u, tr, Credential{Kind: KindAPIKey, Secret: "sk-ant-api03-revoked"})
	if !errors.Is(err, ErrRefused) || strings.Contains(err.Error(), "revoked") {
		t.Fatalf("a refused key: %v", err)
	}
	// The system's roots do not trust the test server: unreachable, not
	// refused.
	err = Probe(ctx, u, NewTransport(nil), Credential{Kind: KindAPIKey, Secret: good})
	if err == nil || errors.Is(err, ErrRefused) || strings.Contains(err.Error(), good) {
		t.Fatalf("an untrusted upstream: %v", err)
	}
	if _, err := TransportFor(filepath.Join(t.TempDir(), "none.pem")); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
}
