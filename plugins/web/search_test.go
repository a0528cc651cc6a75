package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// fakeBrave is the Brave Search API as far as the plugin uses it: it
// checks the key and answers n results, whatever count asked (the plugin
// bounds them).
type fakeBrave struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (f *fakeBrave) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	if r.Header.Get("X-Subscription-Token") != "brave-key" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var res []map[string]any
	for i := range 25 {
		host := "example.com"
		if i == 1 {
			host = "evil.example"
		}
		res = append(res, map[string]any{"title": fmt.Sprintf("Result %d for %s", i, r.URL.Query().Get("q")),
			"url": fmt.Sprintf("https://%s/%d", host, i), "description": fmt.Sprintf("Snippet <strong>%d</strong>", i), "extra": true})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"type": "search", "web": map[string]any{"results": res}})
}

// fakeSearXNG answers /search?format=json.
func fakeSearXNG(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/searx/search" || r.URL.Query().Get("format") != "json" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if r.URL.Query().Get("q") == "html please" {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>format json is off</html>")
		return
	}
	var res []map[string]any
	for i := range 30 {
		res = append(res, map[string]any{"title": fmt.Sprintf("S%d", i), "url": fmt.Sprintf("https://example.org/%d", i), "content": "c", "engine": "x"})
	}
	json.NewEncoder(w).Encode(map[string]any{"query": r.URL.Query().Get("q"), "results": res})
}

func results(t *testing.T, r map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, x := range r["results"].([]any) {
		out = append(out, x.(map[string]any))
	}
	return out
}

func TestBraveSearch(t *testing.T) {
	fb := &fakeBrave{}
	s, addr := server(t, fb.ServeHTTP)
	cfg := map[string]any{"allow_addresses": []any{addr}, "deny_domains": []any{"evil.example"}}
	hd := newHandler(t, cfg, map[string]string{BraveKey: "brave-key"}, s.URL+"/res/v1/web/search")
	r, err := call(hd, "main", "web_search", map[string]any{"query": "carapace plugins", "count": num(3)})
	if err != nil {
		t.Fatal(err)
	}
	rs := results(t, r)
	// evil.example (result 1) is left out by deny_domains; three others.
	if len(rs) != 3 || rs[0]["url"] != "https://example.com/0" || rs[1]["url"] != "https://example.com/2" ||
		rs[0]["title"] != "Result 0 for carapace plugins" || rs[0]["snippet"] != "Snippet <strong>0</strong>" || len(rs[0]) != 3 {
		t.Fatalf("results %v", rs)
	}
	if r["provider"] != "brave" {
		t.Errorf("provider %v", r["provider"])
	}
	fb.mu.Lock()
	q := fb.reqs[0].URL.Query()
	fb.mu.Unlock()
	if q.Get("q") != "carapace plugins" || q.Get("count") != "3" {
		t.Errorf("request %v", q)
	}
	// The default count, and the bounds (the schema says so too; the
	// handler checks again).
	r, err = call(hd, "main", "web_search", map[string]any{"query": "x"})
	if err != nil || len(results(t, r)) != DefaultCount {
		t.Errorf("default count: %v %v", r, err)
	}
	r, err = call(hd, "main", "web_search", map[string]any{"query": "x", "count": num(MaxCount)})
	if err != nil || len(results(t, r)) != MaxCount {
		t.Errorf("count %d: %d results, %v", MaxCount, len(results(t, r)), err)
	}
	for _, n := range []int{0, MaxCount + 1, -1} {
		_, err = call(hd, "main", "web_search", map[string]any{"query": "x", "count": num(n)})
		wantCode(t, err, CodeInvalidArgument, "count")
	}
	_, err = call(hd, "main", "web_search", map[string]any{"query": "   "})
	wantCode(t, err, CodeInvalidArgument, "empty")

	// No key: a clear error that names the command; a wrong key: refused.
	none := newHandler(t, cfg, nil, s.URL+"/res/v1/web/search")
	_, err = call(none, "main", "web_search", map[string]any{"query": "x"})
	wantCode(t, err, CodeMissingKey, "carapace auth set --plugin web --key brave_api_key")
	wrong := newHandler(t, cfg, map[string]string{BraveKey: "other"}, s.URL+"/res/v1/web/search")
	_, err = call(wrong, "main", "web_search", map[string]any{"query": "x"})
	wantCode(t, err, CodeSearchFailed, "refused", "brave_api_key")
}

// TestSearXNG: results from the user's instance, bounded to count; an
// instance on a private address is reached because searxng_url names it,
// and web_fetch still refuses that address (the control that the opt-in
// is the search's only).
func TestSearXNG(t *testing.T) {
	_, addr := server(t, fakeSearXNG)
	hd := newHandler(t, map[string]any{"searxng_url": "http://" + addr + "/searx"}, nil, "")
	r, err := call(hd, "main", "web_search", map[string]any{"query": "q", "count": num(7)})
	if err != nil {
		t.Fatal(err)
	}
	if rs := results(t, r); len(rs) != 7 || rs[6]["url"] != "https://example.org/6" || rs[0]["snippet"] != "c" || r["provider"] != "searxng" {
		t.Fatalf("results %v", r)
	}
	_, err = call(hd, "main", "web_search", map[string]any{"query": "html please"})
	wantCode(t, err, CodeSearchFailed, "json format")
	_, err = call(hd, "main", "web_fetch", map[string]any{"url": "http://" + addr + "/searx/search?q=x&format=json"})
	wantCode(t, err, CodeAddressRefused, "allow_addresses")
}

// TestSearchRefusesRedirects: a provider that redirects is not followed.
func TestSearchRefusesRedirects(t *testing.T) {
	_, addr := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/", http.StatusFound)
	})
	hd := newHandler(t, map[string]any{"searxng_url": "http://" + addr}, nil, "")
	_, err := call(hd, "main", "web_search", map[string]any{"query": "q"})
	wantCode(t, err, CodeSearchFailed, "redirected")
}

func TestConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  map[string]any
		ok   bool
	}{
		{"empty", map[string]any{}, true},
		{"all set", map[string]any{"default_access": "search", "groups": map[string]any{"main": "fetch", "kids": "off"},
			"allow_domains": []any{"example.com"}, "deny_domains": []any{"*.evil.example"}, "allow_addresses": []any{"192.168.1.2:80", "[fd00::1]:8080"},
			"search_provider": "searxng", "searxng_url": "http://192.168.1.2:8888", "timeout_s": num(5), "max_bytes": num(1 << 20)}, true},
		{"unknown key", map[string]any{"acces": "off"}, false},
		{"bad access", map[string]any{"default_access": "all"}, false},
		{"bad group access", map[string]any{"groups": map[string]any{"main": "yes"}}, false},
		{"a URL as a domain", map[string]any{"deny_domains": []any{"https://evil.example/"}}, false},
		{"a name as an address", map[string]any{"allow_addresses": []any{"nas.local:80"}}, false},
		{"an address without a port", map[string]any{"allow_addresses": []any{"192.168.1.2"}}, false},
		{"searxng without its URL", map[string]any{"search_provider": "searxng"}, false},
		{"searxng URL with a user", map[string]any{"searxng_url": "http://u:p@192.168.1.2/"}, false},
		{"timeout over the call's", map[string]any{"timeout_s": num(30)}, false},
		{"max_bytes too big", map[string]any{"max_bytes": num(64 << 20)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.cfg)
			if (err == nil) != tc.ok {
				t.Errorf("parseConfig: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "want") && !strings.Contains(err.Error(), "needs") && !strings.Contains(err.Error(), "takes") && !strings.Contains(err.Error(), "write") {
				t.Errorf("the error does not say what is wanted: %v", err)
			}
		})
	}
	c, _ := parseConfig(map[string]any{"searxng_url": "http://192.168.1.2:8888"})
	if c.Provider != "searxng" {
		t.Errorf("searxng_url alone: provider %q", c.Provider)
	}
	c, _ = parseConfig(map[string]any{})
	if c.Provider != "brave" || c.access("any") != AccessFetch {
		t.Errorf("defaults: %+v", c)
	}
}

// TestConformance loads the manifest and skills as the core does, checks
// the config against config_schema, and calls each tool as the agent
// would.
func TestConformance(t *testing.T) {
	fb := &fakeBrave{}
	s, addr := server(t, fb.ServeHTTP)
	_, page := server(t, page(new(atomic.Int64)))
	plugintest.Conformance(t, ".", New(Options{Dial: directDial, BraveURL: s.URL}),
		plugintest.WithConfig(map[string]any{"allow_addresses": []any{addr, page}, "groups": map[string]any{"main": "fetch"}}),
		plugintest.WithServices(&plugintest.Services{Credentials: plugintest.NewFakeCredentials(map[string]string{BraveKey: "brave-key"})}),
		plugintest.WithSampleArgs("web_search", map[string]any{"query": "hello"}),
		plugintest.WithSampleArgs("web_fetch", map[string]any{"url": "http://" + page + "/"}))
}
