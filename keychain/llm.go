package keychain

import (
	"fmt"
	"slices"
	"strings"
)

// The model API's credential is the core's, not a plugin's: it is stored
// under a plugin name that manifest.ReservedPlugins keeps from every
// plugin, so that no plugin can read it with ReadCredential.
const (
	// LLMPlugin is the namespace of the model API's credentials.
	LLMPlugin = "carapace-llm"
	// LLMKeyAPI is an Anthropic API key (sent as x-api-key).
	LLMKeyAPI = "anthropic-api-key"
	// LLMKeyOAuth is a Claude subscription's OAuth token (sent as a bearer
	// token).
	LLMKeyOAuth = "anthropic-oauth-token"
)

// LLMProviders are the model APIs the core can hold a credential for
// (llmproxy.Providers: a test keeps them equal).
var LLMProviders = []string{"anthropic", "ollama", "llamacpp", "custom"}

// LLMKey returns the key under LLMPlugin of provider's credential: its API
// key or token ("PROVIDER-api-key", LLMKeyAPI for anthropic), or with
// oauth anthropic's subscription token.
func LLMKey(provider string, oauth bool) (string, error) {
	if !slices.Contains(LLMProviders, provider) {
		return "", fmt.Errorf("--llm %q: the model APIs are %s", provider, strings.Join(LLMProviders, ", "))
	}
	if oauth {
		if provider != "anthropic" {
			return "", fmt.Errorf("--oauth is for anthropic only (a Claude subscription's token); a %s token is stored without it", provider)
		}
		return LLMKeyOAuth, nil
	}
	return provider + "-api-key", nil
}
