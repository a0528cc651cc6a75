package llmproxy

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
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
