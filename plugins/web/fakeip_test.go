package web

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// reached is a connection as plugin.Dial returns it: it says where it
// leads and whether the core accepted that address as a fake-IP answer.
type reached struct {
	net.Conn
	remote netip.AddrPort
	fake   bool
	closed bool
}

func (c *reached) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(c.remote) }
func (c *reached) FakeIP() bool         { return c.fake }
func (c *reached) Close() error         { c.closed = true; return c.Conn.Close() }

// TestCheckedDialFakeIP: the plugin's check of the address it reached
// defers to the core on a fake-IP answer, and only on one: a name that
// resolved into 198.18.0.0/15 or fc00::/7 and that the core accepted as
// such. Every other special address is refused, and a refusal of an
// address a fake-IP DNS could have answered names the core's opt-in.
func TestCheckedDialFakeIP(t *testing.T) {
	for _, tc := range []struct {
		what    string
		address string // what the transport dials
		remote  string // where the egress point says it leads
		fake    bool   // the core's word
		want    string // "" accepted, else words of the refusal
	}{
		{"a name, a fake IP the core accepted", "news.example:443", "198.18.3.4:443", true, ""},
		{"a name, a fake IPv6 the core accepted", "news.example:443", "[fdfe:dcba::7]:443", true, ""},
		{"a public address (control)", "news.example:443", "93.184.215.14:443", false, ""},
		{"a name, 198.18 the core did not accept", "news.example:443", "198.18.3.4:443", false, "[network] fake_ip in config.toml"},
		{"a name, fc00::/7 the core did not accept", "news.example:443", "[fd00::1]:443", false, "[network] fake_ip in config.toml"},
		{"a literal 198.18 address, whatever the core says", "198.18.3.4:443", "198.18.3.4:443", true, "benchmark address, refused"},
		{"a name, a private address the core calls fake", "news.example:443", "10.1.2.3:443", true, "private address, refused"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			a, b := net.Pipe()
			defer b.Close()
			conn := &reached{Conn: a, remote: netip.MustParseAddrPort(tc.remote), fake: tc.fake}
			dial := checkedDial(nil, func(context.Context, string, string) (net.Conn, error) { return conn, nil })
			got, err := dial(context.Background(), "tcp", tc.address)
			if tc.want == "" {
				if err != nil || got != conn {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantCode(t, err, CodeAddressRefused, tc.want)
			if !conn.closed {
				t.Error("the refused connection was left open")
			}
			te, _ := err.(interface{ Error() string })
			if fakeRange := strings.HasPrefix(tc.remote, "198.18") || strings.HasPrefix(tc.remote, "[fd"); fakeRange != strings.Contains(te.Error(), "fake_ip") &&
				!strings.HasPrefix(tc.address, "198.18") {
				t.Errorf("the refusal names the fake-IP opt-in only for an address a fake-IP DNS could have answered: %v", err)
			}
		})
	}
}
