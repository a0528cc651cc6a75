package web

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Access is what a group may do with the web.
type Access string

// The three levels of access, from none to all.
const (
	AccessOff    Access = "off"    // neither tool runs
	AccessSearch Access = "search" // web_search only
	AccessFetch  Access = "fetch"  // web_search and web_fetch
)

// Defaults of the config.
const (
	DefaultAccess   = AccessFetch
	DefaultTimeout  = 20 * time.Second // within the core's 30 s handler timeout
	DefaultMaxBytes = 5 << 20          // decoded body
	MaxRedirects    = 5
)

// config is [plugins.web.config], checked here again (a handler must not
// trust that it runs behind the core).
type config struct {
	DefaultAccess Access
	Groups        map[string]Access
	AllowDomains  []string // empty: every domain not denied
	DenyDomains   []string
	// AllowAddresses are the special addresses (host:port) the user opted
	// into: a SearXNG on the LAN. (A fake-IP DNS setup is the core's
	// [network] fake_ip, which the egress point decides by.)
	AllowAddresses map[netip.AddrPort]bool
	Provider       string // "brave", "searxng" or "" (none configured)
	SearXNG        *url.URL
	Timeout        time.Duration
	MaxBytes       int64
}

var groupRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// parseConfig reads the config map the core passes to Init.
func parseConfig(m map[string]any) (config, error) {
	c := config{DefaultAccess: DefaultAccess, Groups: map[string]Access{}, AllowAddresses: map[netip.AddrPort]bool{},
		Timeout: DefaultTimeout, MaxBytes: DefaultMaxBytes}
	for k, v := range m {
		switch k {
		case "default_access":
			a, err := accessOf(v)
			if err != nil {
				return c, fmt.Errorf("default_access: %w", err)
			}
			c.DefaultAccess = a
		case "groups":
			obj, ok := v.(map[string]any)
			if !ok {
				return c, fmt.Errorf(`groups: want a table of group = "off" | "search" | "fetch", e.g. groups = { kids = "search" }`)
			}
			for g, av := range obj {
				if !groupRE.MatchString(g) {
					return c, fmt.Errorf("groups: %q is not a group name", textutil.Clip(g, 40))
				}
				a, err := accessOf(av)
				if err != nil {
					return c, fmt.Errorf("groups.%s: %w", g, err)
				}
				c.Groups[g] = a
			}
		case "allow_domains", "deny_domains":
			list, err := domainList(v)
			if err != nil {
				return c, fmt.Errorf("%s: %w", k, err)
			}
			if k == "allow_domains" {
				c.AllowDomains = list
			} else {
				c.DenyDomains = list
			}
		case "allow_addresses":
			arr, ok := v.([]any)
			if !ok {
				return c, fmt.Errorf(`allow_addresses: want a list of "address:port", e.g. ["192.168.1.20:8080"]`)
			}
			for _, av := range arr {
				s, _ := av.(string)
				ap, err := addrPortOf(s)
				if err != nil {
					return c, fmt.Errorf("allow_addresses: %w", err)
				}
				c.AllowAddresses[ap] = true
			}
		case "search_provider":
			s, _ := v.(string)
			if s != "brave" && s != "searxng" {
				return c, fmt.Errorf(`search_provider: want "brave" or "searxng"`)
			}
			c.Provider = s
		case "searxng_url":
			s, _ := v.(string)
			u, err := url.Parse(s)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
				return c, fmt.Errorf("searxng_url: want the address of your SearXNG, such as http://192.168.1.20:8888 (no query, no user name)")
			}
			c.SearXNG = u
		case "timeout_s":
			n, err := plugin.Int(v)
			if err != nil || n < 1 || n > 25 {
				return c, fmt.Errorf("timeout_s: want a number of seconds from 1 to 25 (a call has 30 s in all)")
			}
			c.Timeout = time.Duration(n) * time.Second
		case "max_bytes":
			n, err := plugin.Int(v)
			if err != nil || n < 1<<12 || n > 32<<20 {
				return c, fmt.Errorf("max_bytes: want a number of bytes from 4096 to 33554432 (32 MiB)")
			}
			c.MaxBytes = n
		default:
			return c, fmt.Errorf("unknown setting %q: the web plugin takes default_access, groups, allow_domains, deny_domains, allow_addresses, search_provider, searxng_url, timeout_s and max_bytes", textutil.Clip(k, 40))
		}
	}
	if c.Provider == "searxng" && c.SearXNG == nil {
		return c, fmt.Errorf("search_provider = \"searxng\" needs searxng_url, the address of your SearXNG")
	}
	if c.Provider == "" {
		c.Provider = "brave"
		if c.SearXNG != nil {
			c.Provider = "searxng"
		}
	}
	return c, nil
}

// access returns what group may do.
func (c *config) access(group string) Access {
	if a, ok := c.Groups[group]; ok {
		return a
	}
	return c.DefaultAccess
}

func accessOf(v any) (Access, error) {
	s, _ := v.(string)
	switch a := Access(s); a {
	case AccessOff, AccessSearch, AccessFetch:
		return a, nil
	}
	return "", fmt.Errorf(`want "off", "search" (web_search only) or "fetch" (web_search and web_fetch)`)
}

// domainList reads a list of domain names, lower case, without a leading
// "*." or dot (a domain covers its subdomains).
func domainList(v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf(`want a list of domains, e.g. ["example.com", "news.example.org"]`)
	}
	var out []string
	for _, e := range arr {
		s, _ := e.(string)
		s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "*."), "."), ".")
		if s == "" || strings.ContainsAny(s, "/:@ ") {
			return nil, fmt.Errorf("%q is not a domain name (write example.com, not a URL)", textutil.Clip(fmt.Sprint(e), 60))
		}
		out = append(out, s)
	}
	return out, nil
}

// addrPortOf reads an allowed address: ADDRESS:PORT or a URL whose host
// is an IP address ("http://192.168.1.20:8080"), the form the core's
// egress point is given too (network.hosts_from_config).
func addrPortOf(s string) (netip.AddrPort, error) {
	hp := s
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return netip.AddrPort{}, fmt.Errorf("%q is not a URL", textutil.Clip(s, 80))
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		hp = net.JoinHostPort(u.Hostname(), port)
	}
	host, ps, err := net.SplitHostPort(hp)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q: want ADDRESS:PORT, e.g. 192.168.1.20:8080", textutil.Clip(s, 80))
	}
	a, err := netip.ParseAddr(host)
	port, perr := strconv.ParseUint(ps, 10, 16)
	if err != nil || perr != nil || port == 0 {
		return netip.AddrPort{}, fmt.Errorf("%q: want an IP address and a port, e.g. 192.168.1.20:8080 (an exact address, not a name)", textutil.Clip(s, 80))
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), nil
}

// domainMatch reports whether host is domain or one of its subdomains.
func domainMatch(host, domain string) bool {
	return host == domain || strings.HasSuffix(host, "."+domain)
}
