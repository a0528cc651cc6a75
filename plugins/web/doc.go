// Package web is the web plugin: a bundled plugin that runs out of
// process, confined, and gives the agent web_search and web_fetch through
// its egress point in the core (its only way to the network). handler/ is
// its executable; docs/WEB.md is the user's guide.
//
// # web_fetch
//
// A GET of one http(s) URL under the SSRF policy, in this order:
//
//   - the URL: http or https, no user name or password, the host read as
//     an address in every spelling (decimal 2130706433, octal 0177.0.0.1,
//     hex 0x7f.1, short 127.1, IPv6, a trailing dot: hostAddr) and
//     rewritten to its one canonical spelling; a special address
//     (internal/netclass: loopback, private, CGNAT, link-local and
//     metadata, unique-local, multicast, the IPv6 embeddings of IPv4,
//     198.18/15, ...) and localhost are refused unless the exact
//     ADDRESS:PORT is in allow_addresses; then deny_domains and
//     allow_domains;
//   - the connection: the core's egress point resolves the name itself
//     and refuses a special address by the address it dials (public:
//     true in the manifest; the allowed addresses are declared to it
//     through hosts_from_config), and the plugin checks the connection's
//     remote address again (checkedDial);
//   - each redirect (at most MaxRedirects): the same checks of the URL,
//     and https to http refused;
//   - the answer: a 2xx status, a content type of HTML, text or JSON,
//     a decoded body (gzip undone by the transport) of at most max_bytes,
//     all of it within timeout_s.
//
// HTML becomes the Markdown of its main content (Extract: go-readability
// finds it, html-to-markdown converts it); text and JSON pass as they are.
// The answer carries the final URL, the title, the fetch time and the
// content cut at max_chars with a note.
//
// # web_search
//
// A Provider: Brave (the Brave Search API, its key the plugin's credential
// brave_api_key) or SearXNG (searxng_url, an instance the user runs).
// Results whose URL web_fetch would refuse (a denied domain) are left out.
//
// # Access
//
// Per group (Request.Group, from the core): off, search (web_search
// only) or fetch (both); default_access for groups not listed.
package web
