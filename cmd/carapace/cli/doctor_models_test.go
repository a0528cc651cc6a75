package cli_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/cmd/carapace/cli"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// fakeUpstream is a plain-http server on loopback that records the
// credential headers and paths it is sent.
type fakeUpstream struct {
	*httptest.Server
	mu    sync.Mutex
	calls []string // "METHOD PATH x-api-key=… authorization=…"
}

func newFakeUpstream(t *testing.T, h http.HandlerFunc) *fakeUpstream {
	f := &fakeUpstream{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.calls = append(f.calls, fmt.Sprintf("%s %s x-api-key=%s authorization=%s", r.Method, r.URL.Path, r.Header.Get("X-Api-Key"), r.Header.Get("Authorization")))
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeUpstream) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// doctor --online asks a local Ollama once, with no credential, for its
// models, and names the `ollama pull` that fetches a model a group names
// and it lacks; a Bearer gateway is asked with its token as a bearer
// token, and a missing token names `auth set --llm custom`.
func TestDoctorOnlineUpstreams(t *testing.T) {
	ollama := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/tags" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"models":[{"name":"qwen3-coder:latest","model":"qwen3-coder:latest"}]}`)
	})
	const token = "gw-token-doctor-0123"
	gateway := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" && r.Header.Get("Authorization") == "Bearer "+token {
			fmt.Fprint(w, `{"data":[]}`)
			return
		}
		http.Error(w, `{"type":"error"}`, http.StatusUnauthorized)
	})
	h := controltest.TempHome(t)
	writeConfig := func(model string) {
		cfg := fmt.Sprintf(`[runtime]
engine = "none"
[llm]
provider = "ollama"
upstream = %q
[llm.upstreams.work]
provider = "custom"
upstream = %q
auth = "bearer"
[groups.main]
model = %q
[groups.office]
upstream = "work"
`, ollama.URL, gateway.URL, model)
		if err := os.WriteFile(h.Config(), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	online := func(args ...string) result { return carapace(t, h, append(args, "--online")...) }

	writeConfig("glm-4.7-flash")
	checks, code := doctorChecks(t, online)
	c := checks["model key"]
	if code != 1 || c.Status != "fail" || c.Fix != "ollama pull glm-4.7-flash" || !strings.Contains(c.Message, "has not pulled glm-4.7-flash") {
		t.Errorf("a model Ollama lacks: %d %+v", code, c)
	}
	if got := ollama.seen(); len(got) != 1 || got[0] != "GET /api/tags x-api-key= authorization=" {
		t.Errorf("Ollama was asked %q; want one GET /api/tags without a credential", got)
	}
	if c := checks["model key work"]; c.Status != "fail" || c.Fix != "carapace auth set --llm custom" {
		t.Errorf("the gateway without its token: %+v", c)
	}
	if n := len(gateway.seen()); n != 0 {
		t.Errorf("the gateway was asked %d times without a token", n)
	}

	var out, errb testutil.Buffer
	if r := carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(token)}, h, "auth", "set", "--llm", "custom"); r.code != 0 {
		t.Fatalf("auth set --llm custom: %+v", r)
	}
	writeConfig("qwen3-coder")
	checks, code = doctorChecks(t, online)
	if c := checks["model key"]; code != 0 || c.Status != "ok" || !strings.Contains(c.Message, "none needed") {
		t.Errorf("Ollama with the model: %d %+v", code, c)
	}
	if c := checks["model key work"]; c.Status != "ok" || !strings.Contains(c.Message, "stored (bearer) and accepted") {
		t.Errorf("the gateway with its token: %+v", c)
	}
	if got := gateway.seen(); len(got) != 1 || got[0] != "GET /v1/models x-api-key= authorization=Bearer "+token {
		t.Errorf("the gateway was asked %q; want one GET /v1/models with the bearer token", got)
	}
	if r := carapace(t, h, "doctor", "--online"); strings.Contains(r.stdout+r.stderr, token) {
		t.Error("doctor printed the token")
	}
}
