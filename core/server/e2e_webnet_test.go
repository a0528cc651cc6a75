package server_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// fakeIPNet stands for a machine with a fake-IP DNS (Clash, Surge,
// sing-box): its resolver answers every name of names with an address of
// 198.18.0.0/15, and its tunnel carries a connection to that address to
// the real server, here one on the loopback. The egress point resolves
// and checks as it always does; only DNS and the tunnel are stood in for
// (this machine's resolver answers nothing, and 198.18.0.0/15 routes
// nowhere here).
type fakeIPNet struct {
	names  map[string]netip.Addr // name -> fake IP
	tunnel map[string]string     // "fakeip:port" -> real address
	dials  atomic.Int64          // connections the tunnel carried
}

func (f *fakeIPNet) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := f.names[host]; ok && network == "ip" {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (f *fakeIPNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	to, ok := f.tunnel[addr]
	if !ok {
		return nil, fmt.Errorf("the fake-IP tunnel has no route to %s", addr)
	}
	f.dials.Add(1)
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

func (f *fakeIPNet) egressNet() *loader.EgressNet {
	return &loader.EgressNet{Resolver: f, Dialer: f.dial}
}

// TestWebFakeIP: through the real core and the confined web plugin, a
// name that the fake-IP DNS resolves into 198.18.0.0/15 is fetched when
// [network] fake_ip names the range (the egress point accepts it and says
// so, the plugin's own check of the address defers to it), and refused
// naming that setting when it does not; the fake address given literally
// is refused even with the opt-in; and a range outside 198.18.0.0/15 and
// fc00::/7 stops the core at config load.
func TestWebFakeIP(t *testing.T) {
	if err := confine.Probe().Missing(); err != nil {
		testutil.Missing(t, fmt.Sprintf("the kernel cannot confine plugins: %v", err))
	}
	ws := newWebServer(t)
	_, port, _ := net.SplitHostPort(ws.addr)
	fake := netip.MustParseAddr("198.18.0.7")
	fn := &fakeIPNet{names: map[string]netip.Addr{"news.fakeip.test": fake}, tunnel: map[string]string{net.JoinHostPort(fake.String(), port): ws.addr}}
	byName := "http://news.fakeip.test:" + port + "/close" // the record comes when the connection ends

	// Without the opt-in: refused by the egress point, naming it.
	strict := startWebCoreWith(t, coreOptions{EgressNet: fn.egressNet()}, "timeout_s = 5\n")
	if _, msg := webFetch(t, strict, "main", byName); !strings.Contains(msg, "198.18.0.7 (benchmark)") || !strings.Contains(msg, "[network] fake_ip in config.toml") {
		t.Errorf("a fake-IP answer without the opt-in: %q, want a refusal naming [network] fake_ip in config.toml", msg)
	}
	if n := fn.dials.Load(); n != 0 || ws.hits.Load() != 0 {
		t.Fatalf("without the opt-in the tunnel carried %d connections, the server got %d requests", n, ws.hits.Load())
	}

	// With it: the same name is fetched (the positive control of the
	// refusal above), and the egress record says why it was let through.
	open := startWebCoreWith(t, coreOptions{Config: "[network]\nfake_ip = [\"198.18.0.0/15\"]\n", EgressNet: fn.egressNet()}, "timeout_s = 5\n")
	r, msg := webFetch(t, open, "main", byName)
	if msg != "" || r["title"] != "Loopback page" || !strings.Contains(fmt.Sprint(r["content"]), "main content") {
		t.Fatalf("a fake-IP answer with the opt-in: %v %q\ncore log:\n%s", r, msg, open.Log.String())
	}
	if n := fn.dials.Load(); n != 1 {
		t.Errorf("the tunnel carried %d connections, want 1", n)
	}
	waitFor(t, "the egress record of the fake-IP connection", func() bool {
		for _, e := range open.Audit(t) {
			if e.Source == "web" && e.Stage == audit.StageEgress && strings.Contains(e.Reason, "news.fakeip.test") {
				if !strings.Contains(e.Reason, "via 198.18.0.7:"+port) || !strings.Contains(e.Reason, "fake-IP DNS answer") {
					t.Fatalf("egress record %+v", e)
				}
				return true
			}
		}
		return false
	})

	// The fake address given literally: refused, opt-in or not, and
	// never dialled.
	_, msg = webFetch(t, open, "main", "http://198.18.0.7:"+port+"/")
	if !strings.Contains(msg, "benchmark address, refused") {
		t.Errorf("a literal fake-IP address with the opt-in: %q, want it refused", msg)
	}
	if n := fn.dials.Load(); n != 1 {
		t.Errorf("the tunnel carried %d connections after the literal, want still 1", n)
	}

	// A range outside the two: the core does not start, and says why.
	_, err := runCore(t, newHome(t), coreOptions{Config: "[network]\nfake_ip = [\"10.0.0.0/8\"]\n"})
	if err == nil || !strings.Contains(err.Error(), "network.fake_ip") || !strings.Contains(err.Error(), "not inside 198.18.0.0/15 or fc00::/7") {
		t.Errorf("a fake_ip range outside 198.18.0.0/15 and fc00::/7: %v, want config load to fail naming it", err)
	}
}

// TestWebDowngrade: through the real core and the confined web plugin, a
// redirect from https to plain http is refused. The plugin trusts the test
// server's certificate because the core's SSL_CERT_FILE names it (the
// core passes it on and grants read on it); the https page of the same
// server is fetched (so the refusal is the downgrade check, not a TLS
// failure), and a core without SSL_CERT_FILE fails that same fetch on the
// certificate (so the trust comes from the variable).
func TestWebDowngrade(t *testing.T) {
	if err := confine.Probe().Missing(); err != nil {
		testutil.Missing(t, fmt.Sprintf("the kernel cannot confine plugins: %v", err))
	}
	plain := newWebServer(t)
	var tlsHits atomic.Int64
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tlsHits.Add(1)
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>TLS page</title></head><body><article><h1>TLS page</h1><p>This paragraph came over TLS and is long enough for the readability port to keep it.</p></article></body></html>`)
	}))
	t.Cleanup(tlsSrv.Close)
	tlsAddr := strings.TrimPrefix(tlsSrv.URL, "https://")
	pemFile := filepath.Join(t.TempDir(), "test-ca.pem")
	if err := os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	webCfg := fmt.Sprintf("timeout_s = 5\nallow_addresses = [%q, %q]\n", tlsAddr, plain.addr)
	page := "https://" + tlsAddr + "/"

	// Without SSL_CERT_FILE the plugin does not trust the server.
	t.Setenv("SSL_CERT_FILE", "")
	untrusting := startWebCore(t, webCfg)
	if _, msg := webFetch(t, untrusting, "main", page); !strings.Contains(msg, "certificate") {
		t.Errorf("https without the test CA trusted: %q, want a certificate failure", msg)
	}

	t.Setenv("SSL_CERT_FILE", pemFile)
	c := startWebCore(t, webCfg)
	if st := pluginStatus(t, c, "web"); !slices.ContainsFunc(st.Confinement.Read, func(r string) bool { return strings.HasPrefix(r, pemFile+" (SSL_CERT_FILE") }) {
		t.Errorf("the web plugin's confinement does not show the trusted certificates readable: %v", st.Confinement.Read)
	}
	// The positive control: the https page, trusted through SSL_CERT_FILE.
	r, msg := webFetch(t, c, "main", page)
	if msg != "" || r["title"] != "TLS page" || r["url"] != page {
		t.Fatalf("https with the test CA trusted: %v %q\ncore log:\n%s", r, msg, c.Log.String())
	}
	// The downgrade: refused, and the plain server never asked.
	before := tlsHits.Load()
	_, msg = webFetch(t, c, "main", page+"?to="+url.QueryEscape("http://"+plain.addr+"/"))
	if !strings.Contains(msg, "redirects from https to plain http") || !strings.Contains(msg, "refused") {
		t.Errorf("a redirect from https to http: %q, want the downgrade refused", msg)
	}
	if tlsHits.Load() != before+1 {
		t.Errorf("the TLS server got %d requests for the redirect, want 1", tlsHits.Load()-before)
	}
	if n := plain.hits.Load(); n != 0 {
		t.Errorf("the plain http server got %d requests after a downgrade", n)
	}
	// A redirect from https to https on the same trusted server is
	// followed (the check is the scheme, not any redirect).
	r, msg = webFetch(t, c, "main", page+"?to="+url.QueryEscape(page))
	if msg != "" || r["title"] != "TLS page" {
		t.Errorf("a redirect from https to https: %v %q", r, msg)
	}
}
