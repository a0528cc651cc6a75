package egress_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/egress"
	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/core/plugin"
)

// TestFakeIP: with [network] fake_ip, an address of a configured prefix
// that a name resolved to is dialled, for a public plugin and a declared
// host alike, and the reply says it was taken as a fake-IP answer; the
// same address given literally is refused, and so is every fake-IP answer
// without the opt-in, with a refusal that names it.
func TestFakeIP(t *testing.T) {
	srv := newServer(t, false)
	v4 := []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}
	v6 := []netip.Prefix{netip.MustParsePrefix("fdfe:dcba:9876::/48")}
	res := &fakeResolver{answer: map[string][][]netip.Addr{
		"news.test":  {addrs("198.18.0.7")},
		"imap.test":  {addrs("198.18.0.9")},
		"wide.test":  {addrs("198.19.0.1")},
		"six.test":   {addrs("fdfe:dcba:9876::5")},
		"ula.test":   {addrs("fd00::1")},
		"local.test": {addrs("127.0.0.1")},
		"pub.test":   {addrs("93.184.216.34")},
	}}
	imap := []egress.Host{{Name: "imap.test", Port: 993}}
	for _, tc := range []struct {
		what     string
		o        egress.Options
		address  string
		dialled  string // "" refused
		fake     bool   // the reply's word
		refusal  []string
		notWords []string
	}{
		{what: "a name to 198.18, opted in", o: egress.Options{Public: true, FakeIP: v4}, address: "news.test:443", dialled: "198.18.0.7:443", fake: true},
		{what: "a declared name to 198.18, opted in", o: egress.Options{Allow: imap, FakeIP: v4}, address: "imap.test:993", dialled: "198.18.0.9:993", fake: true},
		{what: "a name to fc00::/7, opted in", o: egress.Options{Public: true, FakeIP: v6}, address: "six.test:443", dialled: "[fdfe:dcba:9876::5]:443", fake: true},
		{what: "a public answer, opted in (control)", o: egress.Options{Public: true, FakeIP: v4}, address: "pub.test:443", dialled: "93.184.216.34:443"},
		{what: "a name to 198.18, not opted in", o: egress.Options{Public: true}, address: "news.test:443",
			refusal: []string{"198.18.0.7 (benchmark)", "[network] fake_ip in config.toml", "198.18.0.0/15"}},
		{what: "a declared name to 198.18, not opted in", o: egress.Options{Allow: imap}, address: "imap.test:993",
			refusal: []string{"198.18.0.9 (benchmark)", "[network] fake_ip in config.toml"}},
		{what: "a name to fc00::/7, not opted in", o: egress.Options{Public: true}, address: "ula.test:443",
			refusal: []string{"fd00::1 (unique-local)", "[network] fake_ip in config.toml"}},
		{what: "a name outside the configured prefix", o: egress.Options{Public: true, FakeIP: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/16")}}, address: "wide.test:443",
			refusal: []string{"198.19.0.1 (benchmark)", "[network] fake_ip in config.toml"}},
		{what: "a literal 198.18 address, opted in", o: egress.Options{Public: true, FakeIP: v4}, address: "198.18.0.7:443",
			refusal: []string{"198.18.0.7 (benchmark)", "never to an address given literally"}},
		{what: "a literal fc00::/7 address, opted in", o: egress.Options{Public: true, FakeIP: v6}, address: "[fdfe:dcba:9876::5]:443",
			refusal: []string{"(unique-local)", "never to an address given literally"}},
		{what: "a name to the loopback, opted in", o: egress.Options{Public: true, FakeIP: v4}, address: "local.test:443",
			refusal: []string{"127.0.0.1 (loopback)"}, notWords: []string{"fake_ip"}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			fd := &fakeDialer{routes: map[string]string{}}
			if tc.dialled != "" {
				fd.routes[tc.dialled] = srv.addr()
			}
			tc.o.Resolver, tc.o.Dialer = res, fd.dial
			_, rec, _ := newPoint(t, tc.o)
			c, err := dial(tc.address)
			if tc.dialled == "" {
				ee := refusedWith(t, err, pluginproto.EgressAddressRefused)
				for _, w := range tc.refusal {
					if !strings.Contains(ee.Message, w) {
						t.Errorf("refusal %q does not say %q", ee.Message, w)
					}
				}
				for _, w := range tc.notWords {
					if strings.Contains(ee.Message, w) {
						t.Errorf("refusal %q says %q", ee.Message, w)
					}
				}
				if d := fd.dialled(); len(d) != 0 {
					t.Errorf("dialled %v", d)
				}
				if r := rec.next(t); r.Code != pluginproto.EgressAddressRefused || r.FakeIP {
					t.Errorf("record %+v", r)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.RemoteAddr().String() != tc.dialled || plugin.AcceptedAsFakeIP(c) != tc.fake {
				t.Errorf("reached %s, fake-IP %v; want %s, %v", c.RemoteAddr(), plugin.AcceptedAsFakeIP(c), tc.dialled, tc.fake)
			}
			if got := exchange(t, c, "hi"); got != "got 2: hi" {
				t.Errorf("answer %q", got)
			}
			c.Close()
			if r := rec.next(t); r.Code != "" || r.Addr != tc.dialled || r.FakeIP != tc.fake {
				t.Errorf("record %+v", r)
			}
		})
	}
}

// TestFakeIPPrefixChecked: the point takes only fake-IP prefixes inside
// 198.18.0.0/15 or fc00::/7, as config load does.
func TestFakeIPPrefixChecked(t *testing.T) {
	for _, p := range []string{"10.0.0.0/8", "198.0.0.0/8", "::/0", "2001:db8::/32"} {
		_, err := egress.New(egress.Options{Plugin: "web", Public: true, FakeIP: []netip.Prefix{netip.MustParsePrefix(p)}})
		if err == nil || !strings.Contains(err.Error(), "not inside 198.18.0.0/15 or fc00::/7") {
			t.Errorf("%s: %v", p, err)
		}
	}
	pt, err := egress.New(egress.Options{Plugin: "web", Public: true, FakeIP: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("fd00::/8")}})
	if err != nil {
		t.Fatalf("the ranges themselves: %v", err)
	}
	pt.Close()
}
