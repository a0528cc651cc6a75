package llmproxy

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// endpoint is one of the model API's endpoints the proxy forwards.
type endpoint int

const (
	epNone        endpoint = iota
	epMessages             // POST /v1/messages
	epCountTokens          // POST /v1/messages/count_tokens
	epModels               // GET /v1/models
	epModel                // GET /v1/models/{id}
)

// method returns the one method the endpoint accepts.
func (e endpoint) method() string {
	if e == epMessages || e == epCountTokens {
		return http.MethodPost
	}
	return http.MethodGet
}

// modelID is a model id in a /v1/models/{id} path. It starts with a letter
// or digit, so it is never "." or "..", and has no '/' or '%'.
var modelID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// maxQuery bounds the query string forwarded (Claude Code sends
// "beta=true"; the models list takes limit, after_id and before_id).
const maxQuery = 2048

// allowedMessage is the message of a refused path.
const allowedMessage = "Carapace allows only POST /v1/messages, POST /v1/messages/count_tokens, GET /v1/models and GET /v1/models/{id} on the model API"

// classify matches a request against the allowed endpoints. It returns the
// endpoint and the path to forward, or a refusal: its status (403 for a
// path, 405 for a method, with the endpoint it names) and message.
//
// The path is matched as the client sent it (the request-target of the
// request line), not as net/http decoded it, and must equal an allowed path
// exactly: no percent-encoding, no dot segments, no doubled or trailing
// slash, no other case. So "/v1/messages%2F..%2Ffiles", "//v1/messages"
// and "/v1/messages/../files" are refused, not normalised, and the path
// forwarded is always one of the four shapes above.
func classify(r *http.Request) (ep endpoint, path string, status int, msg string) {
	target := r.RequestURI
	if !strings.HasPrefix(target, "/") {
		// Absolute form ("http://host/…"), authority form (CONNECT) or
		// "*": not how a client of a base URL asks.
		return epNone, "", http.StatusForbidden, allowedMessage
	}
	path, query, _ := strings.Cut(target, "?")
	if len(query) > maxQuery {
		return epNone, "", http.StatusForbidden, "Carapace allows only query strings of up to 2048 bytes"
	}
	switch {
	case path == "/v1/messages":
		ep = epMessages
	case path == "/v1/messages/count_tokens":
		ep = epCountTokens
	case path == "/v1/models":
		ep = epModels
	case strings.HasPrefix(path, "/v1/models/") && modelID.MatchString(path[len("/v1/models/"):]):
		ep = epModel
	default:
		return epNone, "", http.StatusForbidden, allowedMessage
	}
	if r.Method != ep.method() {
		return ep, path, http.StatusMethodNotAllowed, "Carapace allows only " + ep.method() + " on " + path
	}
	return ep, path, 0, ""
}

// Request headers. Anything not listed is dropped: the credential headers
// the container sends (a placeholder x-api-key, an Authorization), cookies,
// Proxy-*, hop-by-hop headers, X-Forwarded-*, Accept-Encoding.
var (
	// forwardedHeaders are forwarded as the client sent them.
	forwardedHeaders = []string{"Accept", "Content-Type", "User-Agent", "X-App", "X-Client-Request-Id"}
	// forwardedPrefixes name header families forwarded as sent. Claude
	// Code's gateway protocol reference asks gateways to pass anthropic-*
	// headers as an open list, since new capabilities arrive as new
	// headers; x-claude-code-* identify its session and agents, and
	// x-stainless-* describe the SDK. None carries a credential.
	forwardedPrefixes = []string{"Anthropic-", "X-Claude-Code-", "X-Stainless-"}
)

func forwardRequestHeader(k string) bool {
	if slices.Contains(forwardedHeaders, k) {
		return true
	}
	for _, p := range forwardedPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// outboundHeader builds the header of the forwarded request from the
// client's: the allowed headers, the credential, the merged beta list and
// "Accept-Encoding: identity". It returns how many beta values were denied.
//
// Accept-Encoding is replaced, not forwarded: the proxy reads usage from
// the reply as it relays it, which needs plain text; a compressed SSE
// stream can also hold events back in the compressor's buffer; and the
// last hop is a local socket, where compression saves nothing. Setting it
// explicitly also stops Go's transport from asking for gzip on its own.
func outboundHeader(in http.Header, c Credential, denied []string) (http.Header, int) {
	out := make(http.Header, len(in)+3)
	for k, vs := range in {
		k = http.CanonicalHeaderKey(k)
		if k == "Anthropic-Beta" || !forwardRequestHeader(k) {
			continue
		}
		out[k] = slices.Clone(vs)
	}
	betas, dropped := mergeBetas(in.Values("Anthropic-Beta"), c.Kind == KindOAuth, denied)
	if betas != "" {
		out.Set("Anthropic-Beta", betas)
	}
	out.Set("Accept-Encoding", "identity")
	switch c.Kind {
	case KindAPIKey:
		out.Set("X-Api-Key", c.Secret)
	case KindOAuth, KindBearer:
		out.Set("Authorization", "Bearer "+c.Secret)
	}
	// KindNone: nothing. The agent's own credential headers were never
	// copied (they are not in the allow-list), so none reaches the
	// upstream.
	return out, dropped
}

// mergeBetas joins the client's anthropic-beta values (each header line a
// comma-separated list) into one list, without duplicates or denied values,
// and with OAuthBeta added when oauth is set.
func mergeBetas(lines []string, oauth bool, denied []string) (string, int) {
	var out []string
	dropped := 0
	for _, line := range lines {
		for v := range strings.SplitSeq(line, ",") {
			v = strings.TrimSpace(v)
			switch {
			case v == "" || slices.Contains(out, v):
			case deniedBeta(v, denied):
				dropped++
			default:
				out = append(out, v)
			}
		}
	}
	if oauth && !slices.Contains(out, OAuthBeta) {
		out = append(out, OAuthBeta)
	}
	return strings.Join(out, ","), dropped
}

func deniedBeta(v string, denied []string) bool {
	for _, p := range denied {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}

// Response headers relayed to the client; the rest (Set-Cookie, the
// organization id, the CDN's own) are dropped. These are the ones Claude
// Code's gateway protocol reference says it reads: Content-Type,
// Retry-After and X-Should-Retry to decide on retries, and the
// anthropic-ratelimit-unified-* family to show plan limits; Request-Id
// lets the user quote a failed call to Anthropic. Content-Length and
// Content-Encoding describe the bytes relayed and so go with them.
var (
	relayedHeaders  = []string{"Content-Type", "Content-Length", "Content-Encoding", "Retry-After", "Retry-After-Ms", "X-Should-Retry", "Request-Id"}
	relayedPrefixes = []string{"Anthropic-Ratelimit-"}
)

func relayResponseHeader(k string) bool {
	if slices.Contains(relayedHeaders, k) {
		return true
	}
	for _, p := range relayedPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
