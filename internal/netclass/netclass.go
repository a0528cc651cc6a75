// Package netclass says which special-purpose range an IP address is in
// (loopback, private, metadata, the IPv6 embeddings of IPv4 ...): the one
// list that the plugins' egress point in the core (core/egress) and the
// web plugin (plugins/web), which checks a URL's address before it asks
// the egress point for it, both refuse by.
package netclass

import (
	"fmt"
	"net/netip"
)

// special is one special-purpose range and its class.
type special struct {
	p     netip.Prefix
	class string
}

// specials are the ranges an address may not be in to count as public,
// after the IANA special-purpose registries (IPv4 and IPv6), the cloud
// metadata services, and the ranges that embed another address. The list
// is searched in order, so a narrower range comes before the range that
// holds it. IPv6 outside 2000::/3 (global unicast) is "reserved" whatever
// it is not listed as.
var specials = func() []special {
	var s []special
	for _, r := range [][2]string{
		// IPv4.
		{"255.255.255.255/32", "broadcast"},
		{"169.254.169.254/32", "metadata"}, // AWS, GCP, Azure, OpenStack ...
		{"169.254.170.2/32", "metadata"},   // AWS ECS task metadata
		{"100.100.100.200/32", "metadata"}, // Alibaba Cloud
		{"168.63.129.16/32", "metadata"},   // Azure wire server: a public address
		{"0.0.0.0/8", "unspecified"},       // "this network"; 0.0.0.0 reaches the local host
		{"10.0.0.0/8", "private"},
		{"100.64.0.0/10", "cgnat"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"172.16.0.0/12", "private"},
		{"192.0.0.0/24", "reserved"}, // IETF protocol assignments
		{"192.0.2.0/24", "documentation"},
		{"192.88.99.0/24", "6to4"}, // 6to4 relay anycast
		{"192.168.0.0/16", "private"},
		{"198.18.0.0/15", "benchmark"},
		{"198.51.100.0/24", "documentation"},
		{"203.0.113.0/24", "documentation"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved"},
		// IPv6. IPv4-mapped addresses (::ffff:0:0/96) never get here:
		// Classify unmaps them first.
		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"::/96", "ipv4-compatible"},           // deprecated embedding
		{"::ffff:0:0:0/96", "ipv4-translated"}, // SIIT embedding
		{"64:ff9b::/96", "nat64"},              // embeds an IPv4 address, any one
		{"64:ff9b:1::/48", "nat64"},            // local-use NAT64
		{"100::/64", "discard"},
		{"2001::/32", "teredo"}, // embeds an IPv4 address
		{"2001:2::/48", "benchmark"},
		{"2001::/23", "reserved"}, // IETF protocol assignments (ORCHID, AMT, AS112 ...)
		{"2001:db8::/32", "documentation"},
		{"2002::/16", "6to4"}, // embeds an IPv4 address
		{"3fff::/20", "documentation"},
		{"fd00:ec2::254/128", "metadata"}, // AWS over IPv6
		{"fc00::/7", "unique-local"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local"}, // deprecated
		{"ff00::/8", "multicast"},
	} {
		s = append(s, special{netip.MustParsePrefix(r[0]), r[1]})
	}
	return s
}()

// globalUnicast is the only part of IPv6 that may be public.
var globalUnicast = netip.MustParsePrefix("2000::/3")

// Classify says which special-purpose range a holds: "loopback",
// "private", "cgnat", "link-local", "metadata", "unique-local",
// "multicast", "unspecified", "broadcast", "benchmark", "documentation",
// "reserved", "discard", "site-local", the embeddings "nat64", "6to4",
// "teredo", "ipv4-compatible", "ipv4-translated", and "invalid" for the
// zero Addr; special is then true. A public address is ("", false).
//
// An IPv4-mapped IPv6 address is classified as the IPv4 address it maps
// (::ffff:127.0.0.1 is "loopback", ::ffff:1.1.1.1 public), which is the
// address a connection to it reaches. A zone is ignored. The embeddings
// of an IPv4 address in IPv6 (NAT64, 6to4, Teredo) are special whatever
// the address they embed: a gateway would turn them into it, past this
// check.
func Classify(a netip.Addr) (class string, special bool) {
	if !a.IsValid() {
		return "invalid", true
	}
	a = a.Unmap().WithZone("")
	for _, s := range specials {
		if s.p.Contains(a) {
			return s.class, true
		}
	}
	if a.Is6() && !globalUnicast.Contains(a) {
		return "reserved", true
	}
	return "", false
}

// FakeIPRanges are the ranges a fake-IP DNS answers from: Clash, Surge
// and sing-box resolve every name to an address of 198.18.0.0/15 (or, for
// IPv6, of a prefix inside fc00::/7) and route it through a local tunnel
// to the real host. Both are special ("benchmark", "unique-local"): an
// address in them is reached only when the user configured its prefix
// ([network] fake_ip in config.toml) and it came from resolving a name.
var FakeIPRanges = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("fc00::/7")}

// InFakeIPRange reports whether a lies in one of FakeIPRanges: an address
// a fake-IP DNS could have answered, which a refusal then names the
// opt-in for.
func InFakeIPRange(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, r := range FakeIPRanges {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// FakeIPPrefix reads one prefix a user configured as fake-IP: it must be
// a prefix ("198.18.0.0/15", host bits zero) inside one of FakeIPRanges.
// The error says what to write.
func FakeIPPrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address prefix: write the range your fake-IP DNS answers from, such as \"198.18.0.0/15\" (Clash's fake-ip-range, Surge's, sing-box's inet4_range)", s)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q is an IPv4-mapped prefix: write it as IPv4, such as \"198.18.0.0/15\"", s)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("%q has bits set past its length: write %q", s, p.Masked().String())
	}
	for _, r := range FakeIPRanges {
		if p.Bits() >= r.Bits() && r.Contains(p.Addr()) {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("%q is not inside 198.18.0.0/15 or fc00::/7, the ranges fake-IP DNS answers from: write the fake-IP range of your Clash, Surge or sing-box setup (for instance \"198.18.0.0/15\"); to let a plugin reach another address, declare it to that plugin instead", s)
}
