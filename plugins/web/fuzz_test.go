package web

import (
	"net/url"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/internal/netclass"
)

// FuzzCheckURL: no URL makes the check panic, and a URL it lets through
// has a host that is a valid name or a public address in its canonical
// spelling — never a special address in some other spelling.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"http://example.com/", "http://2130706433/", "http://0x7f.1/", "http://[::ffff:127.0.0.1]/",
		"http://１２７.０.０.１/", "https://xn--nxasmq6b.example/", "http://1.2.3.4.5/", "http://[fe80::1%25eth0]/", "http://93.184.216.34:8080/x?y#z"} {
		f.Add(s)
	}
	c, err := parseConfig(map[string]any{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		if c.checkURL(u) != nil {
			return
		}
		host := u.Hostname()
		a, isAddr, numeric := hostAddr(host)
		switch {
		case isAddr:
			if class, special := netclass.Classify(a); special {
				t.Fatalf("%q passed with the %s address %s", raw, class, a)
			}
			if canon := a.String(); host != canon {
				t.Fatalf("%q passed with the address spelled %q, not %q", raw, host, canon)
			}
		case numeric:
			t.Fatalf("%q passed with a numeric host %q that is no address", raw, host)
		default:
			h := strings.TrimSuffix(strings.ToLower(host), ".")
			if !validName(h) {
				t.Fatalf("%q passed with the host %q", raw, host)
			}
		}
	})
}
