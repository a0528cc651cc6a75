package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/carapace-dev/carapace/core/llmproxy"
)

// modelRE is a model name as config.toml may give it: an Anthropic id
// (claude-sonnet-4-5), an Ollama name with its tag (qwen3-coder:30b), a
// gateway's (openrouter/anthropic/claude-sonnet-4.5).
var modelRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,99}$`)

// checkUpstream returns the problems of the upstream u at key k ([llm] or
// [llm.upstreams.NAME]), before the defaults.
func checkUpstream(k toml.Key, u LLMUpstream) []keyProblem {
	var out []keyProblem
	at := func(leaf, format string, a ...any) {
		key := append(append(toml.Key{}, k...), leaf)
		out = append(out, keyProblem{key: key, msg: key.String() + ": " + fmt.Sprintf(format, a...)})
	}
	if u.Model != "" && !modelRE.MatchString(u.Model) {
		at("model", "%q is not a model name", u.Model)
	}
	provider := u.Provider
	if provider == "" {
		provider = llmproxy.ProviderAnthropic
	}
	p, ok := llmproxy.ProviderNamed(provider)
	if !ok {
		at("provider", "%q: use one of %s", u.Provider, strings.Join(llmproxy.ProviderNames(), ", "))
		return out
	}
	switch {
	case u.Auth != "" && !slices.Contains(llmproxy.AuthStyles, u.Auth):
		at("auth", "%q: use one of %s", u.Auth, strings.Join(llmproxy.AuthStyles, ", "))
	case p.Name == llmproxy.ProviderAnthropic && u.Auth != "":
		at("auth", "the anthropic provider sends the stored key as x-api-key, or a subscription's OAuth token as a bearer token (carapace auth set --llm anthropic [--oauth]): remove auth, or use provider = \"custom\" for a gateway")
	case p.Name == llmproxy.ProviderCustom && u.Auth == "":
		at("auth", "a custom upstream needs auth = \"x-api-key\", \"bearer\" or \"none\": how the gateway takes its credential (stored with carapace auth set --llm custom)")
	}
	if u.Upstream == "" {
		if p.URL == "" {
			at("upstream", "a custom upstream needs its URL: upstream = \"https://gateway.example\"")
		}
		return out
	}
	pu, err := url.Parse(u.Upstream)
	switch {
	case err != nil:
		at("upstream", "not a URL: want an https:// origin (or http:// to a loopback address)")
	case pu.User != nil:
		// Not quoted: it holds a credential.
		at("upstream", "holds a user name or password: remove it (the credential comes from carapace auth set --llm)")
	default:
		if err := llmproxy.CheckUpstream(pu); err != nil {
			at("upstream", "%v", err)
		}
	}
	return out
}

// checkGroupModels returns the problems of group name's upstream and
// models.
func checkGroupModels(name string, g Group, llm LLM) []keyProblem {
	upstreams := llm.Upstreams
	var out []keyProblem
	at := func(leaf, format string, a ...any) {
		out = append(out, keyProblem{key: toml.Key{"groups", name, leaf}, msg: fmt.Sprintf("groups.%s.%s: ", name, leaf) + fmt.Sprintf(format, a...)})
	}
	if g.Upstream != "" {
		if _, ok := upstreams[g.Upstream]; !ok {
			at("upstream", "%q is not an upstream: define it as [llm.upstreams.%s], or remove the line to use [llm]'s", g.Upstream, g.Upstream)
		}
	}
	if g.Models != nil && len(g.Models) == 0 {
		at("models", "is empty, which would allow no model: list the models the group may use, or remove the line to allow any")
	}
	for _, m := range g.Models {
		if !modelRE.MatchString(m) {
			at("models", "%q is not a model name", m)
		}
	}
	up, ok := upstreams[g.Upstream]
	if !ok {
		up = llm.DefaultUpstream()
	}
	if g.Model == "" && up.Model != "" && len(g.Models) > 0 && !slices.Contains(g.Models, up.Model) {
		at("models", "the group's upstream asks for model %q, which is not one of these (%s): add it, or set the group's model", up.Model, strings.Join(g.Models, ", "))
	}
	for _, f := range []struct{ leaf, v string }{{"model", g.Model}, {"small_fast_model", g.SmallFastModel}} {
		switch {
		case f.v == "":
		case !modelRE.MatchString(f.v):
			at(f.leaf, "%q is not a model name", f.v)
		case len(g.Models) > 0 && !slices.Contains(g.Models, f.v):
			at(f.leaf, "%q is not one of the group's models (%s): add it to models, or the proxy would refuse it", f.v, strings.Join(g.Models, ", "))
		}
	}
	return out
}

// upstreamDefaults fills an upstream's provider, URL and auth from its
// provider's defaults.
func upstreamDefaults(provider, upstream, auth string) (string, string, string) {
	if provider == "" {
		provider = llmproxy.ProviderAnthropic
	}
	p, _ := llmproxy.ProviderNamed(provider)
	if upstream == "" {
		upstream = p.URL
	}
	if auth == "" {
		auth = p.Auth
	}
	return provider, upstream, auth
}
