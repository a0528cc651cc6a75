package web

import (
	"net/netip"
	"strconv"
	"strings"
)

// hostAddr reads a URL's host as an IP address in every spelling a
// resolver or browser accepts, so that no spelling slips past the check of
// the address: dotted decimal, decimal (2130706433), octal (0177.0.0.1),
// hex (0x7f.1), short forms (127.1), a trailing dot, and IPv6 literals
// (brackets already removed by url.Hostname). ok is false for a name.
// numeric is true when the host looks like a number yet is none of those
// (1.2.3.4.5, 0x1g): such a host is refused, not looked up as a name.
func hostAddr(host string) (a netip.Addr, ok, numeric bool) {
	h := strings.TrimSuffix(host, ".")
	if strings.Contains(h, ":") { // IPv6 (a zone is refused: it names a local interface)
		if strings.Contains(h, "%") {
			return netip.Addr{}, false, true
		}
		a, err := netip.ParseAddr(h)
		if err != nil {
			return netip.Addr{}, false, true
		}
		return a.Unmap(), true, true
	}
	parts := strings.Split(h, ".")
	last := parts[len(parts)-1]
	if !numericLabel(last) {
		return netip.Addr{}, false, false
	}
	if len(parts) > 4 {
		return netip.Addr{}, false, true
	}
	var vals []uint64
	for _, p := range parts {
		v, ok := inetNumber(p)
		if !ok {
			return netip.Addr{}, false, true
		}
		vals = append(vals, v)
	}
	// inet_aton: each part but the last is one byte; the last fills the
	// bytes that are left.
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false, true
		}
		n |= v << (24 - 8*uint(i))
	}
	lastV := vals[len(vals)-1]
	if lastV >= 1<<(8*uint(5-len(vals))) {
		return netip.Addr{}, false, true
	}
	n |= lastV
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true, true
}

// numericLabel reports whether a label is a number in the sense of the URL
// standard's IPv4 parser: decimal digits, or 0x followed by hex digits.
func numericLabel(s string) bool {
	if s == "" {
		return false
	}
	ls := strings.ToLower(s)
	if strings.HasPrefix(ls, "0x") {
		for _, c := range ls[2:] {
			if !strings.ContainsRune("0123456789abcdef", c) {
				return true // 0x1g: looks like a number, is not one; refused as numeric
			}
		}
		return true
	}
	for _, c := range ls {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// inetNumber parses one part as inet_aton does: 0x… hex, 0… octal, else
// decimal.
func inetNumber(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	ls := strings.ToLower(s)
	base := 10
	switch {
	case strings.HasPrefix(ls, "0x"):
		ls, base = ls[2:], 16
		if ls == "" {
			return 0, true
		}
	case len(ls) > 1 && ls[0] == '0':
		ls, base = ls[1:], 8
	}
	v, err := strconv.ParseUint(ls, base, 32)
	if err != nil {
		return 0, false
	}
	return v, true
}
