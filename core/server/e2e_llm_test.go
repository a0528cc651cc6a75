package server_test

import (
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/keychain"
)

// fakeModelAPI is a TLS server on loopback standing in for the model API:
// it records the credentials it is sent and answers /v1/models and
// /v1/messages.
type fakeModelAPI struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newFakeModelAPI(t *testing.T) *fakeModelAPI {
	f := &fakeModelAPI{}
	f.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, r.Header.Clone())
		f.mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"data":[{"id":"claude-test-1","type":"model"}],"has_more":false}`)
		case "/v1/messages":
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test-1","content":[{"type":"text","text":"hello from the fake model"}],"usage":{"input_tokens":12,"output_tokens":5}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// caFile writes the fake's certificate where the core's [llm] ca_file
// can name it.
func (f *fakeModelAPI) caFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestModelAPIThroughTheRelay: a client inside the real container reaches
// 127.0.0.1:PORT and gets the fake model API's answer through ipc relay
// and the core's proxy; the real key arrives upstream, the placeholder
// never does, and the container never sees the key — while it still
// cannot reach any network address directly.
func TestModelAPIThroughTheRelay(t *testing.T) {
	const key = "sk-ant-api03-CANARY-llm-key-0123456789"
	up := newFakeModelAPI(t)
	c := startCoreWith(t, coreOptions{
		Config: dockerConfig(t, fmt.Sprintf("[llm]\nupstream = %q\nca_file = %q\n", up.URL, up.caFile(t))),
		Setup: func(h home.Dir) {
			if err := keychain.NewFileStore(h.CredentialsDir()).Set(keychain.LLMPlugin, keychain.LLMKeyAPI, []byte(key)); err != nil {
				t.Fatal(err)
			}
		},
	})
	script := `ipc relay --listen 127.0.0.1:$CARAPACE_LLM_PORT 2>/dev/null &
for i in 1 2 3 4 5 6 7 8 9 10; do nc -z 127.0.0.1 $CARAPACE_LLM_PORT 2>/dev/null && break; sleep 0.1; done
echo "base: $ANTHROPIC_BASE_URL"
wget -q -O- --header "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/models"; echo
wget -q -O- --header "x-api-key: $ANTHROPIC_API_KEY" --header "content-type: application/json" --post-data '{"model":"claude-test-1","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}' "$ANTHROPIC_BASE_URL/v1/messages"; echo
wget -q -O- "$ANTHROPIC_BASE_URL/v1/files" >/dev/null 2>&1 && echo "FILES REACHED" || echo "files refused"
wget -q -T 2 -O- ` + up.URL + `/v1/models >/dev/null 2>&1 && echo "DIRECT REACHED" || echo "direct refused"
nc -w 2 1.1.1.1 443 </dev/null >/dev/null 2>&1 && echo "NET REACHED" || echo "net refused"
env; grep -rs "CANARY" / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -3; cat /proc/self/environ /proc/1/environ 2>/dev/null | tr '\0' '\n'`
	stdout, stderr, exit, info := runAgent(t, c, control.SessionRequest{Group: "main", Runtime: "docker", Command: []string{"sh", "-c", script}})
	for _, want := range []string{"base: http://127.0.0.1:8377", `"claude-test-1"`, "hello from the fake model", "files refused", "direct refused", "net refused"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("container output lacks %q\nstdout:\n%s\nstderr:\n%s", want, stdout, stderr)
		}
	}
	if exit != 0 {
		t.Errorf("exit %d", exit)
	}
	if strings.Contains(stdout+stderr, "CANARY") || strings.Contains(stdout+stderr, key) {
		t.Errorf("the container saw the model API key:\n%s", stdout)
	}
	up.mu.Lock()
	seen := up.seen
	up.mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("the model API got %d requests, want 2 (models, messages)", len(seen))
	}
	for _, h := range seen {
		if h.Get("X-Api-Key") != key {
			t.Errorf("the model API did not get the real key: x-api-key %q", h.Get("X-Api-Key"))
		}
		for name, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, "carapace-placeholder") {
					t.Errorf("the placeholder reached the model API in %s", name)
				}
			}
		}
	}
	raw, _ := os.ReadFile(c.Home.AuditLog())
	if strings.Contains(string(raw), key) || strings.Contains(c.Log.String(), key) {
		t.Error("the key is in the audit log or the core's log")
	}
	var llmCalls int
	for _, e := range c.Audit(t) {
		if e.Session == info.ID && e.Stage == "llm" && strings.Contains(e.Reason, "claude-test-1") {
			llmCalls++
		}
	}
	if llmCalls == 0 {
		t.Errorf("no audit entry for the model calls of session %s", info.ID)
	}
}

// TestBadLLMCAFileStopsTheCore: an unusable [llm] ca_file is reported when
// the core starts, naming the setting, not at the first container session.
func TestBadLLMCAFileStopsTheCore(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file, want string
	}{
		{"missing", filepath.Join(dir, "absent.pem"), "no such file"},
		{"not PEM", notPEM, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHome(t)
			cfg := fmt.Sprintf("[llm]\nca_file = %q\n", tc.file)
			if err := os.WriteFile(h.Config(), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := runCore(t, h, coreOptions{})
			if err == nil || !strings.Contains(err.Error(), "llm.ca_file") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("core start: %v; want an error naming llm.ca_file and %q", err, tc.want)
			}
		})
	}
}
