package llmproxy

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
)

// TransportFor returns the transport to the upstream for llm.ca_file: the
// system's roots when caFile is empty, else only the certificates in it.
func TransportFor(caFile string) (*http.Transport, error) {
	if caFile == "" {
		return NewTransport(nil), nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("llm.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("llm.ca_file %s: no PEM certificate in it", caFile)
	}
	return NewTransport(pool), nil
}

// ErrRefused: the model API answered that the credential is not valid
// (401 or 403).
var ErrRefused = errors.New("the model API refused the credential")

// Probe asks the model API whether it accepts c, with one request that
// costs no tokens: GET /v1/models?limit=1, with the credential's headers
// as the proxy sends them. It returns nil on 200, an error wrapping
// ErrRefused on 401 or 403, and another error otherwise (the network, a
// TLS failure, the API's own trouble). Its errors never contain the
// secret.
func Probe(ctx context.Context, upstream *url.URL, t http.RoundTripper, c Credential) error {
	if err := c.Check(); err != nil {
		return err
	}
	u := *upstream
	u.Path, u.RawQuery = "/v1/models", "limit=1"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header, _ = outboundHeader(http.Header{"Anthropic-Version": {"2023-06-01"}}, c, nil)
	resp, err := (&http.Client{Transport: t}).Do(req)
	if err != nil {
		return fmt.Errorf("could not reach the model API at %s: %w", upstream.Host, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w (%s, %s)", ErrRefused, resp.Status, c.Kind)
	}
	return fmt.Errorf("the model API at %s answered %s", upstream.Host, resp.Status)
}

// ErrModelMissing is wrapped by MissingModels' error when a model named
// in config.toml is not on the upstream.
var ErrModelMissing = errors.New("the model is not on the upstream")

// OllamaModels returns the names of the models an Ollama at upstream has
// pulled, as "name:tag", with one GET /api/tags sent with c's headers (a
// local Ollama takes none: KindNone; one behind an authenticating proxy
// may). An answer of 401 or 403 is an error wrapping ErrRefused. Its
// errors never contain the secret.
func OllamaModels(ctx context.Context, upstream *url.URL, t http.RoundTripper, c Credential) ([]string, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	u := *upstream
	u.Path, u.RawQuery = "/api/tags", ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header, _ = outboundHeader(http.Header{}, c, nil)
	resp, err := (&http.Client{Transport: t}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("could not reach Ollama at %s: %w", upstream.Host, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return nil, fmt.Errorf("%w (%s, %s)", ErrRefused, resp.Status, c.Kind)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the Ollama at %s answered %s to GET /api/tags", upstream.Host, resp.Status)
	}
	var tags struct {
		Models []struct {
			Name  string `json:"name"`
			Model string `json:"model"`
		} `json:"models"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&tags); err != nil {
		return nil, fmt.Errorf("the Ollama at %s: GET /api/tags: %w", upstream.Host, err)
	}
	var out []string
	for _, m := range tags.Models {
		name := cmp.Or(m.Name, m.Model)
		if name != "" && cleanModel(name) == name && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// MissingModels returns the models of want that have, the models an
// Ollama at host has pulled (OllamaModels), lacks, and an error wrapping
// ErrModelMissing that names the fix (`ollama pull NAME`) when there are
// any. A name without a tag matches its ":latest".
func MissingModels(host string, have, want []string) ([]string, error) {
	var missing, fix []string
	for _, m := range want {
		if slices.Contains(have, m) || (!strings.Contains(m, ":") && slices.Contains(have, m+":latest")) {
			continue
		}
		missing = append(missing, m)
		fix = append(fix, "ollama pull "+m)
	}
	if len(missing) == 0 {
		return nil, nil
	}
	return missing, fmt.Errorf("%w: Ollama at %s has not pulled %s (it has: %s); run %s",
		ErrModelMissing, host, strings.Join(missing, ", "), cmp.Or(strings.Join(have, ", "), "none"), strings.Join(fix, " && "))
}
