package llmproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/keychain"
)

// fakeStore is a SecretGetter of fixed values under keychain.LLMPlugin.
type fakeStore map[string]string

func (s fakeStore) Get(plugin, key string) ([]byte, error) {
	if plugin != keychain.LLMPlugin {
		return nil, fmt.Errorf("plugin %q: %w", plugin, keychain.ErrBadPlugin)
	}
	if v, ok := s[key]; ok {
		if v == "fail" {
			return nil, errors.New("keychain locked")
		}
		return []byte(v), nil
	}
	return nil, keychain.ErrNotFound
}

func TestFromStore(t *testing.T) {
	tests := []struct {
		name    string
		store   fakeStore
		want    Credential
		wantErr error
	}{
		{"api key", fakeStore{keychain.LLMKeyAPI: apiSecret}, Credential{KindAPIKey, apiSecret}, nil},
		{"oauth", fakeStore{keychain.LLMKeyOAuth: oauthSecret}, Credential{KindOAuth, oauthSecret}, nil},
		{"both: the API key wins", fakeStore{keychain.LLMKeyAPI: apiSecret, keychain.LLMKeyOAuth: oauthSecret}, Credential{KindAPIKey, apiSecret}, nil},
		{"none", fakeStore{}, Credential{}, ErrNoCredential},
		{"store fails", fakeStore{keychain.LLMKeyAPI: "fail"}, Credential{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromStore(tt.store)(context.Background())
			switch {
			case tt.name == "store fails":
				if err == nil || errors.Is(err, ErrNoCredential) {
					t.Errorf("err %v, want a store error that is not ErrNoCredential", err)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("err %v, want %v", err, tt.wantErr)
				}
			case err != nil || got != tt.want:
				t.Errorf("got %v (%v), want kind %s", got, err, tt.want.Kind)
			}
		})
	}
}

// TestCredentialRedacted checks that formatting or logging a Credential
// never shows its secret.
func TestCredentialRedacted(t *testing.T) {
	c := Credential{Kind: KindOAuth, Secret: oauthSecret}
	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X"} {
		fmt.Fprintf(&out, verb+"\n", c)
	}
	fmt.Fprintln(&out, c, &c, []Credential{c}, struct{ C Credential }{c})
	slog.New(slog.NewJSONHandler(&out, nil)).Info("x", "cred", c)
	slog.New(slog.NewTextHandler(&out, nil)).Info("x", "cred", c)
	if strings.Contains(out.String(), oauthSecret) || strings.Contains(out.String(), fmt.Sprintf("%x", oauthSecret)) {
		t.Errorf("the secret shows:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "redacted") {
		t.Errorf("no redaction marker:\n%s", out.String())
	}
}

func TestCredentialCheck(t *testing.T) {
	tests := []struct {
		c  Credential
		ok bool
	}{
		{Credential{KindAPIKey, apiSecret}, true},
		{Credential{KindOAuth, oauthSecret}, true},
		{Credential{KindBearer, apiSecret}, true},
		{Credential{Kind: KindNone}, true},
		{Credential{KindNone, apiSecret}, false},
		{Credential{KindBearer, ""}, false},
		{Credential{"basic", apiSecret}, false},
		{Credential{KindAPIKey, ""}, false},
		{Credential{KindAPIKey, "sk-ant\nX: y"}, false},
		{Credential{KindAPIKey, "sk ant"}, false},
		{Credential{KindAPIKey, "sk-ant-é"}, false},
	}
	for _, tt := range tests {
		err := tt.c.Check()
		if (err == nil) != tt.ok {
			t.Errorf("check(%s) = %v, want ok=%v", tt.c.Kind, err, tt.ok)
		}
		if err != nil && strings.Contains(err.Error(), tt.c.Secret) && tt.c.Secret != "" {
			t.Errorf("the error %q shows the secret", err)
		}
	}
}
