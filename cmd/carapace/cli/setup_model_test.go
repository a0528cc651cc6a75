package cli_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/cmd/carapace/cli"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/keychain"
)

// setup --llm-provider ollama finds a running Ollama where $OLLAMA_HOST
// says, writes the provider, its upstream and the model, and stores no
// key; a model Ollama has not pulled is a warning naming `ollama pull`.
func TestSetupOllama(t *testing.T) {
	ollama := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/tags" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"models":[{"name":"qwen3-coder:latest"},{"name":"gpt-oss:20b"}]}`)
	})
	t.Setenv("OLLAMA_HOST", strings.TrimPrefix(ollama.URL, "http://"))
	h := emptyHome(t)
	run := func(args ...string) result {
		var out, errb testutil.Buffer
		return carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader("")}, h, args...)
	}
	r := run("setup", "--yes", "--engine", "none", "--llm-provider", "ollama", "--llm-model", "glm-4.7-flash")
	if l := stepLine(r.stdout, "warn", "model API"); !strings.Contains(l, "has not pulled glm-4.7-flash") || !strings.Contains(r.stdout, "fix: ollama pull glm-4.7-flash") {
		t.Errorf("a model Ollama lacks: %q\n%s", l, r.stdout)
	}
	r = run("setup", "--yes", "--engine", "none", "--llm-provider", "ollama", "--llm-model", "qwen3-coder")
	if l := stepLine(r.stdout, "ok", "model API"); l == "" || !strings.Contains(l, "ollama at "+ollama.URL+", auth none, model qwen3-coder") {
		t.Errorf("model API step:\n%s", r.stdout)
	}
	if l := stepLine(r.stdout, "ok", "model key"); !strings.Contains(l, "none needed") {
		t.Errorf("model key step: %q\n%s", l, r.stdout)
	}
	cfg, err := config.Load(h.Config())
	if err != nil || cfg.LLM.Provider != "ollama" || cfg.LLM.Upstream != ollama.URL || cfg.LLM.Model != "qwen3-coder" || cfg.LLM.Auth != "none" {
		t.Fatalf("config: %+v, %v", cfg.LLM, err)
	}
	for _, c := range ollama.seen() {
		if c != "GET /api/tags x-api-key= authorization=" {
			t.Errorf("setup asked Ollama %q", c)
		}
	}
	if len(ollama.seen()) == 0 {
		t.Error("setup never asked Ollama")
	}
	if st, _ := keychain.Default(h.CredentialsDir()).List(keychain.LLMPlugin); len(st) != 0 {
		t.Errorf("setup stored a key for a keyless Ollama: %v", st)
	}
}

// setup for a gateway writes its URL and auth and stores its token
// under the custom provider; an http gateway off loopback is refused with
// the reason.
func TestSetupGateway(t *testing.T) {
	h := emptyHome(t)
	run := func(stdin string, args ...string) result {
		var out, errb testutil.Buffer
		return carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin)}, h, args...)
	}
	r := run("", "setup", "--yes", "--engine", "none", "--llm-provider", "custom", "--llm-upstream", "http://10.1.2.3:4000", "--llm-auth", "bearer")
	if l := stepLine(r.stdout, "fail", "model API"); !strings.Contains(l, "plain http is allowed only to a loopback address") || r.code != 1 {
		t.Errorf("an http gateway on the LAN: %d\n%s", r.code, r.stdout)
	}
	const token = "gw-token-setup-0123456789"
	r = run(token+"\n", "setup", "--yes", "--engine", "none", "--llm-provider", "custom", "--llm-upstream", "https://llm.corp.example", "--llm-auth", "bearer", "--llm-key-stdin")
	if l := stepLine(r.stdout, "done", "model key"); !strings.Contains(l, "custom-api-key, 25 bytes") {
		t.Errorf("model key: %q\n%s", l, r.stdout)
	}
	if strings.Contains(r.stdout+r.stderr, token) {
		t.Error("setup printed the token")
	}
	cfg, err := config.Load(h.Config())
	if err != nil || cfg.LLM.Provider != "custom" || cfg.LLM.Upstream != "https://llm.corp.example" || cfg.LLM.Auth != "bearer" {
		t.Fatalf("config: %+v, %v", cfg.LLM, err)
	}
	if b, err := keychain.Default(h.CredentialsDir()).Get(keychain.LLMPlugin, "custom-api-key"); err != nil || string(b) != token {
		t.Errorf("stored %q, %v", b, err)
	}
}
