package llmproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/carapace-dev/carapace/keychain"
)

// Kinds of Credential.
const (
	// KindAPIKey is an Anthropic API key, sent as the x-api-key header.
	KindAPIKey = "api_key"
	// KindOAuth is a Claude subscription's OAuth access token, sent as
	// "Authorization: Bearer <token>" together with OAuthBeta in the
	// anthropic-beta header.
	KindOAuth = "oauth"
	// KindBearer is a gateway's token, sent as "Authorization: Bearer
	// <token>" without OAuthBeta (auth = "bearer").
	KindBearer = "bearer"
	// KindNone is no credential: nothing is sent (auth = "none", a local
	// Ollama or llama-server). Its Secret is empty.
	KindNone = "none"
)

// OAuthBeta is the anthropic-beta value that the Messages API requires of
// a request authenticated with an OAuth bearer token instead of an API
// key; without it the API answers 401 ("OAuth authentication is currently
// not supported"). Claude Code sends it (its constant OAUTH_BETA_HEADER)
// when it is signed in with a claude.ai account. Claude Code's gateway
// protocol reference says only that the header then "carries an OAuth
// capability that the upstream requires" without naming it; the value is
// the one Claude Code's constant and the other public clients of the
// OAuth token send. If Anthropic dates a successor, change it here.
const OAuthBeta = "oauth-2025-04-20"

// ErrNoCredential is returned (wrapped) by a credential source when no
// credential for the model API is stored. The proxy then answers 401 with
// a message telling the user how to store one.
var ErrNoCredential = errors.New("no credential for the model API is stored")

// Credential is the model API's credential, injected into each forwarded
// request. Its String, GoString and LogValue methods never show Secret.
type Credential struct {
	Kind   string // KindAPIKey, KindOAuth, KindBearer or KindNone
	Secret string
}

// String implements fmt.Stringer without the secret.
func (c Credential) String() string { return "Credential{Kind: " + c.Kind + ", Secret: <redacted>}" }

// GoString implements fmt.GoStringer without the secret.
func (c Credential) GoString() string { return c.String() }

// LogValue implements slog.LogValuer without the secret.
func (c Credential) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", c.Kind), slog.String("secret", "<redacted>"))
}

// Format implements fmt.Formatter so that no verb (%v, %+v, %#v, %s, %q,
// %x) prints the secret.
func (c Credential) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(c.String())) }

// Check reports whether c can be sent: a known kind, and a secret of
// printable ASCII without spaces. Its errors never contain the secret.
func (c Credential) Check() error {
	switch c.Kind {
	case KindAPIKey, KindOAuth, KindBearer:
	case KindNone:
		if c.Secret != "" {
			return errors.New("credential kind none carries a secret")
		}
		return nil
	default:
		return fmt.Errorf("credential kind %q: want %q, %q, %q or %q", c.Kind, KindAPIKey, KindOAuth, KindBearer, KindNone)
	}
	if c.Secret == "" {
		return errors.New("the credential is empty")
	}
	// API keys and OAuth tokens are printable ASCII without spaces;
	// anything else would be a corrupt entry, or a header injection.
	for i := 0; i < len(c.Secret); i++ {
		if b := c.Secret[i]; b < 0x21 || b > 0x7e {
			return fmt.Errorf("the credential has a byte outside printable ASCII at offset %d", i)
		}
	}
	return nil
}

// SecretGetter is what FromStore needs of a credential store;
// keychain.Store satisfies it.
type SecretGetter interface {
	Get(plugin, key string) ([]byte, error)
}

// FromStore returns a Options.Credential that reads the model API's
// credential from s on every call, so that `carapace auth set --llm
// anthropic` takes effect on the next request without a restart. The API
// key (keychain.LLMPlugin / keychain.LLMKeyAPI) wins over the OAuth token
// (keychain.LLMKeyOAuth) when both are stored. When neither is, the error
// wraps ErrNoCredential.
func FromStore(s SecretGetter) func(context.Context) (Credential, error) {
	return func(context.Context) (Credential, error) {
		for _, k := range []struct{ key, kind string }{
			{keychain.LLMKeyAPI, KindAPIKey},
			{keychain.LLMKeyOAuth, KindOAuth},
		} {
			b, err := s.Get(keychain.LLMPlugin, k.key)
			if errors.Is(err, keychain.ErrNotFound) {
				continue
			}
			if err != nil {
				return Credential{}, fmt.Errorf("read %s/%s: %w", keychain.LLMPlugin, k.key, err)
			}
			c := Credential{Kind: k.kind, Secret: string(b)}
			clear(b)
			return c, nil
		}
		return Credential{}, fmt.Errorf("%w (keychain %s: neither %s nor %s)", ErrNoCredential, keychain.LLMPlugin, keychain.LLMKeyAPI, keychain.LLMKeyOAuth)
	}
}

// FromStoreFor returns the Options.Credential of an upstream of provider
// with credential style auth (AuthAPIKey, AuthBearer, AuthNone, or "" for
// anthropic's own: FromStore). With AuthNone it returns KindNone and reads
// nothing. Otherwise it reads the provider's key (keychain.LLMKey), stored
// by `carapace auth set --llm PROVIDER`, on every call, and sends it in
// the given style; when none is stored, the error wraps ErrNoCredential.
func FromStoreFor(s SecretGetter, provider, auth string) func(context.Context) (Credential, error) {
	if provider == ProviderAnthropic && auth == "" {
		return FromStore(s)
	}
	if auth == AuthNone {
		return func(context.Context) (Credential, error) { return Credential{Kind: KindNone}, nil }
	}
	kind := KindAPIKey
	if auth == AuthBearer {
		kind = KindBearer
	}
	return func(context.Context) (Credential, error) {
		key, err := keychain.LLMKey(provider, false)
		if err != nil {
			return Credential{}, err
		}
		b, err := s.Get(keychain.LLMPlugin, key)
		if errors.Is(err, keychain.ErrNotFound) {
			return Credential{}, fmt.Errorf("%w (keychain %s: no %s)", ErrNoCredential, keychain.LLMPlugin, key)
		}
		if err != nil {
			return Credential{}, fmt.Errorf("read %s/%s: %w", keychain.LLMPlugin, key, err)
		}
		c := Credential{Kind: kind, Secret: string(b)}
		clear(b)
		return c, nil
	}
}
