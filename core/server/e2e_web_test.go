package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// The web plugin end to end: the real handler process, built as make
// build builds it and loaded as a bundled plugin with its pin, confined by
// the real core, reaching the network only through its egress point, and
// called by the real bin/ipc from a session (no container). The servers
// are on the loopback, which the plugin may reach only when the exact
// address is allowed (allow_addresses): the refusals run in a core that
// allows nothing, their positive controls in one that allows the server.
// A resolver that answers a public address and then a private one (DNS
// rebinding) is the egress point's own test: core/egress TestResolvesOnce.
// A redirect from https to http, with a test CA the confined plugin
// trusts through the core's SSL_CERT_FILE, is TestWebDowngrade's; a name
// a fake-IP DNS resolves into 198.18.0.0/15 is TestWebFakeIP's
// (e2e_webnet_test.go).

// webBundle is plugins/web as make build bundles it (pluginBundle).
func webBundle(t testing.TB) loader.Bundled { return pluginBundle(t, "web") }

// startWebCore starts a core with the web plugin bundled and config as
// [plugins.web.config], and checks the plugin runs confined.
func startWebCore(t *testing.T, config string) *testCore {
	t.Helper()
	return startWebCoreWith(t, coreOptions{}, config)
}

// startWebCoreWith is startWebCore with o's options and o.Config before
// the plugin's section.
func startWebCoreWith(t *testing.T, o coreOptions, config string) *testCore {
	t.Helper()
	o.Config += "\n[plugins.web]\n[plugins.web.config]\n" + config
	o.Bundled = []loader.Bundled{webBundle(t)}
	c := startCoreWith(t, o)
	st := pluginStatus(t, c, "web")
	if !st.Healthy || st.Source != "bundled" || st.Confinement == nil || st.Confinement.Mode != api.ConfinementConfined {
		t.Fatalf("the web plugin: %+v (confinement %+v)\ncore log:\n%s", st, st.Confinement, c.Log.String())
	}
	return c
}

// webFetch runs web_fetch through bin/ipc in a fresh session of group
// whose prompt is the URL: a given URL in an untainted session, so that
// the call runs at once (provenance and taint are e2e_taint_test.go's);
// the result, or the error's message.
func webFetch(t *testing.T, c *testCore, group, url string) (map[string]any, string) {
	t.Helper()
	h, err := c.Client.Open(context.Background(), api.SessionRequest{Group: group, Runtime: "none", Prompt: "Read " + url})
	if err != nil {
		t.Fatalf("open a session: %v", err)
	}
	defer h.Close()
	b, _ := json.Marshal(map[string]any{"url": url, "max_chars": 100000})
	r := runIPC(t, h.Info().Socket, nil, "tool.invoke.web_fetch", string(b))
	if r.Code == 0 {
		return r.Result, ""
	}
	if r.Err == nil {
		t.Fatalf("web_fetch %s: exit %d: %s", url, r.Code, r.Stderr)
	}
	return nil, r.Err.Message
}

// webServer is the loopback server of the tests: a page (also at /close,
// on a connection closed after it), redirects (?to=), a gzip bomb, a slow drip, an oversize body and a PNG.
type webServer struct {
	addr string
	hits atomic.Int64

	mu  sync.Mutex
	log []string // the request URI of every request, in order
}

// requests are the request URIs (path and query) the server got.
func (ws *webServer) requests() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]string(nil), ws.log...)
}

func newWebServer(t *testing.T) *webServer {
	t.Helper()
	ws := &webServer{}
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zero := make([]byte, 1<<20)
	for range 64 { // 64 MiB of zeros, about 64 KiB compressed
		zw.Write(zero)
	}
	zw.Close()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws.hits.Add(1)
		ws.mu.Lock()
		ws.log = append(ws.log, r.URL.RequestURI())
		ws.mu.Unlock()
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		switch r.URL.Path {
		case "/bomb":
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bomb.Bytes())
		case "/drip":
			w.Header().Set("Content-Type", "text/plain")
			for {
				select {
				case <-stop:
					return
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
					w.Write([]byte("x"))
					w.(http.Flusher).Flush()
				}
			}
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			w.Write(bytes.Repeat([]byte("a"), 2<<20))
		case "/close": // the page, on a connection closed after it
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<html><head><title>Loopback page</title></head><body><article><h1>Loopback page</h1><p>This paragraph is the main content of the page, long enough for the readability port to keep it.</p></article></body></html>`)
		case "/png":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("\x89PNG\r\n\x1a\n"))
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<html><head><title>Loopback page</title></head><body><nav>menu</nav><article><h1>Loopback page</h1><p>This paragraph is the main content of the page, long enough for the readability port to keep it.</p></article></body></html>`)
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })
	ws.addr = strings.TrimPrefix(srv.URL, "http://")
	return ws
}

func TestWebFetchSSRF(t *testing.T) {
	if err := confine.Probe().Missing(); err != nil {
		testutil.Missing(t, fmt.Sprintf("the kernel cannot confine plugins: %v", err))
	}
	ws := newWebServer(t)
	other := listenTCP(t) // another loopback port, never allowed
	_, port, _ := net.SplitHostPort(ws.addr)
	spellings := []string{"127.0.0.1", "2130706433", "0x7f000001", "0x7f.1", "0177.0.0.1", "127.1", "127.0.0.1.", "[::ffff:127.0.0.1]"}

	// A core that allows nothing special: every spelling of the server's
	// address is refused, and so are the other special ranges.
	strict := startWebCore(t, "timeout_s = 2\n")
	for _, host := range spellings {
		_, msg := webFetch(t, strict, "main", "http://"+host+":"+port+"/")
		if !strings.Contains(msg, "loopback address, refused") || !strings.Contains(msg, "allow_addresses") {
			t.Errorf("%s: %q, want a refusal of the loopback naming allow_addresses", host, msg)
		}
	}
	for _, u := range []string{"http://localhost:" + port + "/", "http://[::1]:" + port + "/", "http://169.254.169.254/latest/meta-data/",
		"http://2852039166/", "http://10.0.0.1/", "http://192.168.0.1/", "http://100.64.0.1/", "http://[fc00::1]/", "http://[fe80::1]/",
		"http://224.0.0.1/", "http://0.0.0.0:" + port + "/", "http://[::]:" + port + "/", "http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::]/",
		"http://[2001::7f00:1]/", "http://198.18.0.1/", "http://[::127.0.0.1]/"} {
		if _, msg := webFetch(t, strict, "main", u); !strings.Contains(msg, "refused") || !strings.Contains(msg, "allow_addresses") {
			t.Errorf("%s: %q, want a refusal naming allow_addresses", u, msg)
		}
	}
	if n := ws.hits.Load(); n != 0 {
		t.Fatalf("the server got %d requests from a core that allows none", n)
	}

	// The same server, its exact address allowed: reached in every spelling
	// (the positive control), and what it serves is checked.
	open := startWebCore(t, fmt.Sprintf("timeout_s = 2\nmax_bytes = 1048576\nallow_addresses = [%q]\n", ws.addr))
	for _, host := range spellings {
		r, msg := webFetch(t, open, "main", "http://"+host+":"+port+"/")
		if msg != "" || r["title"] != "Loopback page" || r["url"] != "http://"+ws.addr+"/" || !strings.Contains(r["content"].(string), "main content") ||
			strings.Contains(r["content"].(string), "menu") {
			t.Errorf("positive control: %s with %s allowed: %v %q", host, ws.addr, r, msg)
		}
	}
	// (A file: URL is no given URL, so the core's gate holds it for a
	// person before the plugin sees it; the plugin's refusal of it is in
	// plugins/web's own tests.)
	for _, tc := range []struct{ what, url, want string }{
		{"a redirect to another loopback port", "http://" + ws.addr + "/?to=http://" + other.ln.Addr().String() + "/", "loopback address, refused"},
		{"a redirect to the loopback spelled in decimal", "http://" + ws.addr + "/?to=http://2130706433:" + port + "/x", ""}, // the same allowed address: followed
		{"a redirect to the metadata address", "http://" + ws.addr + "/?to=http://169.254.169.254/latest/meta-data/", "metadata address, refused"},
		{"a redirect chain to the metadata address", "http://" + ws.addr + "/?to=" + url.QueryEscape("http://"+ws.addr+"/?to=http://169.254.169.254/"), "metadata address, refused"},
		{"six redirects", chain(ws.addr, 6), "more than 5 redirects"},
		{"five redirects", chain(ws.addr, 5), ""},
		{"a gzip bomb", "http://" + ws.addr + "/bomb", "max_bytes"},
		{"an oversize body", "http://" + ws.addr + "/big", "max_bytes"},
		{"a slow drip", "http://" + ws.addr + "/drip", "did not finish within 2s"},
		{"a wrong content type", "http://" + ws.addr + "/png", "HTML, text and JSON only"},
	} {
		r, msg := webFetch(t, open, "main", tc.url)
		switch {
		case tc.want == "" && msg != "":
			t.Errorf("%s: %q, want it fetched", tc.what, msg)
		case tc.want != "" && !strings.Contains(msg, tc.want):
			t.Errorf("%s: %v %q, want an error saying %q", tc.what, r, msg, tc.want)
		}
	}
	if n := other.n.Load(); n != 0 {
		t.Errorf("the other loopback port got %d connections", n)
	}
	// The egress point audited the plugin's connections to the allowed
	// address, and nothing else.
	var reached int
	for _, e := range open.Audit(t) {
		if e.Source == "web" && e.Stage == audit.StageEgress {
			if !strings.Contains(e.Reason, ws.addr) {
				t.Errorf("an egress record for another address: %+v", e)
			}
			reached++
		}
	}
	if reached == 0 {
		t.Error("no egress record of the allowed server")
	}
}

// chain is a URL that redirects n times before the page.
func chain(addr string, n int) string {
	u := "http://" + addr + "/"
	for range n {
		u = "http://" + addr + "/?to=" + url.QueryEscape(u)
	}
	return u
}

// TestWebSearchThroughTheCore: web_search against a SearXNG on the
// loopback, reached because searxng_url names it (the manifest's
// hosts_from_config declares it to the egress point), while web_fetch of
// that same address stays refused (the opt-in is the search's only); and
// the access per group: "kids" may search but not fetch, "work" neither.
func TestWebSearchThroughTheCore(t *testing.T) {
	if err := confine.Probe().Missing(); err != nil {
		testutil.Missing(t, fmt.Sprintf("the kernel cannot confine plugins: %v", err))
	}
	var searches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" {
			http.NotFound(w, r)
			return
		}
		searches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"query": %q, "results": [{"title": "One", "url": "https://one.example/", "content": "first"}, {"title": "Two", "url": "https://two.example/", "content": "second"}, {"title": "Three", "url": "https://three.example/", "content": "third"}]}`, r.URL.Query().Get("q"))
	}))
	t.Cleanup(srv.Close)
	c := startWebCore(t, fmt.Sprintf("searxng_url = %q\ntimeout_s = 5\ngroups = { kids = \"search\", work = \"off\" }\n", srv.URL))
	search := func(group string) ipcRun {
		return runIPC(t, c.Session(t, group).Socket, nil, "tool.invoke.web_search", `{"query": "carapace", "count": 2}`)
	}
	for _, g := range []string{"main", "kids"} {
		r := search(g)
		if r.Code != 0 {
			t.Fatalf("web_search in %s: %s\ncore log:\n%s", g, r.Stderr, c.Log.String())
		}
		rs, _ := r.Result["results"].([]any)
		first, _ := rs[0].(map[string]any)
		if len(rs) != 2 || first["url"] != "https://one.example/" || first["snippet"] != "first" || r.Result["provider"] != "searxng" {
			t.Errorf("web_search in %s: %v", g, r.Result)
		}
	}
	if n := searches.Load(); n != 2 {
		t.Errorf("the SearXNG got %d searches, want 2", n)
	}
	if r := search("work"); r.Code == 0 || r.Err == nil || !strings.Contains(r.Err.Message, "web_search is off for the group work") {
		t.Errorf("web_search in work (off): %+v %v", r.Err, r.Result)
	}
	_, msg := webFetch(t, c, "main", srv.URL+"/search?q=x&format=json")
	if !strings.Contains(msg, "loopback address, refused") {
		t.Errorf("web_fetch of the SearXNG's address: %q, want it refused", msg)
	}
	_, msg = webFetch(t, c, "kids", "https://example.org/")
	if !strings.Contains(msg, "web_fetch is off for the group kids") {
		t.Errorf("web_fetch in kids (search only): %q", msg)
	}
	if n := searches.Load(); n != 2 {
		t.Errorf("the SearXNG got %d requests after the refusals, want 2", n)
	}
}
