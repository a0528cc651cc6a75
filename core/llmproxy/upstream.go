package llmproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// Providers: the kinds of upstream the proxy can forward to. Every one
// speaks the Anthropic Messages API (/v1/messages); they differ in where
// they live and how they take a credential.
const (
	// ProviderAnthropic is Anthropic's API: https://api.anthropic.com, the
	// stored API key as x-api-key (or a subscription's OAuth token as a
	// bearer token).
	ProviderAnthropic = "anthropic"
	// ProviderOllama is a local Ollama (0.14 or later serves /v1/messages):
	// http://127.0.0.1:11434, no credential.
	ProviderOllama = "ollama"
	// ProviderLlamaCpp is llama.cpp's llama-server: http://127.0.0.1:8080,
	// no credential (one given with --api-key is sent as a bearer token).
	ProviderLlamaCpp = "llamacpp"
	// ProviderCustom is any other Anthropic-compatible gateway (LiteLLM, a
	// company proxy): its URL and its credential style must be given.
	ProviderCustom = "custom"
)

// Credential styles of an upstream (config.toml's auth).
const (
	// AuthAPIKey sends the stored credential as the x-api-key header.
	AuthAPIKey = "x-api-key"
	// AuthBearer sends it as "Authorization: Bearer <credential>".
	AuthBearer = "bearer"
	// AuthNone sends no credential at all; whatever the agent sent is
	// dropped as for every upstream.
	AuthNone = "none"
)

// AuthStyles are the values of auth.
var AuthStyles = []string{AuthAPIKey, AuthBearer, AuthNone}

// Provider describes one kind of upstream: its default origin and
// credential style.
type Provider struct {
	Name string
	// URL is the default origin; empty when it must be given (custom).
	URL string
	// Auth is the default credential style; empty for anthropic, whose
	// style follows the stored credential (an API key as x-api-key, an
	// OAuth token as a bearer token), and for custom, which must say.
	Auth string
}

// Providers are the known providers, in the order setup offers them.
var Providers = []Provider{
	{Name: ProviderAnthropic, URL: DefaultUpstream},
	{Name: ProviderOllama, URL: "http://127.0.0.1:11434", Auth: AuthNone},
	{Name: ProviderLlamaCpp, URL: "http://127.0.0.1:8080", Auth: AuthNone},
	{Name: ProviderCustom},
}

// ProviderNames returns the names of Providers.
func ProviderNames() []string {
	out := make([]string, len(Providers))
	for i, p := range Providers {
		out[i] = p.Name
	}
	return out
}

// ProviderNamed returns the provider called name.
func ProviderNamed(name string) (Provider, bool) {
	for _, p := range Providers {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

// ErrPlainHTTP is wrapped by CheckUpstream's refusal of plain http to a
// host that is not loopback.
var ErrPlainHTTP = errors.New("plain http is allowed only to a loopback address")

// CheckUpstream accepts an upstream origin: https to any host, or plain
// http to a loopback address only (127.0.0.0/8, ::1 or localhost), where
// the requests never cross a network. It refuses a path, a query, a
// fragment and user information. Its messages never quote a password.
func CheckUpstream(u *url.URL) error {
	switch {
	case u.User != nil:
		return errors.New("a URL with a user name or password is refused: remove it (the credential comes from carapace auth set --llm)")
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("%q: want an https:// origin (or http:// to a loopback address)", u.Redacted())
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q has no host", u.Redacted())
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return fmt.Errorf("%q: give an origin (scheme, host and port) without a path, query or fragment", u.Redacted())
	case u.Scheme == "http" && !IsLoopback(u.Hostname()):
		return fmt.Errorf("%q: %w (127.0.0.0/8, ::1, localhost), where it never crosses a network: use https:// for %s, or run a TLS-terminating proxy on this host in front of it (ca_file trusts a private CA)",
			u.Redacted(), ErrPlainHTTP, u.Hostname())
	}
	return nil
}

// IsLoopback reports whether host (a name or an address, without a port)
// is a loopback address or "localhost". Other names are not resolved: a
// name that resolves to loopback today may not tomorrow.
func IsLoopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil || a.Zone() != "" {
		return false
	}
	return a.Unmap().IsLoopback()
}
