package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Search error codes.
const (
	CodeMissingKey   = "MISSING_KEY"   // the Brave key is not set
	CodeSearchFailed = "SEARCH_FAILED" // the provider failed or answered what cannot be read
)

// Count bounds of web_search.
const (
	DefaultCount = 5
	MaxCount     = 20
)

// BraveKey is the credential that holds the Brave Search API key.
const BraveKey = "brave_api_key"

// BraveURL is the Brave Search API's web search endpoint.
const BraveURL = "https://api.search.brave.com/res/v1/web/search"

// maxSearchBody bounds a provider's answer.
const maxSearchBody = 2 << 20

// Result is one search result.
type Result struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

// Provider is a search engine.
type Provider interface {
	// Search returns at most count results for query.
	Search(ctx context.Context, query string, count int) ([]Result, error)
}

// Brave is the Brave Search API. Key reads the API key at each search
// (so that `carapace auth set` takes effect without a restart).
type Brave struct {
	Client   *http.Client
	Endpoint string // BraveURL; a test server in tests
	Key      func(ctx context.Context) (string, error)
}

// Search implements Provider.
func (b *Brave) Search(ctx context.Context, query string, count int) ([]Result, error) {
	key, err := b.Key(ctx)
	if errors.Is(err, plugin.ErrNoCredential) || (err == nil && key == "") {
		return nil, toolErr(CodeMissingKey, "web_search needs a Brave Search API key (https://brave.com/search/api/): the user sets it with `carapace auth set --plugin web --key %s`, or configures a SearXNG (searxng_url in [plugins.web.config])", BraveKey)
	}
	if err != nil {
		return nil, &plugin.ToolError{Code: CodeSearchFailed, Message: "the Brave key cannot be read now", Retriable: true}
	}
	q := url.Values{"q": {query}, "count": {strconv.Itoa(count)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.Endpoint+"?"+q.Encode(), nil)
	if err != nil {
		return nil, toolErr(CodeSearchFailed, "the Brave request cannot be made")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Subscription-Token", key)
	var out struct {
		Web struct {
			Results []struct {
				Title       string `json:"title"`
				URL         string `json:"url"`
				Description string `json:"description"`
			} `json:"results"`
		} `json:"web"`
	}
	if err := getJSON(b.Client, req, "Brave Search", &out); err != nil {
		return nil, err
	}
	var rs []Result
	for _, r := range out.Web.Results {
		rs = append(rs, Result{Title: r.Title, URL: r.URL, Snippet: r.Description})
	}
	return rs, nil
}

// SearXNG is a SearXNG instance the user runs, with the JSON format
// enabled (search.formats in its settings.yml).
type SearXNG struct {
	Client *http.Client
	Base   *url.URL
}

// Search implements Provider.
func (s *SearXNG) Search(ctx context.Context, query string, count int) ([]Result, error) {
	u := *s.Base
	u.Path = strings.TrimRight(u.Path, "/") + "/search"
	u.RawQuery = url.Values{"q": {query}, "format": {"json"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, toolErr(CodeSearchFailed, "the SearXNG request cannot be made")
	}
	req.Header.Set("Accept", "application/json")
	var out struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := getJSON(s.Client, req, "SearXNG", &out); err != nil {
		return nil, err
	}
	var rs []Result
	for _, r := range out.Results {
		rs = append(rs, Result{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	if len(rs) > count {
		rs = rs[:count]
	}
	return rs, nil
}

// getJSON runs req and decodes its JSON answer into v.
func getJSON(c *http.Client, req *http.Request, name string, v any) error {
	resp, err := c.Do(req)
	if err != nil {
		if te, ok := plugin.AsToolError(err); ok {
			return te
		}
		return &plugin.ToolError{Code: CodeSearchFailed, Message: name + " cannot be reached: " + textutil.Clip(errText(err), 200), Retriable: true}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return toolErr(CodeSearchFailed, "%s refused the request (%s): check the key (`carapace auth set --plugin web --key %s`) or the instance's settings", name, resp.Status, BraveKey)
	case resp.StatusCode == http.StatusTooManyRequests:
		return &plugin.ToolError{Code: CodeSearchFailed, Message: name + " says too many requests: try again later", Retriable: true}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return &plugin.ToolError{Code: CodeSearchFailed, Message: fmt.Sprintf("%s answered %s", name, resp.Status), Retriable: resp.StatusCode >= 500}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSearchBody+1))
	if err != nil {
		return &plugin.ToolError{Code: CodeSearchFailed, Message: name + "'s answer was cut off", Retriable: true}
	}
	if len(body) > maxSearchBody {
		return toolErr(CodeSearchFailed, "%s's answer is over %d bytes", name, maxSearchBody)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return toolErr(CodeSearchFailed, "%s's answer is not the JSON expected (for SearXNG: enable the json format in settings.yml, search.formats)", name)
	}
	return nil
}

// errText is err's text without the url.Error's method and URL.
func errText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
