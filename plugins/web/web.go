package web

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Options are what the handler's main gives the plugin.
type Options struct {
	// Dial opens its connections: plugin.Dial, through the egress point.
	Dial   DialFunc
	Logger *slog.Logger
	// BraveURL replaces BraveURL (tests).
	BraveURL string
	// Now replaces time.Now (tests).
	Now func() time.Time
}

// Handler is the web plugin.
type Handler struct {
	o Options

	mu       sync.Mutex
	cfg      *config
	tr       *http.Transport // web_fetch's
	str      *http.Transport // web_search's
	provider Provider
}

var _ plugin.Handler = (*Handler)(nil)

// New returns the web plugin's handler.
func New(o Options) *Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.BraveURL == "" {
		o.BraveURL = BraveURL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Handler{o: o}
}

// Init reads the config and makes the transport both tools share.
func (h *Handler) Init(_ context.Context, raw map[string]any, svc plugin.Services) error {
	cfg, err := parseConfig(raw)
	if err != nil {
		return plugin.NewInitError(plugin.CategoryConfig, err)
	}
	if h.o.Dial == nil {
		return plugin.NewInitError(plugin.CategoryInternal, fmt.Errorf("web: no dialer"))
	}
	tr := newTransport(cfg.AllowAddresses, h.o.Dial)
	// The search provider's own transport: a SearXNG the user runs on
	// their network is allowed to it, and to it only (not to web_fetch).
	searchAllow := maps.Clone(cfg.AllowAddresses)
	if cfg.SearXNG != nil {
		if ap, err := addrPortOf(cfg.SearXNG.String()); err == nil {
			searchAllow[ap] = true
		}
	}
	str := newTransport(searchAllow, h.o.Dial)
	client := &http.Client{Transport: str, Timeout: cfg.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
		return toolErr(CodeSearchFailed, "the search provider redirected: refused")
	}}
	var p Provider
	switch cfg.Provider {
	case "searxng":
		p = &SearXNG{Client: client, Base: cfg.SearXNG}
	default:
		p = &Brave{Client: client, Endpoint: h.o.BraveURL, Key: func(ctx context.Context) (string, error) { return svc.ReadCredential(ctx, BraveKey) }}
	}
	h.mu.Lock()
	h.cfg, h.tr, h.str, h.provider = &cfg, tr, str, p
	h.mu.Unlock()
	return nil
}

// Shutdown closes idle connections.
func (h *Handler) Shutdown(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tr != nil {
		h.tr.CloseIdleConnections()
		h.str.CloseIdleConnections()
	}
	return nil
}

// Invoke runs web_fetch or web_search.
func (h *Handler) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	h.mu.Lock()
	cfg, tr, p := h.cfg, h.tr, h.provider
	h.mu.Unlock()
	if cfg == nil {
		return nil, plugin.NewToolError("the web plugin is not initialised", true)
	}
	access := cfg.access(req.Group)
	switch req.Tool {
	case "web_fetch":
		if access != AccessFetch {
			return nil, toolErr(CodeOff, "web_fetch is off for the group %s (its access is %q): the user can change it in [plugins.web.config] groups", req.Group, access)
		}
		raw, _ := req.Arguments["url"].(string)
		max := DefaultMaxChars
		if v, ok := req.Arguments["max_chars"]; ok {
			n, err := plugin.Int(v)
			if err != nil || n < 100 || n > MaxMaxChars {
				return nil, &plugin.ToolError{Code: CodeInvalidArgument, Message: fmt.Sprintf("max_chars: want a number from 100 to %d", MaxMaxChars), Field: "max_chars"}
			}
			max = int(n)
		}
		page, err := fetch(ctx, cfg, tr, raw, h.o.Now)
		if err != nil {
			return nil, err
		}
		return page.answer(max), nil
	case "web_search":
		if access == AccessOff {
			return nil, toolErr(CodeOff, "web_search is off for the group %s: the user can change it in [plugins.web.config] groups", req.Group)
		}
		q, _ := req.Arguments["query"].(string)
		q = strings.TrimSpace(q)
		if q == "" {
			return nil, &plugin.ToolError{Code: CodeInvalidArgument, Message: "query is empty", Field: "query"}
		}
		count := DefaultCount
		if v, ok := req.Arguments["count"]; ok {
			n, err := plugin.Int(v)
			if err != nil || n < 1 || n > MaxCount {
				return nil, &plugin.ToolError{Code: CodeInvalidArgument, Message: fmt.Sprintf("count: want a number from 1 to %d", MaxCount), Field: "count"}
			}
			count = int(n)
		}
		sctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		rs, err := p.Search(sctx, q, count)
		if err != nil {
			return nil, err
		}
		out := make([]any, 0, len(rs))
		for _, r := range rs {
			if len(out) == count {
				break
			}
			if !keepResult(cfg, r.URL) {
				continue
			}
			out = append(out, map[string]any{"title": textutil.ClipRunes(r.Title, 300), "url": r.URL, "snippet": textutil.ClipRunes(r.Snippet, 1000)})
		}
		return map[string]any{"query": q, "provider": cfg.Provider, "results": out}, nil
	}
	return nil, plugin.NewToolError("no such tool: "+textutil.Clip(req.Tool, 40), false)
}

// answer is the tool's result: the page cut at max characters, with a
// note when it was cut.
func (p *Page) answer(max int) map[string]any {
	content, cutOff := cut(p.Content, max)
	out := map[string]any{
		"url":          p.URL,
		"title":        p.Title,
		"fetched_at":   p.FetchedAt.Format(time.RFC3339),
		"content_type": p.ContentType,
		"content":      content,
		"truncated":    cutOff,
	}
	if cutOff {
		out["note"] = fmt.Sprintf("cut at %d of %d characters; fetch again with a larger max_chars (at most %d) for more", max, len([]rune(p.Content)), MaxMaxChars)
	}
	return out
}

// keepResult drops search results web_fetch would refuse by domain or
// scheme, so that the agent is not shown links it may not follow.
func keepResult(c *config, raw string) bool {
	u, err := parseURL(raw)
	if err != nil {
		return false
	}
	return c.checkURL(u) == nil
}
