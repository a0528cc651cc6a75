package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
	"golang.org/x/net/idna"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/netclass"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Tool error codes (plugin.ToolError.Code, kept in the audit log; the
// message says the same for the agent).
const (
	CodeOff              = "WEB_OFF"              // the group's access does not allow the tool
	CodeInvalidURL       = "INVALID_URL"          // not an absolute http(s) URL, or a host that is neither a name nor an address
	CodeSchemeRefused    = "SCHEME_REFUSED"       // not http or https
	CodeAddressRefused   = "ADDRESS_REFUSED"      // a special address (loopback, private, metadata, ...)
	CodeDomainRefused    = "DOMAIN_REFUSED"       // deny_domains, or not in allow_domains
	CodeTooManyRedirects = "TOO_MANY_REDIRECTS"   // more than MaxRedirects
	CodeDowngrade        = "DOWNGRADE_REFUSED"    // a redirect from https to http
	CodeTooLarge         = "BODY_TOO_LARGE"       // the decoded body is over max_bytes
	CodeTimeout          = "TIMEOUT"              // the whole fetch took longer than timeout_s
	CodeContentType      = "CONTENT_TYPE_REFUSED" // not a type the tool reads
	CodeHTTPStatus       = "HTTP_STATUS"          // the server answered with an error status
	CodeFetchFailed      = "FETCH_FAILED"         // anything else on the way (TLS, a reset, ...)
	CodeNotResolved      = "NOT_RESOLVED"         // the name has no address
	CodeInvalidArgument  = "INVALID_ARGUMENT"     // max_chars, count or query out of bounds
)

// DefaultMaxChars and MaxMaxChars bound the answer's content.
const (
	DefaultMaxChars = 20000
	MaxMaxChars     = 100000
)

func toolErr(code, format string, a ...any) *plugin.ToolError {
	return &plugin.ToolError{Code: code, Message: fmt.Sprintf(format, a...)}
}

// addressOptIn is what every refusal of an address says the user can do.
const addressOptIn = "if this address is yours and meant to be reached (a server on your network), add it as \"ADDRESS:PORT\" to allow_addresses in [plugins.web.config]"

// fakeIPOptIn is what a refusal of an address a name resolved to adds when
// the address could be a fake-IP DNS answer: the core's setting, which
// the core's egress point decides by (plugin.AcceptedAsFakeIP).
const fakeIPOptIn = "if this machine uses fake-IP DNS (Clash, Surge, sing-box), add its range, such as \"198.18.0.0/15\", to [network] fake_ip in config.toml"

// checkURL checks one URL of a fetch (the first and each redirect's) and
// rewrites an address host to its one canonical spelling, so that what is
// checked is what is dialled.
func (c *config) checkURL(u *url.URL) *plugin.ToolError {
	switch u.Scheme {
	case "http", "https":
	default:
		return toolErr(CodeSchemeRefused, "%s: only http and https URLs are fetched", textutil.Clip(u.Scheme+":", 20))
	}
	if u.User != nil {
		return toolErr(CodeInvalidURL, "the URL carries a user name or password: web_fetch does not send credentials")
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return toolErr(CodeInvalidURL, "the URL has no host")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil || pn == 0 {
		return toolErr(CodeInvalidURL, "the URL's port %q is not a port", textutil.Clip(port, 10))
	}
	if !isASCII(host) {
		// An internationalised name, or another spelling of digits (full
		// width): the ASCII form a resolver is asked for, before any check.
		ascii, err := idna.Lookup.ToASCII(host)
		if err != nil {
			return toolErr(CodeInvalidURL, "the host %q is not a valid name", textutil.Clip(host, 60))
		}
		host = strings.ToLower(ascii)
		if u.Port() != "" {
			u.Host = host + ":" + u.Port()
		} else {
			u.Host = host
		}
	}
	a, isAddr, numeric := hostAddr(host)
	switch {
	case isAddr:
		canon := a.String()
		if a.Is6() {
			canon = "[" + canon + "]"
		}
		if u.Port() != "" {
			u.Host = canon + ":" + u.Port()
		} else {
			u.Host = canon
		}
		host = a.String()
		if class, special := netclass.Classify(a); special && !c.AllowAddresses[netip.AddrPortFrom(a, uint16(pn))] {
			return toolErr(CodeAddressRefused, "%s is a %s address, refused: web_fetch reaches public addresses only; %s", textutil.Clip(u.Hostname(), 60), class, addressOptIn)
		}
	case numeric:
		return toolErr(CodeInvalidURL, "the host %q looks like an address but is not one", textutil.Clip(host, 60))
	default:
		h := strings.TrimSuffix(host, ".")
		if !validName(h) {
			return toolErr(CodeInvalidURL, "the host %q is not a valid name", textutil.Clip(host, 60))
		}
		if h == "localhost" || strings.HasSuffix(h, ".localhost") {
			return toolErr(CodeAddressRefused, "%s is the loopback, refused: web_fetch reaches public addresses only; for a server of yours on this machine, add \"127.0.0.1:%d\" to allow_addresses in [plugins.web.config] and fetch it by that address", textutil.Clip(h, 60), pn)
		}
		host = h
	}
	return c.checkDomain(host)
}

// validName reports whether s is a DNS name: labels of 1 to 63 letters,
// digits, '-' or '_', 253 bytes at most.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// checkDomain applies deny_domains and allow_domains to a host.
func (c *config) checkDomain(host string) *plugin.ToolError {
	for _, d := range c.DenyDomains {
		if domainMatch(host, d) {
			return toolErr(CodeDomainRefused, "%s is refused by deny_domains (%s) in [plugins.web.config]", textutil.Clip(host, 80), d)
		}
	}
	if len(c.AllowDomains) == 0 {
		return nil
	}
	for _, d := range c.AllowDomains {
		if domainMatch(host, d) {
			return nil
		}
	}
	return toolErr(CodeDomainRefused, "%s is not among allow_domains in [plugins.web.config] (%s)", textutil.Clip(host, 80), textutil.Clip(strings.Join(c.AllowDomains, ", "), 200))
}

// DialFunc opens a TCP connection: plugin.Dial in the handler, which goes
// through the plugin's egress point in the core.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// checkedDial dials and then checks the address the connection actually
// reached (for plugin.Dial, the address the egress point dialled), as the
// egress point does: a special address not in allow is closed at once,
// unless a name resolved to it and the core accepted it as a fake-IP DNS
// answer ([network] fake_ip in config.toml; the core decides, this check
// defers to its word).
func checkedDial(allow map[netip.AddrPort]bool, dial DialFunc) DialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		ap, perr := netip.ParseAddrPort(conn.RemoteAddr().String())
		if perr != nil {
			conn.Close()
			return nil, toolErr(CodeAddressRefused, "the connection to %s reached an address that cannot be checked (%s)", textutil.Clip(address, 80), textutil.Clip(conn.RemoteAddr().String(), 60))
		}
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		class, special := netclass.Classify(ap.Addr())
		if !special || allow[ap] {
			return conn, nil
		}
		host, _, _ := net.SplitHostPort(address)
		_, lerr := netip.ParseAddr(host)
		named := lerr != nil
		fake := named && netclass.InFakeIPRange(ap.Addr())
		if fake && plugin.AcceptedAsFakeIP(conn) {
			return conn, nil
		}
		conn.Close()
		hint := addressOptIn
		if fake {
			hint = fakeIPOptIn + "; " + addressOptIn
		}
		return nil, toolErr(CodeAddressRefused, "%s resolved to %s, a %s address, refused: web_fetch reaches public addresses only; %s", textutil.Clip(address, 80), ap.Addr(), class, hint)
	}
}

// newTransport is the HTTP transport of both tools: every connection
// through dial and checked, no proxy, gzip decoded by the transport (and
// bounded by the reader), headers bounded.
func newTransport(allow map[netip.AddrPort]bool, dial DialFunc) *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            checkedDial(allow, dial),
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		IdleConnTimeout:        90 * time.Second,
		MaxIdleConns:           16,
		MaxIdleConnsPerHost:    2,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// Page is web_fetch's answer.
type Page struct {
	URL         string // the final URL, after redirects
	Title       string
	FetchedAt   time.Time
	ContentType string
	Content     string // Markdown for HTML; the text for text and JSON
}

// textTypes are the media types read as text, and jsonTypes as JSON;
// htmlTypes become Markdown. Everything else is refused.
var (
	htmlTypes = map[string]bool{"text/html": true, "application/xhtml+xml": true}
	textTypes = map[string]bool{"text/plain": true, "text/markdown": true, "text/csv": true, "text/xml": true,
		"application/xml": true, "application/rss+xml": true, "application/atom+xml": true}
)

func allowedType(mt string) bool {
	return htmlTypes[mt] || textTypes[mt] || mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// parseURL reads an absolute URL, without its fragment.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || !u.IsAbs() {
		return nil, toolErr(CodeInvalidURL, "%q is not an absolute URL (want https://…)", textutil.Clip(raw, 100))
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// fetch GETs raw under c's policy, within c.Timeout in all.
func fetch(ctx context.Context, c *config, tr http.RoundTripper, raw string, now func() time.Time) (*Page, error) {
	u, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	if terr := c.checkURL(u); terr != nil {
		return nil, terr
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	client := &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > MaxRedirects {
			return toolErr(CodeTooManyRedirects, "more than %d redirects (from %s)", MaxRedirects, textutil.Clip(via[0].URL.String(), 100))
		}
		prev := via[len(via)-1].URL
		if prev.Scheme == "https" && req.URL.Scheme == "http" {
			return toolErr(CodeDowngrade, "%s redirects from https to plain http (%s): refused", textutil.Clip(prev.String(), 100), textutil.Clip(req.URL.String(), 100))
		}
		if terr := c.checkURL(req.URL); terr != nil {
			terr.Message = "redirect to " + textutil.Clip(req.URL.String(), 100) + ": " + terr.Message
			return terr
		}
		req.Host = ""
		req.Header.Del("Referer") // the previous URL is not the next host's business
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, toolErr(CodeInvalidURL, "%q cannot be requested", textutil.Clip(raw, 100))
	}
	req.Header.Set("User-Agent", "Mozilla/5.0 (compatible; Carapace web_fetch)")
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.1")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fetchErr(ctx, c, err)
	}
	defer resp.Body.Close()
	final := resp.Request.URL
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &plugin.ToolError{Code: CodeHTTPStatus, Message: fmt.Sprintf("%s answered %s", textutil.Clip(final.String(), 100), resp.Status),
			Retriable: resp.StatusCode == 429 || resp.StatusCode >= 500}
	}
	if resp.ContentLength > c.MaxBytes {
		return nil, toolErr(CodeTooLarge, "%s is %d bytes, over the %d bytes web_fetch reads (max_bytes)", textutil.Clip(final.String(), 100), resp.ContentLength, c.MaxBytes)
	}
	if ce := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); ce != "" && ce != "identity" && !resp.Uncompressed {
		// Only gzip is asked for and undone (by the transport); anything
		// else would reach the agent as bytes.
		return nil, toolErr(CodeContentType, "%s is encoded as %s, which web_fetch does not decode", textutil.Clip(final.String(), 100), textutil.Clip(ce, 40))
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	mt = strings.ToLower(mt)
	if ct != "" && !allowedType(mt) {
		return nil, toolErr(CodeContentType, "%s is %s: web_fetch reads HTML, text and JSON only", textutil.Clip(final.String(), 100), textutil.Clip(mt, 60))
	}
	// The decoded body (the transport undoes gzip), bounded: a small
	// compressed body may decode to gigabytes.
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.MaxBytes+1))
	if err != nil {
		return nil, fetchErr(ctx, c, err)
	}
	if int64(len(body)) > c.MaxBytes {
		return nil, toolErr(CodeTooLarge, "%s decodes to more than the %d bytes web_fetch reads (max_bytes)", textutil.Clip(final.String(), 100), c.MaxBytes)
	}
	if ct == "" {
		ct = http.DetectContentType(body)
		mt, _, _ = mime.ParseMediaType(ct)
		if !allowedType(mt) {
			return nil, toolErr(CodeContentType, "%s has no content type and looks like %s: web_fetch reads HTML, text and JSON only", textutil.Clip(final.String(), 100), textutil.Clip(mt, 60))
		}
	}
	body = toUTF8(body, ct)
	p := &Page{URL: final.String(), FetchedAt: now().UTC(), ContentType: mt}
	if htmlTypes[mt] {
		p.Title, p.Content, err = Extract(body, final)
		if err != nil {
			return nil, toolErr(CodeFetchFailed, "%s: the page cannot be read as HTML", textutil.Clip(final.String(), 100))
		}
	} else {
		p.Content = strings.ToValidUTF8(string(body), "\uFFFD")
	}
	return p, nil
}

// toUTF8 decodes body from the charset its content type or its bytes name.
func toUTF8(body []byte, contentType string) []byte {
	if utf8.Valid(body) {
		return body
	}
	enc, _, _ := charset.DetermineEncoding(body, contentType)
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		return body
	}
	return out
}

// fetchErr turns a failure of the request or the body into a ToolError.
func fetchErr(ctx context.Context, c *config, err error) error {
	var te *plugin.ToolError
	if errors.As(err, &te) {
		return te
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return &plugin.ToolError{Code: CodeTimeout, Message: fmt.Sprintf("the fetch did not finish within %s (timeout_s)", c.Timeout), Retriable: true}
	}
	var ee *plugin.EgressError
	if errors.As(err, &ee) {
		switch ee.Code {
		case "ADDRESS_REFUSED":
			hint := addressOptIn
			if strings.Contains(ee.Message, "[network] fake_ip") {
				// The core's refusal of a fake-IP answer names its opt-in;
				// a cut message must not lose it.
				hint = fakeIPOptIn + "; " + addressOptIn
			}
			return toolErr(CodeAddressRefused, "refused by the egress point: %s; web_fetch reaches public addresses only; %s", textutil.Clip(ee.Message, 200), hint)
		case "RESOLVE_FAILED":
			return &plugin.ToolError{Code: CodeNotResolved, Message: "the name has no address: " + textutil.Clip(ee.Message, 200), Retriable: true}
		}
		return &plugin.ToolError{Code: CodeFetchFailed, Message: "refused by the egress point: " + ee.Code + ": " + textutil.Clip(ee.Message, 200), Retriable: ee.Code == "TOO_MANY" || ee.Code == "DIAL_FAILED"}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &plugin.ToolError{Code: CodeFetchFailed, Message: "the fetch failed: " + textutil.Clip(err.Error(), 200), Retriable: true}
}

// cut returns at most max characters of s, and whether it cut.
func cut(s string, max int) (string, bool) {
	if utf8.RuneCountInString(s) <= max {
		return s, false
	}
	i, n := 0, 0
	for i = range s {
		if n == max {
			break
		}
		n++
	}
	return s[:i], true
}
