package llmproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Auditor receives the proxy's audit entries. *audit.Log satisfies it.
type Auditor interface {
	Write(e *audit.Entry) error
}

var _ Auditor = (*audit.Log)(nil)

// StageLLM is the audit stage of the proxy's entries (audit.StageLLM).
const StageLLM = audit.StageLLM

// Codes of the proxy's audit entries (Entry.Code).
const (
	CodeNotAllowed      = "NOT_ALLOWED"          // the path, method or request form is not allowed
	CodeRateLimited     = "RATE_LIMITED"         // the session is over its request rate
	CodeBudget          = "BUDGET_EXCEEDED"      // the group's daily token budget is spent
	CodeTooLarge        = "REQUEST_TOO_LARGE"    // the request body is over Options.MaxRequestBytes
	CodeBadRequest      = "BAD_REQUEST"          // the request body could not be read, or is not one JSON object
	CodeModelNotAllowed = "MODEL_NOT_ALLOWED"    // the body names a model the group may not use (Options.Models)
	CodeNetworkFeature  = "NETWORK_FEATURE"      // the body asks the model API to reach out: a server tool, mcp_servers, a URL or file source (body.go)
	CodeNoCredential    = "NO_CREDENTIAL"        // no model API credential is stored
	CodeCredential      = "CREDENTIAL_ERROR"     // the credential could not be read, or is malformed
	CodeUnreachable     = "UPSTREAM_UNREACHABLE" // no reply from the model API (network, TLS)
	CodeUpstream        = "UPSTREAM_ERROR"       // the model API answered with an error status
	CodeStream          = "STREAM_ERROR"         // the reply broke off, or its stream carried an error event
	CodeCanceled        = "CANCELED"             // the client left, or the session ended, before the reply did
)

// Defaults for Options.
const (
	DefaultUpstream            = "https://api.anthropic.com"
	DefaultRequestsPerMinute   = 60
	DefaultBurst               = 10
	DefaultMaxRequestBytes     = 32 << 20
	DefaultRejectionsPerMinute = 600
)

// Options configure a Proxy.
type Options struct {
	// Upstream is the model API's origin: https to any host, or plain http
	// to a loopback address (CheckUpstream), no path. Nil selects
	// DefaultUpstream.
	Upstream *url.URL
	// Provider names the upstream's kind (ProviderAnthropic…), for the
	// messages that tell the user how to store its credential; empty is
	// anthropic.
	Provider string
	// Models, when not empty, are the only model names a POST
	// /v1/messages or /v1/messages/count_tokens may name (the group's
	// models in config.toml); any other is refused with 403
	// permission_error and audited MODEL_NOT_ALLOWED.
	Models []string
	// Transport carries the forwarded requests. Nil selects a clone of
	// http.DefaultTransport with TLS 1.2 or later, certificate
	// verification against the system roots, and no transparent
	// compression. A *http.Transport with InsecureSkipVerify is refused.
	// Tests pass one whose RootCAs trust their server.
	Transport http.RoundTripper
	// Credential returns the model API's credential. It is called for
	// every forwarded request (so a new key takes effect at once) and its
	// result is never logged. An error wrapping ErrNoCredential is
	// answered with a 401 telling the user to store one; any error's text
	// is audited and logged, so it must not contain the secret. Required;
	// FromStore reads Anthropic's from the keychain, FromStoreFor another
	// provider's in its style.
	Credential func(ctx context.Context) (Credential, error)
	// Session and Group name the agent session this proxy serves: its
	// audit entries carry them, the rate is the session's and the budget
	// the group's.
	Session, Group string
	// RequestsPerMinute is the session's sustained request rate, with
	// bursts of up to Burst requests; a request over it is answered 429
	// with Retry-After. Zero or less selects DefaultRequestsPerMinute, and
	// DefaultBurst (but no more than RequestsPerMinute).
	RequestsPerMinute int
	Burst             int
	// Budget is the group's daily token budget, checked before each POST
	// /v1/messages and charged with the tokens its reply reports. Nil
	// means unlimited.
	Budget Budget
	// Audit receives one entry per refused request and two per forwarded
	// one (routed, then its outcome). Required: when the routed entry
	// cannot be written the request is not sent.
	Audit Auditor
	// RejectionsPerMinute bounds the refused requests audited one by one
	// (bursts of a sixth of it); past it, one a second is, with a count
	// of those left out, so that a looping client cannot rotate the audit
	// log's history away. Zero or less selects DefaultRejectionsPerMinute.
	RejectionsPerMinute int
	// Logger receives one line per call (debug) and the proxy's troubles.
	// It never receives a header value, a body or the credential. Nil
	// discards.
	Logger *slog.Logger
	// MaxRequestBytes bounds a request body; a larger one is answered
	// 413. Zero or less selects DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// DeniedBetas are prefixes of anthropic-beta values dropped from
	// every request. Nil selects the default, "mcp-client-" and
	// "web-fetch-"; an empty, non-nil slice drops none.
	//
	// Each default enables a server-side feature that makes the model API
	// itself reach the network on the request's behalf, which would turn
	// the API into a way out of a container that has none: the MCP
	// connector (the mcp_servers parameter) connects to any MCP server URL
	// the request names, and the web fetch server tool fetches any URL. A
	// request that uses such a feature without its beta fails with a 400
	// from the API; one that does not is unaffected. Claude Code runs its
	// MCP servers and its WebFetch tool on the client side and needs
	// neither. The generally available web_search and web_fetch server
	// tools need no beta, so this cannot block them: the body check
	// (body.go) refuses every server tool, and mcp_servers, whatever the
	// betas.
	DeniedBetas []string
}

// Proxy is the host side of the agent's model API connection: an
// http.Handler that forwards the allowed calls to the model API with the
// real credential. Create it with New; it is safe for concurrent use.
type Proxy struct {
	o        Options
	upstream url.URL
	rt       http.RoundTripper
	limiter  *rate.Limiter
	rejects  throttle
	log      *slog.Logger
}

var _ http.Handler = (*Proxy)(nil)

// New returns a Proxy for one agent session.
func New(o Options) (*Proxy, error) {
	if o.Credential == nil {
		return nil, errors.New("llmproxy: Options.Credential is required")
	}
	if o.Audit == nil {
		return nil, errors.New("llmproxy: Options.Audit is required")
	}
	if o.Upstream == nil {
		u, err := url.Parse(DefaultUpstream)
		if err != nil {
			return nil, fmt.Errorf("llmproxy: %w", err)
		}
		o.Upstream = u
	}
	if err := CheckUpstream(o.Upstream); err != nil {
		return nil, fmt.Errorf("llmproxy: upstream %w", err)
	}
	if o.Provider == "" {
		o.Provider = ProviderAnthropic
	}
	if o.Transport == nil {
		o.Transport = NewTransport(nil)
	}
	if t, ok := o.Transport.(*http.Transport); ok && t.TLSClientConfig != nil && t.TLSClientConfig.InsecureSkipVerify {
		return nil, errors.New("llmproxy: the transport skips TLS verification; the credential must only reach a verified model API")
	}
	if o.RequestsPerMinute <= 0 {
		o.RequestsPerMinute = DefaultRequestsPerMinute
	}
	if o.Burst <= 0 {
		o.Burst = min(DefaultBurst, o.RequestsPerMinute)
	}
	if o.RejectionsPerMinute <= 0 {
		o.RejectionsPerMinute = DefaultRejectionsPerMinute
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.DeniedBetas == nil {
		o.DeniedBetas = []string{"mcp-client-", "web-fetch-"}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Proxy{
		o:        o,
		upstream: url.URL{Scheme: o.Upstream.Scheme, Host: o.Upstream.Host},
		rt:       o.Transport,
		limiter:  rate.NewLimiter(rate.Limit(float64(o.RequestsPerMinute)/60), o.Burst),
		rejects: throttle{
			budget: rate.NewLimiter(rate.Limit(float64(o.RejectionsPerMinute)/60), max(1, o.RejectionsPerMinute/6)),
			sample: rate.NewLimiter(1, 1),
		},
		log: o.Logger.With("session", o.Session, "group", o.Group),
	}, nil
}

// NewTransport returns the transport New uses by default, trusting roots
// (nil: the system's roots): a clone of http.DefaultTransport (its
// timeouts, its proxy from the environment, HTTP/2) with TLS 1.2 or later,
// certificates verified, and no transparent gzip. A core configured with a
// private CA for its upstream passes NewTransport(itsPool) as
// Options.Transport.
func NewTransport(roots *x509.CertPool) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	t.DisableCompression = true
	return t
}

// call is the state of one request, for its audit entry.
type call struct {
	id     string
	start  time.Time
	method string
	path   string // as the client sent it; quoted when refused
	ep     endpoint
	body   []byte
	status int
	u      usage
	// unread says why the reply's usage could not be read (compressed,
	// too large, not JSON); empty when it was read, whether or not it
	// held a usage object.
	unread string
	code   string // failure code; "" for success
	detail string // why, for the audit and the log
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := &call{id: rand.Text(), start: time.Now(), method: r.Method}
	ep, path, status, msg := classify(r)
	if status != 0 {
		target, _, _ := strings.Cut(r.RequestURI, "?")
		c.method, c.path = fmt.Sprintf("%.16q", r.Method), fmt.Sprintf("%.200q", target)
		typ := "permission_error"
		if status == http.StatusMethodNotAllowed {
			typ = "invalid_request_error"
			w.Header().Set("Allow", ep.method())
		}
		p.refuse(w, c, status, typ, CodeNotAllowed, msg)
		return
	}
	c.ep, c.path = ep, path

	if wait, ok := p.reserve(); !ok {
		secs := int64(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		w.Header().Set("X-Should-Retry", "true")
		p.refuse(w, c, http.StatusTooManyRequests, "rate_limit_error", CodeRateLimited,
			fmt.Sprintf("Carapace: this session is over its rate of %d model API requests a minute; retry in %d s", p.o.RequestsPerMinute, secs))
		return
	}

	if ep == epMessages && p.o.Budget != nil {
		if err := p.o.Budget.Allow(p.o.Group); err != nil {
			if !errors.Is(err, ErrBudget) {
				c.detail = err.Error()
				p.refuse(w, c, http.StatusInternalServerError, "api_error", CodeBudget, "Carapace could not check the daily token budget")
				return
			}
			// A Retry-After over 60 s makes Claude Code show the error at
			// once instead of retrying; X-Should-Retry says the same.
			w.Header().Set("X-Should-Retry", "false")
			if be := (*BudgetError)(nil); errors.As(err, &be) {
				w.Header().Set("Retry-After", strconv.FormatInt(max(1, int64(math.Ceil(be.RetryAfter.Seconds()))), 10))
			}
			c.detail = err.Error()
			p.refuse(w, c, http.StatusTooManyRequests, "rate_limit_error", CodeBudget,
				fmt.Sprintf("Carapace: the daily token budget of group %s is spent; it resets at midnight", p.o.Group))
			return
		}
	}

	body, status, err := readBody(w, r, p.o.MaxRequestBytes)
	if err != nil {
		c.detail = err.Error()
		if status == http.StatusRequestEntityTooLarge {
			p.refuse(w, c, status, "request_too_large", CodeTooLarge,
				fmt.Sprintf("Carapace: the request body is larger than %d bytes", p.o.MaxRequestBytes))
		} else {
			p.refuse(w, c, status, "invalid_request_error", CodeBadRequest, "Carapace could not read the request body")
		}
		return
	}
	c.body = body

	if ep == epMessages || ep == epCountTokens {
		be := checkBody(body)
		if be == nil && len(p.o.Models) > 0 {
			be = checkModel(body, p.o.Group, p.o.Models)
		}
		if be != nil {
			c.detail = be.detail
			p.refuse(w, c, be.status, be.typ, be.code, be.msg)
			return
		}
	}

	cred, err := p.o.Credential(r.Context())
	if err == nil {
		err = cred.Check()
	}
	if err != nil {
		c.detail = err.Error()
		if errors.Is(err, ErrNoCredential) {
			p.refuse(w, c, http.StatusUnauthorized, "authentication_error", CodeNoCredential,
				noCredentialMessage(p.o.Provider))
		} else {
			p.refuse(w, c, http.StatusInternalServerError, "api_error", CodeCredential, "Carapace could not read the model API's credential")
		}
		return
	}

	routed := p.entry(c, audit.OutcomeRouted)
	routed.Reason = c.method + " " + c.path
	if err := p.o.Audit.Write(routed); err != nil {
		p.log.Error("llm proxy: cannot write the audit log; the request was not sent", "id", c.id, "err", err)
		writeAPIError(w, http.StatusInternalServerError, "api_error", "Carapace could not write its audit log, so it did not send the request")
		return
	}
	p.forward(w, r, c, cred)
}

// reserve takes a token from the session's rate, or returns how long until
// one is free.
func (p *Proxy) reserve() (time.Duration, bool) {
	res := p.limiter.Reserve()
	if !res.OK() {
		return time.Minute, false
	}
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return d, false
	}
	return 0, true
}

// readBody reads the request body, at most limit bytes. On failure it
// returns the status to answer: 413 or 400.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, int, error) {
	if r.ContentLength > limit {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("Content-Length %d is over the limit of %d bytes", r.ContentLength, limit)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("the body is over the limit of %d bytes", limit)
	case err != nil:
		return nil, http.StatusBadRequest, fmt.Errorf("read the request body: %w", err)
	}
	return buf.Bytes(), 0, nil
}

// forward sends the request to the model API and relays its reply.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, c *call, cred Credential) {
	u := p.upstream
	u.Path, u.RawQuery = c.path, r.URL.RawQuery
	var body io.Reader
	if c.ep.method() == http.MethodPost {
		body = bytes.NewReader(c.body)
	}
	ctx := r.Context()
	out, err := http.NewRequestWithContext(ctx, c.ep.method(), u.String(), body)
	if err != nil {
		c.code, c.detail = CodeUnreachable, fmt.Sprintf("build the request: %v", err)
		writeAPIError(w, http.StatusBadGateway, "api_error", "Carapace could not reach the model API")
		p.finish(c)
		return
	}
	var denied int
	out.Header, denied = outboundHeader(r.Header, cred, p.o.DeniedBetas)
	if denied > 0 {
		p.log.Info("llm proxy: dropped anthropic-beta values that let the model API reach the network", "id", c.id, "count", denied, "denied_prefixes", p.o.DeniedBetas)
	}

	resp, err := p.rt.RoundTrip(out)
	if err != nil {
		if ctx.Err() != nil {
			c.code, c.detail = CodeCanceled, "cancelled before the reply: the client left or the session ended"
		} else {
			c.code, c.detail = CodeUnreachable, "could not reach the model API: "+transportDetail(err)
			writeAPIError(w, http.StatusBadGateway, "api_error", "Carapace could not reach the model API")
		}
		p.finish(c)
		return
	}
	defer resp.Body.Close()
	c.status = resp.StatusCode

	h := w.Header()
	for k, vs := range resp.Header {
		if relayResponseHeader(k) {
			h[k] = vs
		}
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	sse := mt == "text/event-stream"
	plain := resp.Header.Get("Content-Encoding") == "" || strings.EqualFold(resp.Header.Get("Content-Encoding"), "identity")

	// What to read from the reply as it passes: usage from a successful
	// Messages reply, the error type from an error reply.
	var sink io.Writer
	var tail *jsonTail
	switch {
	case !plain:
	case c.ep == epMessages && resp.StatusCode == http.StatusOK && sse:
		sink = &sseScanner{u: &c.u}
	case c.ep == epMessages && resp.StatusCode == http.StatusOK,
		resp.StatusCode >= 400 && !sse:
		tail = &jsonTail{limit: maxJSONReply}
		if resp.StatusCode >= 400 {
			tail.limit = 64 << 10
		}
		sink = tail
	}

	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	if sse {
		_ = rc.Flush() // the headers now, not with the first event
	}
	readErr, writeErr := relay(w, rc, resp.Body, sink, sse)

	switch {
	case writeErr != nil || ctx.Err() != nil:
		// A cancelled read can also end as a clean EOF: the API's side
		// ends its reply when it sees the connection go.
		c.code, c.detail = CodeCanceled, "cancelled during the reply: the client left or the session ended"
	case readErr != nil:
		c.code, c.detail = CodeStream, "the reply broke off: "+transportDetail(readErr)
	case tail != nil && resp.StatusCode >= 400:
		if t := tail.errorType(); t != "" {
			c.detail = t
		}
	case tail != nil:
		if err := tail.parse(&c.u); err != nil {
			c.unread = err.Error()
			p.log.Warn("llm proxy: cannot read the usage of a reply", "id", c.id, "err", err)
		}
	}
	if c.code == "" && c.u.ErrorType != "" {
		c.code, c.detail = CodeStream, "the stream reported "+c.u.ErrorType
	}
	if c.code == "" && resp.StatusCode >= 400 {
		c.code = CodeUpstream
	}
	if c.ep == epMessages && resp.StatusCode == http.StatusOK && !plain {
		c.unread = "the reply is compressed"
		p.log.Warn("llm proxy: the model API sent a compressed reply; its usage is unknown", "id", c.id)
	}
	p.finish(c)
	if writeErr == nil && (readErr != nil || ctx.Err() != nil) {
		// Break the client's connection rather than end the reply as if
		// it were whole.
		panic(http.ErrAbortHandler)
	}
}

// relay copies the reply to the client, and to sink when it is not nil,
// flushing after each chunk of a stream.
func relay(w io.Writer, rc *http.ResponseController, r io.Reader, sink io.Writer, flush bool) (readErr, writeErr error) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, writeErr = w.Write(buf[:n]); writeErr != nil {
				return nil, writeErr
			}
			if flush {
				if writeErr = rc.Flush(); writeErr != nil && !errors.Is(writeErr, http.ErrNotSupported) {
					return nil, writeErr
				}
				writeErr = nil
			}
			if sink != nil {
				_, _ = sink.Write(buf[:n])
			}
		}
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return err, nil
		}
	}
}

// transportDetail describes a transport error for the audit and the log:
// the cause without the URL (whose query the client chose).
func transportDetail(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return textutil.Clip(err.Error(), 300)
}

// entry returns an audit entry of c.
func (p *Proxy) entry(c *call, outcome string) *audit.Entry {
	return &audit.Entry{
		Time:    time.Now().UTC(),
		ID:      c.id,
		Session: p.o.Session,
		Group:   p.o.Group,
		Source:  "agent",
		Stage:   StageLLM,
		Outcome: outcome,
		Code:    c.code,
	}
}

// finish charges the budget and writes the outcome of a forwarded call.
func (p *Proxy) finish(c *call) {
	elapsed := time.Since(c.start)
	if c.ep == epMessages && c.u.Known && p.o.Budget != nil {
		p.o.Budget.Add(p.o.Group, c.u.total())
	}
	if c.u.Model == "" && c.ep != epModels && c.ep != epModel {
		c.u.Model = requestModel(c.body)
	}
	outcome := audit.OutcomeOK
	if c.code != "" {
		outcome = audit.OutcomeError
	}
	e := p.entry(c, outcome)
	e.Reason = c.reason()
	e.DurationMS = float64(elapsed.Microseconds()) / 1000
	if err := p.o.Audit.Write(e); err != nil {
		p.log.Error("llm proxy: cannot write the audit log", "id", c.id, "err", err)
	}
	level := slog.LevelDebug
	if c.code != "" {
		level = slog.LevelWarn
	}
	p.log.Log(context.Background(), level, "llm call", "id", c.id, "endpoint", c.method+" "+c.path,
		"model", c.u.Model, "status", c.status, "in_tokens", c.u.in(), "out_tokens", c.u.Output,
		"code", c.code, "detail", c.detail, "ms", e.DurationMS)
}

// reason is the audit entry's Reason: what was called, the model, the
// status and the tokens, and why it failed; never a header or a body.
func (c *call) reason() string {
	var b strings.Builder
	b.WriteString(c.method + " " + c.path + ":")
	sep := " "
	add := func(format string, a ...any) {
		b.WriteString(sep)
		fmt.Fprintf(&b, format, a...)
		sep = ", "
	}
	if c.u.Model != "" {
		add("model %s", c.u.Model)
	}
	if c.status != 0 {
		add("status %d", c.status)
	}
	if c.ep == epMessages && c.status == http.StatusOK {
		if c.u.Known {
			add("%d in / %d out tokens", c.u.in(), c.u.Output)
			if c.u.CacheRead > 0 || c.u.CacheWrite > 0 {
				fmt.Fprintf(&b, " (%d cache read, %d cache write)", c.u.CacheRead, c.u.CacheWrite)
			}
		} else if c.unread != "" {
			add("usage unknown (%s); not charged to the budget", c.unread)
		} else {
			// The upstream sent no usage object (a gateway or a local
			// server that does not count): say so rather than count 0.
			add("usage not reported by the upstream; not charged to the budget")
		}
	}
	if c.detail != "" {
		add("%s", c.detail)
	}
	return b.String()
}

// refuse audits a request the proxy will not forward, unless too many
// refusals came before it, and answers it.
func (p *Proxy) refuse(w http.ResponseWriter, c *call, status int, typ, code, msg string) {
	// Audit first, so that the entry exists by the time the client has
	// its answer.
	defer writeAPIError(w, status, typ, msg)
	c.code = code
	ok, skipped := p.rejects.admit()
	if !ok {
		return
	}
	e := p.entry(c, audit.OutcomeRejected)
	e.Reason = c.method + " " + c.path + ": " + msg
	if c.detail != "" {
		e.Reason += " (" + c.detail + ")"
	}
	if skipped > 0 {
		e.Reason += fmt.Sprintf("; %d refusals before this one were not audited", skipped)
	}
	e.DurationMS = float64(time.Since(c.start).Microseconds()) / 1000
	if err := p.o.Audit.Write(e); err != nil {
		p.log.Error("llm proxy: cannot write the audit log", "id", c.id, "err", err)
	}
	p.log.Info("llm proxy: refused a request", "id", c.id, "endpoint", c.method+" "+c.path, "status", status, "code", code)
}

// throttle bounds the refusals audited one by one.
type throttle struct {
	mu             sync.Mutex
	budget, sample *rate.Limiter
	suppressed     int
}

// admit reports whether to audit a refusal, and how many were not audited
// since the last that was.
func (t *throttle) admit() (bool, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.budget.Allow() || t.sample.Allow() {
		n := t.suppressed
		t.suppressed = 0
		return true, n
	}
	t.suppressed++
	return false, 0
}

// apiError is the model API's error shape, which Claude Code shows.
type apiError struct {
	Type  string       `json:"type"`
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// writeAPIError answers with an error in the model API's shape.
func writeAPIError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(apiError{Type: "error", Error: apiErrorBody{Type: typ, Message: msg}})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// noCredentialMessage tells the user how to store provider's credential.
func noCredentialMessage(provider string) string {
	if provider == ProviderAnthropic {
		return "Carapace has no credential for the model API: on the host, run `carapace auth set --llm anthropic` (or with --oauth)"
	}
	return "Carapace has no credential for the " + provider + " model API: on the host, run `carapace auth set --llm " + provider + "`, or set its auth to \"none\" in config.toml if it takes none"
}
