package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/llmproxy"
	"github.com/carapace-dev/carapace/internal/atomicfile"
	"github.com/carapace-dev/carapace/keychain"
)

// ollamaAt returns where setup looks for a running Ollama: $OLLAMA_HOST
// (as Ollama's own command line reads it: "host:port" or a URL) when it
// names a loopback address, else Ollama's default,
// http://127.0.0.1:11434. A non-loopback OLLAMA_HOST is not looked at:
// the proxy would refuse it over plain http.
func ollamaAt() *url.URL {
	def, _ := llmproxy.ProviderNamed(llmproxy.ProviderOllama)
	u, _ := url.Parse(def.URL)
	h := strings.TrimSpace(os.Getenv("OLLAMA_HOST"))
	if h == "" {
		return u
	}
	if !strings.Contains(h, "://") {
		h = "http://" + h
	}
	hu, err := url.Parse(h)
	if err != nil || hu.Scheme != "http" || !llmproxy.IsLoopback(hu.Hostname()) {
		return u
	}
	if hu.Port() == "" {
		hu.Host += ":11434"
	}
	return &url.URL{Scheme: "http", Host: hu.Host}
}

// findOllama asks a local Ollama for its models (GET /api/tags, no
// credential), briefly: nil and an error when none answers.
func (s *setupRun) findOllama(at *url.URL) ([]string, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 3*time.Second)
	defer cancel()
	return llmproxy.OllamaModels(ctx, at, nil, llmproxy.Credential{Kind: llmproxy.KindNone})
}

// modelAPI chooses the model API: from the flags, or at the terminal on a
// first setup (anthropic, no key stored yet), where it offers each
// provider and says whether an Ollama answers on this machine and with
// which models. It writes [llm] provider, upstream, auth and model.
func (s *setupRun) modelAPI(keyStored bool) {
	provider := s.f.llmProvider
	if provider == "" && s.ask != nil && s.cfg.LLM.Provider == llmproxy.ProviderAnthropic && !keyStored && s.cfg.LLM.Upstream == llmproxy.DefaultUpstream {
		provider = s.askProvider()
	}
	if provider == "" {
		s.report(stepOK, "model API", s.describeLLM(), "")
		return
	}
	if _, ok := llmproxy.ProviderNamed(provider); !ok {
		s.report(stepFail, "model API", fmt.Sprintf("%q is not a provider: use one of %s", provider, strings.Join(llmproxy.ProviderNames(), ", ")), "")
		return
	}
	upstream, auth := s.f.llmUpstream, s.f.llmAuth
	var have []string
	var findErr error
	switch provider {
	case llmproxy.ProviderOllama:
		at := ollamaAt()
		if upstream != "" {
			if u, err := url.Parse(upstream); err == nil {
				at = u
			}
		}
		if def, _ := llmproxy.ProviderNamed(provider); upstream == "" && at.String() != def.URL {
			upstream = at.String()
		}
		have, findErr = s.findOllama(at)
	case llmproxy.ProviderCustom:
		if upstream == "" && s.ask != nil {
			upstream, _ = s.ask.line("The gateway's URL (https://…): ")
		}
		if auth == "" && s.ask != nil {
			a, _ := s.ask.line("How it takes its key: x-api-key, bearer or none [bearer]: ")
			auth = cmp.Or(a, llmproxy.AuthBearer)
		}
	}
	// Provider, upstream and auth go in together: a custom upstream
	// loads only with all three.
	var kvs [][2]string
	for _, kv := range [][2]string{{"llm.provider", provider}, {"llm.upstream", upstream}, {"llm.auth", auth}} {
		if kv[1] != "" {
			kvs = append(kvs, kv)
		}
	}
	if err := s.setAll("model API", kvs); err != nil {
		s.report(stepFail, "model API", oneLine(err.Error()), "carapace config edit")
		return
	}
	if provider != llmproxy.ProviderOllama {
		if s.f.llmModel != "" {
			if err := s.set("model API", "llm.model", s.f.llmModel); err != nil {
				s.report(stepFail, "model API", oneLine(err.Error()), "carapace config edit")
			}
		}
		s.report(stepOK, "model API", s.describeLLM(), "")
		return
	}
	host := s.cfg.LLM.Upstream
	if findErr != nil {
		s.report(stepWarn, "model API", "no Ollama answers at "+host+": "+oneLine(findErr.Error()),
			"install and start Ollama (ollama serve), ollama pull qwen3-coder, then carapace setup --llm-provider ollama --llm-model qwen3-coder")
		if s.f.llmModel != "" {
			_ = s.set("model API", "llm.model", s.f.llmModel)
		}
		return
	}
	model := s.f.llmModel
	if model == "" && s.ask != nil && len(have) > 0 {
		a, err := s.ask.line(fmt.Sprintf("Ollama at %s has %s. Model for the agents [%s]: ", host, strings.Join(have, ", "), have[0]))
		if err == nil {
			model = cmp.Or(a, have[0])
		}
	}
	if model == "" {
		fix := "ollama pull qwen3-coder && carapace config set llm.model qwen3-coder"
		if len(have) > 0 {
			fix = "carapace config set llm.model " + have[0]
		}
		s.report(stepWarn, "model API", fmt.Sprintf("Ollama at %s has %s; no model chosen, and Claude Code's own is not there", host, cmp.Or(strings.Join(have, ", "), "no models")), fix)
		return
	}
	if err := s.set("model API", "llm.model", model); err != nil {
		s.report(stepFail, "model API", oneLine(err.Error()), "carapace config edit")
		return
	}
	if missing, err := llmproxy.MissingModels(host, have, []string{model}); len(missing) > 0 {
		s.report(stepWarn, "model API", oneLine(err.Error()), "ollama pull "+model)
		return
	}
	s.report(stepOK, "model API", s.describeLLM(), "")
}

// askProvider offers the providers at the terminal; "" keeps anthropic.
func (s *setupRun) askProvider() string {
	at := ollamaAt()
	found := "none answers at " + at.Host
	if have, err := s.findOllama(at); err == nil {
		found = fmt.Sprintf("running at %s with %d model(s)", at.Host, len(have))
		if len(have) > 0 {
			found += ": " + strings.Join(have, ", ")
		}
	}
	fmt.Fprintln(s.out, "\nAgents reach the model through the core, which adds any key on the host: it never enters a container.")
	fmt.Fprintln(s.out, "  anthropic  Claude, with an Anthropic API key or a Claude subscription's token")
	fmt.Fprintln(s.out, "  ollama     a model on this machine, no key (Ollama "+found+")")
	fmt.Fprintln(s.out, "  llamacpp   llama.cpp's llama-server on this machine, no key")
	fmt.Fprintln(s.out, "  custom     an Anthropic-compatible gateway (LiteLLM, your company's proxy)")
	for {
		a, err := s.ask.line("Model API [anthropic]: ")
		if err != nil || a == "" || a == llmproxy.ProviderAnthropic {
			return ""
		}
		if slices.Contains(llmproxy.ProviderNames(), a) {
			return a
		}
		fmt.Fprintln(s.out, "Please answer anthropic, ollama, llamacpp or custom.")
	}
}

// describeLLM says what config.toml's [llm] chose.
func (s *setupRun) describeLLM() string {
	l := s.cfg.LLM
	msg := l.Provider + " at " + l.Upstream
	if l.Auth != "" {
		msg += ", auth " + l.Auth
	}
	if l.Model != "" {
		msg += ", model " + l.Model
	}
	return msg
}

// providerKey stores the key of an upstream that is not anthropic's own,
// when its auth takes one.
func (s *setupRun) providerKey(store keychain.Store, up config.LLMUpstream) {
	fix := "carapace auth set --llm " + up.Provider
	if up.Auth == llmproxy.AuthNone {
		if s.f.llmKeyStdin {
			s.report(stepFail, "model key", up.Provider+" is set to take no key (llm.auth = \"none\"): nothing stored", "set llm.auth to x-api-key or bearer first")
			return
		}
		s.report(stepOK, "model key", "none needed ("+up.Provider+", auth none): nothing enters a container either way", "")
		return
	}
	stored, err := llmproxy.FromStoreFor(store, up.Provider, up.Auth)(s.ctx)
	if err != nil && !errors.Is(err, llmproxy.ErrNoCredential) {
		s.report(stepFail, "model key", "unreadable: "+oneLine(err.Error()), fix)
		return
	}
	var secret []byte
	switch {
	case s.f.llmKeyStdin:
		secret, err = s.secret("The " + up.Provider + " upstream's key or token")
	case err == nil:
		s.report(stepOK, "model key", "stored ("+stored.Kind+"; "+fix+" replaces it)", "")
		return
	case s.ask != nil:
		secret, err = s.ask.secret("The " + up.Provider + " upstream's key or token (input hidden; Enter to skip): ")
	}
	if err != nil {
		s.report(stepFail, "model key", err.Error(), fix)
		return
	}
	defer clear(secret)
	if len(secret) == 0 {
		s.report(stepWarn, "model key", "no key for the "+up.Provider+" upstream: agents cannot reach the model", fix)
		return
	}
	if err := (llmproxy.Credential{Kind: llmproxy.KindBearer, Secret: string(secret)}).Check(); err != nil {
		s.report(stepFail, "model key", "that is not a key ("+err.Error()+"): nothing stored", fix)
		return
	}
	key, err := keychain.LLMKey(up.Provider, false)
	if err == nil {
		err = store.Set(keychain.LLMPlugin, key, secret)
	}
	if err != nil {
		s.report(stepFail, "model key", err.Error(), "")
		return
	}
	s.report(stepDone, "model key", fmt.Sprintf("stored (%s, %d bytes)", key, len(secret)), "")
}

// setAll sets several keys of config.toml at once (config.SetAll) and
// reports each under step; the keys that already have their value are
// left alone.
func (s *setupRun) setAll(step string, kvs [][2]string) error {
	var todo [][2]string
	for _, kv := range kvs {
		if cur, err := s.cfg.Get(kv[0]); err != nil || cur != config.Quote(kv[1]) {
			todo = append(todo, kv)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	path := s.h.Config()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, err := config.SetAll(data, todo)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, out, 0o600); err != nil {
		return fmt.Errorf("write config.toml: %w", err)
	}
	for _, kv := range todo {
		s.report(stepDone, step, "config.toml: "+kv[0]+" = "+config.Quote(kv[1]), "")
	}
	s.changed = true
	return s.loadConfig()
}
