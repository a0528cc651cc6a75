package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// page is a handler that answers a small HTML page and counts its hits.
func page(hits *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>Local page</title></head><body><article><h1>Local page</h1><p>The local server answered this paragraph, which is long enough to be the main content of the page for the readability port.</p></article></body></html>`)
	}
}

// TestAddressSpellings: every spelling of a special address is refused
// with an error that names the opt-in; the same spellings of the loopback
// reach the local server once its exact address is allowed (the positive
// control), which also shows they all mean 127.0.0.1.
func TestAddressSpellings(t *testing.T) {
	var hits atomic.Int64
	_, addr := server(t, page(&hits))
	_, port, _ := net.SplitHostPort(addr)
	loopbacks := []string{"127.0.0.1", "2130706433", "0x7f000001", "0x7f.1", "0177.0.0.1", "0177.1", "127.1", "127.0.1", "127.0.0.1.", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]"}
	refused := h(t, nil)
	allowed := h(t, map[string]any{"allow_addresses": []any{"127.0.0.1:" + port}})
	for _, host := range loopbacks {
		u := "http://" + host + ":" + port + "/"
		_, err := call(refused, "main", "web_fetch", map[string]any{"url": u})
		wantCode(t, err, CodeAddressRefused, "allow_addresses", "loopback")
		before := hits.Load()
		r, err := call(allowed, "main", "web_fetch", map[string]any{"url": u})
		if err != nil || hits.Load() != before+1 {
			t.Errorf("positive control: %s with 127.0.0.1:%s allowed: %v %v", u, port, r, err)
		} else if r["title"] != "Local page" || !strings.Contains(r["url"].(string), "127.0.0.1:"+port) {
			t.Errorf("%s: %v", u, r)
		}
	}
	if n := hits.Load(); n != int64(len(loopbacks)) {
		t.Errorf("the server got %d requests, want %d (the allowed ones only)", n, len(loopbacks))
	}
	// Other special ranges, refused before any connection (nothing listens
	// there: a dial would fail differently).
	for _, u := range []string{
		"http://localhost/", "http://app.localhost/", "http://[::1]/", "http://0/", "http://0.0.0.0/",
		"http://169.254.169.254/latest/meta-data/", "http://2852039166/", "http://169.254.43518/", "http://[fd00:ec2::254]/",
		"http://10.0.0.1/", "http://0x0a.1/", "http://172.16.0.1/", "http://192.168.1.1/", "http://100.64.0.1/",
		"http://198.18.0.1/", "http://224.0.0.1/", "http://[fc00::1]/", "http://[fe80::1]/", "http://[ff02::1]/",
		"http://[::]/", "http://[::127.0.0.1]/", "http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::]/", "http://[2001::1]/",
	} {
		_, err := call(refused, "main", "web_fetch", map[string]any{"url": u})
		wantCode(t, err, CodeAddressRefused, "allow_addresses")
	}
	// Full-width digits are the loopback too, once mapped as a resolver
	// would map them.
	_, err := call(refused, "main", "web_fetch", map[string]any{"url": "http://１２７.０.０.１:" + port + "/"})
	wantCode(t, err, CodeAddressRefused, "loopback")
	if r, err := call(allowed, "main", "web_fetch", map[string]any{"url": "http://１２７.０.０.１:" + port + "/"}); err != nil || r["title"] != "Local page" {
		t.Errorf("positive control: full-width digits, allowed: %v %v", r, err)
	}
	for _, u := range []string{"http://1.2.3.4.5/", "http://0x1g/", "http://example.123/", "http://[fe80::1%25eth0]/", "http://exa\u00admple..com/"} {
		_, err := call(refused, "main", "web_fetch", map[string]any{"url": u})
		wantCode(t, err, CodeInvalidURL)
	}
	for _, u := range []string{"file:///etc/passwd", "ftp://example.com/", "gopher://example.com/"} {
		_, err := call(refused, "main", "web_fetch", map[string]any{"url": u})
		wantCode(t, err, CodeSchemeRefused)
	}
	_, err = call(allowed, "main", "web_fetch", map[string]any{"url": "http://user:pw@127.0.0.1:" + port + "/"})
	wantCode(t, err, CodeInvalidURL, "password")
}

// h is a handler with cfg and a 2 s timeout.
func h(t *testing.T, cfg map[string]any) *Handler {
	t.Helper()
	if cfg == nil {
		cfg = map[string]any{}
	}
	if _, ok := cfg["timeout_s"]; !ok {
		cfg["timeout_s"] = num(2)
	}
	return newHandler(t, cfg, nil, "")
}

// TestRedirects: each hop is checked again; a chain that ends at another
// loopback port or at the metadata address is refused and the target sees
// nothing; the same chain to an allowed target is followed (control); more
// than 5 hops are refused, 5 are followed.
func TestRedirects(t *testing.T) {
	var targetHits, hopHits atomic.Int64
	var referer atomic.Value
	_, target := server(t, func(w http.ResponseWriter, r *http.Request) {
		referer.Store(r.Header.Get("Referer"))
		page(&targetHits)(w, r)
	})
	_, hop := server(t, func(w http.ResponseWriter, r *http.Request) {
		hopHits.Add(1)
		switch to := r.URL.Query().Get("to"); to {
		case "":
			var n int
			fmt.Sscan(strings.TrimPrefix(r.URL.Path, "/"), &n)
			if n > 0 {
				http.Redirect(w, r, fmt.Sprintf("/%d", n-1), http.StatusFound)
				return
			}
			page(new(atomic.Int64))(w, r)
		default:
			http.Redirect(w, r, to, http.StatusFound)
		}
	})
	onlyHop := h(t, map[string]any{"allow_addresses": []any{hop}})
	both := h(t, map[string]any{"allow_addresses": []any{hop, target}})
	for _, to := range []string{"http://" + target + "/", "http://2130706433:" + strings.Split(target, ":")[1] + "/", "http://169.254.169.254/latest/meta-data/", "http://[::1]/"} {
		_, err := call(onlyHop, "main", "web_fetch", map[string]any{"url": "http://" + hop + "/?to=" + to})
		wantCode(t, err, CodeAddressRefused, "redirect to", "allow_addresses")
	}
	if n := targetHits.Load(); n != 0 {
		t.Fatalf("the refused target got %d requests", n)
	}
	r, err := call(both, "main", "web_fetch", map[string]any{"url": "http://" + hop + "/?to=http://" + target + "/"})
	if err != nil || targetHits.Load() != 1 || r["url"] != "http://"+target+"/" {
		t.Fatalf("positive control: the chain to the allowed target: %v %v", r, err)
	}
	if ref := referer.Load(); ref != "" {
		t.Errorf("the redirect target was told where the fetch came from: Referer %q", ref)
	}
	// Five redirects are followed, six are not.
	if _, err := call(onlyHop, "main", "web_fetch", map[string]any{"url": "http://" + hop + "/5"}); err != nil {
		t.Fatalf("5 redirects: %v", err)
	}
	_, err = call(onlyHop, "main", "web_fetch", map[string]any{"url": "http://" + hop + "/6"})
	wantCode(t, err, CodeTooManyRedirects)
}

// TestDowngrade: a redirect from https to http is refused; from https to
// https it is followed (control).
func TestDowngrade(t *testing.T) {
	var plainHits atomic.Int64
	_, plain := server(t, page(&plainHits))
	tlsSrv := httpsServer(t)
	tlsAddr := strings.TrimPrefix(tlsSrv.URL, "https://")
	hd := h(t, map[string]any{"allow_addresses": []any{plain, tlsAddr}})
	hd.tr.TLSClientConfig = tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	_, err := call(hd, "main", "web_fetch", map[string]any{"url": tlsSrv.URL + "/?to=http://" + plain + "/"})
	wantCode(t, err, CodeDowngrade, "https to plain http")
	if plainHits.Load() != 0 {
		t.Fatal("the http target was reached")
	}
	r, err := call(hd, "main", "web_fetch", map[string]any{"url": tlsSrv.URL + "/?to=" + tlsSrv.URL + "/page"})
	if err != nil || r["title"] != "Local page" {
		t.Fatalf("positive control, https to https: %v %v", r, err)
	}
	// http to https is fine too.
	r, err = call(hd, "main", "web_fetch", map[string]any{"url": "http://" + plain + "/"})
	if err != nil || r["title"] != "Local page" {
		t.Fatalf("plain page: %v %v", r, err)
	}
}

// gzipOf compresses n zero bytes.
func gzipOf(t testing.TB, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	chunk := make([]byte, 64<<10)
	for left := n; left > 0; left -= len(chunk) {
		if left < len(chunk) {
			chunk = chunk[:left]
		}
		if _, err := zw.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	zw.Close()
	return buf.Bytes()
}

// TestBodyBounds: a gzip bomb (a small body that decodes to 64 MiB), an
// oversize body with and without its length, and a wrong content type
// are refused; a gzip body, a body of exactly max_bytes and each allowed
// type are read (controls).
func TestBodyBounds(t *testing.T) {
	const max = 64 << 10
	bomb := gzipOf(t, 64<<20)
	small := gzipOf(t, 1000)
	_, addr := server(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if ct := q.Get("ct"); ct != "none" {
			if ct == "" {
				ct = "text/plain"
			}
			w.Header().Set("Content-Type", ct)
		}
		switch q.Get("body") {
		case "bomb", "gzip":
			w.Header().Set("Content-Encoding", "gzip")
			if q.Get("body") == "bomb" {
				w.Write(bomb)
			} else {
				w.Write(small)
			}
		case "exact":
			w.Write(bytes.Repeat([]byte("a"), max))
		case "over":
			w.Write(bytes.Repeat([]byte("a"), max+1))
		case "overchunked":
			for i := 0; i < 4; i++ {
				w.Write(bytes.Repeat([]byte("a"), max/2))
				w.(http.Flusher).Flush()
			}
		case "br":
			w.Header().Set("Content-Encoding", "br")
			w.Write([]byte{0x1b, 0x03, 0x00, 0xf8})
		case "png":
			w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
		default:
			w.Write([]byte(`{"ok": true}`))
		}
	})
	hd := h(t, map[string]any{"allow_addresses": []any{addr}, "max_bytes": num(max)})
	fetchQ := func(q string) (map[string]any, error) {
		return call(hd, "main", "web_fetch", map[string]any{"url": "http://" + addr + "/?" + q, "max_chars": num(MaxMaxChars)})
	}
	if len(bomb) > max {
		t.Fatalf("the bomb is %d bytes compressed: not a bomb under max_bytes", len(bomb))
	}
	_, err := fetchQ("body=bomb")
	wantCode(t, err, CodeTooLarge, "max_bytes")
	for _, q := range []string{"body=over", "body=overchunked"} {
		_, err = fetchQ(q)
		wantCode(t, err, CodeTooLarge, "max_bytes")
	}
	_, err = fetchQ("body=br")
	wantCode(t, err, CodeContentType, "encoded as br")
	for _, q := range []string{"ct=image/png&body=png", "ct=application/octet-stream", "ct=application/pdf", "ct=none&body=png"} {
		_, err = fetchQ(q)
		wantCode(t, err, CodeContentType, "HTML, text and JSON")
	}
	// Controls.
	if r, err := fetchQ("body=gzip"); err != nil || len(r["content"].(string)) != 1000 {
		t.Errorf("a gzip body: %v", err)
	}
	if r, err := fetchQ("body=exact"); err != nil || len(r["content"].(string)) != max {
		t.Errorf("a body of exactly max_bytes: %v", err)
	}
	for _, ct := range []string{"application/json", "application/ld+json", "text/plain;charset=utf-8", "text/markdown", "none"} {
		if r, err := fetchQ("ct=" + url.QueryEscape(ct)); err != nil || !strings.Contains(r["content"].(string), `"ok"`) {
			t.Errorf("content type %s: %v %v", ct, r, err)
		}
	}
}

// TestSlowDrip: a server that sends a byte every 50 ms forever is cut off
// by the whole fetch's deadline, with the deadline's error.
func TestSlowDrip(t *testing.T) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	_, addr := server(t, func(w http.ResponseWriter, r *http.Request) {
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
	})
	hd := h(t, map[string]any{"allow_addresses": []any{addr}, "timeout_s": num(1)})
	_, err := call(hd, "main", "web_fetch", map[string]any{"url": "http://" + addr + "/"})
	wantCode(t, err, CodeTimeout, "timeout_s")
}

// TestMaxChars: a long text is cut at max_chars with a note; a short one
// is whole.
func TestMaxChars(t *testing.T) {
	text := strings.Repeat("é", 500)
	_, addr := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, text)
	})
	hd := h(t, map[string]any{"allow_addresses": []any{addr}})
	r, err := call(hd, "main", "web_fetch", map[string]any{"url": "http://" + addr + "/", "max_chars": num(100)})
	if err != nil {
		t.Fatal(err)
	}
	if c := r["content"].(string); c != strings.Repeat("é", 100) || r["truncated"] != true || !strings.Contains(r["note"].(string), "cut at 100 of 500") {
		t.Errorf("cut: %q %v %v", c, r["truncated"], r["note"])
	}
	if r["fetched_at"] != "2026-01-02T10:42:00Z" || r["content_type"] != "text/plain" {
		t.Errorf("answer: %v", r)
	}
	for _, n := range []int{99, MaxMaxChars + 1} {
		_, err = call(hd, "main", "web_fetch", map[string]any{"url": "http://" + addr + "/", "max_chars": num(n)})
		wantCode(t, err, CodeInvalidArgument, "max_chars")
	}
	r, err = call(hd, "main", "web_fetch", map[string]any{"url": "http://" + addr + "/"})
	if err != nil || r["content"] != text || r["truncated"] != false || r["note"] != nil {
		t.Errorf("whole: %v %v", r, err)
	}
}

// namedDial resolves the names in routes to the local server, as a
// resolver would, so that domain rules can be tested without DNS.
func namedDial(routes map[string]string) DialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if to, ok := routes[address]; ok {
			address = to
		}
		return directDial(ctx, network, address)
	}
}

// TestDomainsAndAccess: deny_domains and allow_domains, on the first URL
// and on each redirect; off, search and fetch per group.
func TestDomainsAndAccess(t *testing.T) {
	var hits atomic.Int64
	_, addr := server(t, func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		page(&hits)(w, r)
	})
	routes := map[string]string{}
	for _, n := range []string{"docs.example.com", "example.com", "evil.example", "www.evil.example", "other.org"} {
		routes[n+":80"] = addr
	}
	mk := func(cfg map[string]any) *Handler {
		cfg["allow_addresses"] = []any{addr}
		hd := New(Options{Dial: namedDial(routes), Now: func() time.Time { return fixedNow }})
		if err := hd.Init(context.Background(), cfg, &plugintest.Services{Credentials: plugintest.NewFakeCredentials(nil)}); err != nil {
			t.Fatal(err)
		}
		return hd
	}
	deny := mk(map[string]any{"deny_domains": []any{"evil.example"}})
	allow := mk(map[string]any{"allow_domains": []any{"example.com"}})
	for _, tc := range []struct {
		h    *Handler
		url  string
		code string // "": fetched
	}{
		{deny, "http://docs.example.com/", ""},
		{deny, "http://evil.example/", CodeDomainRefused},
		{deny, "http://WWW.Evil.Example./", CodeDomainRefused},
		{deny, "http://docs.example.com/?to=http://www.evil.example/", CodeDomainRefused},
		{allow, "http://example.com/", ""},
		{allow, "http://docs.example.com/", ""},
		{allow, "http://other.org/", CodeDomainRefused},
		{allow, "http://example.com/?to=http://other.org/", CodeDomainRefused},
		{allow, "http://example.com/?to=http://docs.example.com/", ""},
	} {
		_, err := call(tc.h, "main", "web_fetch", map[string]any{"url": tc.url})
		if tc.code == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.url, err)
			}
			continue
		}
		wantCode(t, err, tc.code, "_domains")
	}

	// A name that resolves to a special address (here every name leads to
	// the loopback) is refused by the address the connection reached, and
	// the server sees nothing; allowed, it is reached (above).
	before := hits.Load()
	strict := New(Options{Dial: namedDial(routes), Now: func() time.Time { return fixedNow }})
	if err := strict.Init(context.Background(), map[string]any{}, &plugintest.Services{Credentials: plugintest.NewFakeCredentials(nil)}); err != nil {
		t.Fatal(err)
	}
	_, err := call(strict, "main", "web_fetch", map[string]any{"url": "http://docs.example.com/"})
	wantCode(t, err, CodeAddressRefused, "resolved to 127.0.0.1", "loopback", "allow_addresses")
	if hits.Load() != before {
		t.Error("the server was reached through a name that resolved to the loopback")
	}

	groups := mk(map[string]any{"default_access": "off", "groups": map[string]any{"main": "fetch", "kids": "search"}})
	for _, tc := range []struct {
		group, tool string
		ok          bool
	}{
		{"main", "web_fetch", true}, {"kids", "web_fetch", false}, {"stranger", "web_fetch", false},
		{"kids", "web_search", true}, {"stranger", "web_search", false},
	} {
		args := map[string]any{"url": "http://example.com/"}
		if tc.tool == "web_search" {
			args = map[string]any{"query": "x"}
		}
		_, err = call(groups, tc.group, tc.tool, args)
		te, _ := err.(interface{ Error() string })
		switch {
		case tc.ok && err != nil && strings.Contains(te.Error(), CodeOff):
			t.Errorf("%s %s: refused as off: %v", tc.group, tc.tool, err)
		case !tc.ok:
			wantCode(t, err, CodeOff, tc.group, "[plugins.web.config]")
		}
	}
}
