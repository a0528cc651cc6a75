package egress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/internal/netclass"
)

// loopback is what "localhost" is, without DNS (RFC 6761).
var loopback = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}

// minAttempt is the least time one address of several is given before the
// next is tried, as net.Dialer does.
const minAttempt = 2 * time.Second

// errNotChecked is the Control hook's refusal of an address the point did
// not check.
var errNotChecked = errors.New("egress: address not checked for this request")

// connect checks req against the plugin's hosts, resolves it, and dials
// the first address that passes and answers. It returns the connection,
// its address and whether that address was accepted as a fake-IP answer,
// or a refusal's code and reason.
func (p *Point) connect(ctx context.Context, req *pluginproto.EgressRequest) (net.Conn, netip.AddrPort, bool, string, string) {
	var none netip.AddrPort
	switch {
	case req.Network != pluginproto.EgressNetworkTCP:
		return nil, none, false, pluginproto.EgressBadRequest, fmt.Sprintf("network %.20q: only tcp (a plugin has no UDP, and so no DNS of its own)", req.Network)
	case req.Port == 0:
		return nil, none, false, pluginproto.EgressBadRequest, "port 0"
	case !validHost(req.Host):
		return nil, none, false, pluginproto.EgressBadRequest, fmt.Sprintf("host %.100q is not a host name or an IP literal", req.Host)
	}
	hp := net.JoinHostPort(req.Host, fmt.Sprint(req.Port))
	declared := p.allow[Host{strings.ToLower(req.Host), req.Port}]
	if !declared && !p.o.Public {
		return nil, none, false, pluginproto.EgressHostNotDeclared, hp + " is not among the plugin's declared hosts"
	}

	// The candidates, and the special addresses that were configured.
	var cands []netip.Addr
	exempt := map[netip.Addr]bool{}
	named := false // the candidates came from resolving a name
	if lit, err := netip.ParseAddr(req.Host); err == nil {
		cands = []netip.Addr{lit.Unmap()}
		if declared {
			exempt[key(lit)] = true
		}
	} else if strings.EqualFold(req.Host, "localhost") {
		cands = loopback
		if declared {
			for _, a := range loopback {
				exempt[a] = true
			}
		}
	} else {
		named = true
		addrs, err := p.o.Resolver.LookupNetIP(ctx, "ip", req.Host)
		if err != nil {
			return nil, none, false, pluginproto.EgressResolveFailed, fmt.Sprintf("resolve %s: %v", req.Host, err)
		}
		seen := map[netip.Addr]bool{}
		for _, a := range addrs {
			if a = a.Unmap(); a.IsValid() && !seen[a] && len(cands) < maxAddrs {
				seen[a] = true
				cands = append(cands, a)
			}
		}
		if len(cands) == 0 {
			return nil, none, false, pluginproto.EgressResolveFailed, fmt.Sprintf("resolve %s: no address", req.Host)
		}
	}

	permitted := map[netip.AddrPort]bool{}
	fake := map[netip.AddrPort]bool{}
	var pass []netip.AddrPort
	var refused []string
	hint := ""
	for _, a := range cands {
		ap := netip.AddrPortFrom(a, req.Port)
		if class, special := Classify(a); special && !exempt[key(a)] {
			if named && p.fakeIP(a) {
				fake[keyPort(ap)] = true
			} else {
				refused = append(refused, fmt.Sprintf("%s (%s)", a, class))
				hint = cmp.Or(hint, fakeIPHint(a, named, len(p.o.FakeIP) > 0))
				continue
			}
		}
		permitted[keyPort(ap)] = true
		pass = append(pass, ap)
	}
	if len(pass) == 0 {
		return nil, none, false, pluginproto.EgressAddressRefused, fmt.Sprintf("%s: every address is refused: %s%s", hp, strings.Join(refused, ", "), hint)
	}

	var last error
	for i, ap := range pass {
		actx, cancel := context.WithTimeout(ctx, attempt(ctx, len(pass)-i))
		c, err := p.dial(actx, ap, permitted)
		cancel()
		if err == nil {
			return c, ap, fake[keyPort(ap)], "", ""
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, none, false, pluginproto.EgressDialFailed, fmt.Sprintf("connect to %s: %v", hp, last)
}

// fakeIP reports whether a lies in a configured fake-IP prefix.
func (p *Point) fakeIP(a netip.Addr) bool {
	a = key(a)
	for _, pr := range p.o.FakeIP {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// FakeIPOptIn names the setting that lets a fake-IP DNS answer through:
// every refusal of an address that could be one says it.
const FakeIPOptIn = "[network] fake_ip in config.toml"

// fakeIPHint is what a refusal of a adds about fake-IP DNS: for an
// address of 198.18.0.0/15 or fc00::/7 that a name resolved to, the
// opt-in; for one given literally while an opt-in is set, that it does not
// apply; else nothing.
func fakeIPHint(a netip.Addr, named, optedIn bool) string {
	switch {
	case !netclass.InFakeIPRange(a):
		return ""
	case named:
		return "; if this machine uses fake-IP DNS (Clash, Surge, sing-box), add its range, such as \"198.18.0.0/15\", to " + FakeIPOptIn
	case optedIn:
		return "; " + FakeIPOptIn + " applies to addresses a name resolved to, never to an address given literally"
	}
	return ""
}

// attempt is the time one of n remaining addresses gets.
func attempt(ctx context.Context, n int) time.Duration {
	deadline, _ := ctx.Deadline()
	left := time.Until(deadline)
	d := left / time.Duration(n)
	if d < minAttempt {
		d = min(minAttempt, left)
	}
	return d
}

// dial dials one checked address. The default dialer checks it again in
// its Control hook, on the address the socket is about to connect to.
func (p *Point) dial(ctx context.Context, ap netip.AddrPort, permitted map[netip.AddrPort]bool) (net.Conn, error) {
	if p.o.Dialer != nil {
		return p.o.Dialer(ctx, "tcp", ap.String())
	}
	d := net.Dialer{Control: control(permitted)}
	return d.DialContext(ctx, "tcp", ap.String())
}

// control is a net.Dialer Control hook that lets a socket connect only to
// an address of permitted.
func control(permitted map[netip.AddrPort]bool) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !permitted[keyPort(ap)] {
			return fmt.Errorf("%w: %s %s", errNotChecked, network, address)
		}
		return nil
	}
}

// key is an address as the point compares it: unmapped, without its zone.
func key(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

func keyPort(ap netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(key(ap.Addr()), ap.Port()) }

// validHost reports whether s is an IP literal or could be a DNS name
// (letters, digits, '-', '_' and '.', at most 253 bytes).
func validHost(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	if s == "" || len(s) > 253 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}
