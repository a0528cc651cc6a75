package keychain

import "fmt"

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

// LLMProviders are the model APIs the core can hold a credential for.
var LLMProviders = []string{"anthropic"}

// LLMKey returns the key under LLMPlugin of provider's credential: its API
// key, or with oauth its subscription token.
func LLMKey(provider string, oauth bool) (string, error) {
	if provider != "anthropic" {
		return "", fmt.Errorf("--llm %q: the only model API is anthropic", provider)
	}
	if oauth {
		return LLMKeyOAuth, nil
	}
	return LLMKeyAPI, nil
}
