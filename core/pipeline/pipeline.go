// Package pipeline runs every request from an agent session through the six
// stages of the core — (1) construct the envelope from session state,
// (2) the topic names a catalogued tool, (3) arguments match the tool's
// schema, (4) group authorisation and rate limits, (5) user confirmation for
// high-risk tools, (6) route to the handler — and every answer through the
// response path: sanitise, log, forward. Errors take the same path. What a
// handler's result, error, panic or timeout becomes for the agent is
// core/outcome's to say, so that plugintest shows plugin authors the same.
package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/confirm"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/outcome"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/sanitize"
	"github.com/carapace-dev/carapace/core/session"
	"github.com/carapace-dev/carapace/internal/textutil"
	"github.com/carapace-dev/carapace/ipc"
)

// DefaultHandlerTimeout bounds one handler call.
const DefaultHandlerTimeout = 30 * time.Second

// DefaultPreviewTimeout bounds a handler's Preview of one call.
const DefaultPreviewTimeout = 10 * time.Second

// Rate is a per-session, per-tool rate limit.
type Rate struct {
	PerMinute int // sustained requests per minute
	Burst     int // requests allowed at once
}

func (r Rate) limit() rate.Limit { return rate.Limit(float64(r.PerMinute) / 60) }

// Auditor writes audit entries. Write must fail when the entry was not
// recorded: the pipeline then refuses to run the request.
type Auditor interface {
	Write(e *audit.Entry) error
}

// Options configure a Pipeline.
type Options struct {
	Catalog        *catalog.Catalog
	Audit          Auditor
	Gate           *confirm.Gate
	HandlerTimeout time.Duration          // default DefaultHandlerTimeout
	PreviewTimeout time.Duration          // default DefaultPreviewTimeout
	RateFor        func(tool string) Rate // the limit for a tool
	// Rejections is how many rejected requests per session are audited in
	// full; beyond it one a second is, with a count of the rest. Default
	// 600 a minute, bursts of 100.
	Rejections Rate
	// Available reports whether a plugin's handler can take calls; nil
	// means always.
	Available func(plugin string) bool
	Logger    *slog.Logger
}

// Pipeline is safe for concurrent use by every session.
type Pipeline struct {
	opts Options
	log  *slog.Logger

	mu       sync.RWMutex // guards draining against inflight.Add
	draining bool
	inflight sync.WaitGroup
	drainCtx context.Context
	drain    context.CancelFunc
}

// New returns a pipeline.
func New(opts Options) *Pipeline {
	if opts.HandlerTimeout <= 0 {
		opts.HandlerTimeout = DefaultHandlerTimeout
	}
	if opts.PreviewTimeout <= 0 {
		opts.PreviewTimeout = DefaultPreviewTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Rejections.PerMinute <= 0 {
		opts.Rejections = Rate{PerMinute: 600, Burst: 100}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pipeline{opts: opts, log: opts.Logger, drainCtx: ctx, drain: cancel}
}

// Drain stops routing: requests not yet routed, including those waiting for
// a confirmation, are answered PLUGIN_UNAVAILABLE; calls already in their
// handler go on. Wait then blocks until every call has been answered.
func (p *Pipeline) Drain() {
	p.mu.Lock()
	p.draining = true
	p.mu.Unlock()
	p.drain()
}

// Wait blocks until every call in the pipeline has been answered or ctx ends.
func (p *Pipeline) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { p.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Draining reports whether Drain has been called.
func (p *Pipeline) Draining() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.draining
}

// call is one request on its way through the pipeline.
type call struct {
	s        *session.Session
	id       string
	received time.Time
	req      *ipc.Request
	tool     *catalog.Tool
	send     func(frame []byte, final bool)
	approval string // the confirmation the user approved, for a high-risk call
	// preview is the call's preview, for a tool that declares one: its
	// digest goes to the handler once approved.
	preview *plugin.Preview
}

// Reject answers a wire message that failed to decode (stage 1). raw
// correlation, if known, is echoed so the client can match the answer.
func (p *Pipeline) Reject(s *session.Session, correlation string, werr *ipc.Error, send func(frame []byte, final bool)) {
	c := &call{s: s, id: uuid.NewString(), received: time.Now().UTC(), req: &ipc.Request{Correlation: correlation}, send: send}
	if ipc.CheckCorrelation(correlation) != nil {
		c.req.Correlation = ""
	}
	p.fail(c, audit.StageEnvelope, audit.OutcomeRejected, werr)
}

// Handle runs a decoded wire message through stages 1–6 and the response
// path. send is called with final false for the interim pending frame while
// a confirmation is awaited, and exactly once with final true for the
// response.
func (p *Pipeline) Handle(ctx context.Context, s *session.Session, req *ipc.Request, send func(frame []byte, final bool)) {
	c := &call{s: s, id: uuid.NewString(), received: time.Now().UTC(), req: req, send: send}

	// Stage 1 is done: the envelope is c, built from session state, the
	// core's clock and id, and the wire's topic, correlation and arguments.
	// Every call is in flight from here, so that a drain waits for its
	// answer to be sent whatever stage it is in.
	p.mu.RLock()
	if p.draining {
		p.mu.RUnlock()
		p.fail(c, audit.StageRoute, audit.OutcomeError, ipc.Errorf(ipc.CodePluginUnavailable, 6, "the core is shutting down; retry when it is back"))
		return
	}
	p.inflight.Add(1)
	p.mu.RUnlock()
	defer p.inflight.Done()

	// Stage 2: the topic names a catalogued tool.
	name := req.Tool()
	c.tool = p.opts.Catalog.Lookup(name)
	if c.tool == nil {
		p.fail(c, audit.StageTopic, audit.OutcomeRejected, unknownTool(req.Topic, name))
		return
	}

	// Stage 3: arguments match the tool's schema.
	args, verr := decodeArguments(req.Arguments)
	if verr == nil {
		if err := c.tool.Schema.Validate(args); err != nil {
			pr := catalog.Explain(err)
			verr = &ipc.Error{Code: ipc.CodeValidationFailed, Stage: 3, Field: pr.Field, Message: pr.Message}
		}
	}
	if verr != nil {
		p.fail(c, audit.StagePayload, audit.OutcomeRejected, verr)
		return
	}

	// Stage 4: group authorisation, then the session's rate for the tool.
	if !c.tool.Allowed(s.Group) {
		p.fail(c, audit.StageAuthorize, audit.OutcomeRejected, ipc.Errorf(ipc.CodeUnauthorized, 4, "group %q is not allowed to use %s", s.Group, c.tool.Name))
		return
	}
	if e := p.rateLimit(c); e != nil {
		p.fail(c, audit.StageAuthorize, audit.OutcomeRejected, e)
		return
	}

	// The tool's own check (the core's tools only): after the group's
	// authorisation, before anyone is asked. It may put this call to the
	// user although the tool's risk is low, never the other way round.
	var summary string
	// A low-risk tool's call that gives one of its high_risk_if arguments
	// (an event's attendees: an invitation mailed to them) is high-risk.
	ask := c.tool.RiskLevel == manifest.RiskHigh || manifest.RaisesRisk(c.tool.HighRiskIf, args)
	if c.tool.Check != nil {
		v, err := c.tool.Check(session.NewContext(ctx, s), catalog.Call{Args: args, Received: c.received})
		switch {
		case errors.Is(err, catalog.ErrNotAllowed):
			p.fail(c, audit.StageAuthorize, audit.OutcomeRejected, ipc.Errorf(ipc.CodeUnauthorized, 4, "%s", err.Error()))
			return
		case err != nil:
			p.fail(c, audit.StagePayload, audit.OutcomeRejected, &ipc.Error{Code: ipc.CodeValidationFailed, Stage: 3, Field: "arguments", Message: err.Error()})
			return
		}
		summary, ask = v.Summary, ask || v.Confirm
	}

	// Provenance and taint (docs/SECURITY.md): a URL the session was not
	// given, or an egress call of a tainted session, waits for the user
	// with the reason, whatever the tool's risk.
	why := reasons(c, args)
	ask = ask || len(why) > 0

	// A tool whose calls do more than their arguments say (a draft to
	// send) always waits for the user, with its preview: the handler's
	// rendering of the exact content, and the digest the approval binds.
	// No preview, no confirmation: the call is refused.
	if c.tool.Preview {
		ask = true
		if e := p.fetchPreview(ctx, c, args); e != nil {
			p.fail(c, audit.StageConfirm, audit.OutcomeRejected, e)
			return
		}
	}

	// Stage 5: high-risk tools, and the calls their Check puts to the user,
	// wait for the user.
	if ask {
		canonical, err := json.Marshal(args) // sorted keys: the form the user approves
		if err != nil {
			p.fail(c, audit.StagePayload, audit.OutcomeRejected, &ipc.Error{Code: ipc.CodeValidationFailed, Stage: 3, Field: "arguments", Message: "arguments cannot be canonicalised"})
			return
		}
		if e := p.confirm(ctx, c, canonical, summary, why); e != nil {
			p.fail(c, audit.StageConfirm, e.outcome, e.err)
			return
		}
	}

	// Stage 6: route. The routed entry is written first: a request that
	// cannot be audited is not run.
	if p.Draining() {
		p.fail(c, audit.StageRoute, audit.OutcomeError, ipc.Errorf(ipc.CodePluginUnavailable, 6, "the core is shutting down; retry when it is back"))
		return
	}

	if p.opts.Available != nil && !p.opts.Available(c.tool.Plugin) || c.tool.Handler == nil {
		p.fail(c, audit.StageRoute, audit.OutcomeError, ipc.Errorf(ipc.CodePluginUnavailable, 6, "plugin %s is not running; get_session_info shows plugin health", c.tool.Plugin))
		return
	}
	// What the user approved is what runs: content that changed since
	// its preview was shown is not routed (the handler checks again).
	if c.preview != nil {
		if te := p.recheckPreview(ctx, c, args); te != nil {
			p.answer(c, nil, te)
			return
		}
	}
	routed := &audit.Entry{Stage: audit.StageRoute, Outcome: audit.OutcomeRouted, Source: c.tool.Plugin, Confirmation: c.approval}
	if c.preview != nil {
		routed.PreviewDigest = c.preview.Digest
	}
	if err := p.write(c, routed); err != nil {
		p.log.Error("audit log unwritable; refusing request", "err", err, "session", s.ID, "topic", req.Topic)
		p.forward(c, p.errorFrame(c, "core", ipc.Errorf(ipc.CodePluginUnavailable, 6, "the core cannot write its audit log, so the request was not run")))
		return
	}
	preq := &plugin.Request{Tool: c.tool.Name, Arguments: args, Group: s.Group, Session: s.ID, Correlation: req.Correlation, EnvelopeID: c.id, Time: c.received}
	if c.preview != nil {
		preq.PreviewDigest = c.preview.Digest
	}
	hctx := session.NewContext(ctx, s)
	if c.approval != "" {
		hctx = confirm.NewContext(hctx, c.approval)
	}
	res, herr := outcome.Call(hctx, p.opts.HandlerTimeout, func(ctx context.Context) (map[string]any, error) {
		return c.tool.Handler.Invoke(ctx, preq)
	})
	p.received(c, args, res)
	p.answer(c, res, herr)
}

func unknownTool(topic, name string) *ipc.Error {
	if name == "" {
		hint := ""
		if !strings.Contains(topic, ".") {
			hint = fmt.Sprintf("; did you mean %s%s?", ipc.ToolTopicPrefix, topic)
		}
		return ipc.Errorf(ipc.CodeUnknownTool, 2, "topic %q is not a tool invocation (tool.invoke.<name>)%s", textutil.Clip(topic, 80), hint)
	}
	return ipc.Errorf(ipc.CodeUnknownTool, 2, "unknown tool %q; call list_tools to see the tools available", textutil.Clip(name, 80))
}

// decodeArguments decodes the arguments for validation, keeping numbers
// exact (json.Number) so that the schema and the handler see what was sent.
func decodeArguments(raw json.RawMessage) (map[string]any, *ipc.Error) {
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil || args == nil {
		return nil, &ipc.Error{Code: ipc.CodeValidationFailed, Stage: 3, Field: "arguments", Message: "arguments must be a JSON object"}
	}
	return args, nil
}

func (p *Pipeline) rateLimit(c *call) *ipc.Error {
	r := Rate{PerMinute: 60, Burst: 60}
	if p.opts.RateFor != nil {
		r = p.opts.RateFor(c.tool.Name)
	}
	lim := c.s.Limiter(c.tool.Name, r.limit(), r.Burst)
	if lim.Allow() {
		return nil
	}
	now := time.Now()
	res := lim.ReserveN(now, 1)
	delay := res.DelayFrom(now)
	res.CancelAt(now)
	retry := int(math.Ceil(delay.Seconds()))
	if retry < 1 || !res.OK() {
		retry = 1
	}
	e := ipc.Errorf(ipc.CodeRateLimited, 4, "Rate limit exceeded for %s (%d requests/minute)", c.tool.Name, r.PerMinute)
	e.RetryAfter = retry
	return e
}

type confirmFailure struct {
	outcome string
	err     *ipc.Error
}

// fetchPreview asks the handler of a tool that declares a preview for the
// preview of this call (askPreview) and keeps it in c. It fails closed: a
// handler that cannot preview, errs, times out or returns an empty or
// oversized preview gets the call refused, and nobody is asked.
func (p *Pipeline) fetchPreview(ctx context.Context, c *call, args map[string]any) *ipc.Error {
	pv, why := p.askPreview(ctx, c, args)
	if pv == nil {
		return ipc.Errorf(ipc.CodeConfirmationDenied, 5, "%s was not put to the user: its plugin could not show what it would do (%s), so it was refused", c.tool.Name, why)
	}
	c.preview = pv
	return nil
}

// recheckPreview asks the handler for the call's preview again, once
// approved and right before it runs, and refuses the call (a ToolError
// for p.answer, as the handler's own CheckDigest would) if the content no
// longer has the digest the user approved, or cannot be previewed. The
// handler checks the digest too, on the bytes it acts on: this check does
// not rely on it, and leaves it only the moment between the two.
func (p *Pipeline) recheckPreview(ctx context.Context, c *call, args map[string]any) *plugin.ToolError {
	pv, why := p.askPreview(ctx, c, args)
	switch {
	case pv == nil:
		return &plugin.ToolError{Code: "PREVIEW_FAILED", Message: fmt.Sprintf("%s was approved, but its plugin could not show its content again before running it (%s), so it was not run", c.tool.Name, why)}
	case pv.Digest != c.preview.Digest:
		return &plugin.ToolError{Code: plugin.CodeContentChanged, Message: fmt.Sprintf("the content changed after the user approved %s (the core checked before running it), so it was not run; call it again to ask the user about the new content", c.tool.Name)}
	}
	return nil
}

// askPreview asks the handler for the preview of this call, bounded by
// PreviewTimeout, and returns it, or nil and why not in words the agent
// may read: what the handler said goes to the audit log and the core's
// log, not to the agent, unless it is a ToolError (a preview's text
// never goes to the agent).
func (p *Pipeline) askPreview(ctx context.Context, c *call, args map[string]any) (*plugin.Preview, string) {
	refuse := func(why string) (*plugin.Preview, string) {
		p.log.Warn("preview failed; call refused", "plugin", c.tool.Plugin, "tool", c.tool.Name, "correlation", c.req.Correlation, "why", textutil.Clip(why, 300))
		return nil, why
	}
	pv, ok := c.tool.Handler.(plugin.Previewer)
	if !ok || c.tool.Handler == nil || p.opts.Available != nil && !p.opts.Available(c.tool.Plugin) {
		return refuse("the plugin is not running or cannot preview")
	}
	preq := &plugin.Request{Tool: c.tool.Name, Arguments: args, Group: c.s.Group, Session: c.s.ID, Correlation: c.req.Correlation, EnvelopeID: c.id, Time: c.received}
	pctx, cancel := context.WithTimeout(session.NewContext(ctx, c.s), p.opts.PreviewTimeout)
	defer cancel()
	type answer struct {
		pv  *plugin.Preview
		err error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- answer{err: fmt.Errorf("preview panicked: %v", r)}
			}
		}()
		v, err := pv.Preview(pctx, preq)
		done <- answer{v, err}
	}()
	var a answer
	timedOut := false
	select {
	case a = <-done:
	case <-pctx.Done():
		a.err, timedOut = fmt.Errorf("no preview within %s", p.opts.PreviewTimeout), true
	}
	if a.err == nil {
		a.err = a.pv.Check()
	}
	if a.err != nil {
		why := "the preview failed"
		if te, ok := plugin.AsToolError(a.err); ok && te != nil {
			why = textutil.Clip(te.Message, 300) // meant for the agent's eyes
		} else if timedOut {
			why = a.err.Error()
		}
		detail, _ := sanitize.String(a.err.Error())
		_ = p.write(c, &audit.Entry{Stage: audit.StageHandler, Outcome: audit.OutcomeError, Source: c.tool.Plugin, Code: "PREVIEW_FAILED",
			Reason: textutil.Clip("preview: "+detail, 1000)})
		return refuse(why)
	}
	return a.pv, ""
}

func (p *Pipeline) confirm(ctx context.Context, c *call, canonical []byte, summary string, why []string) *confirmFailure {
	display, hidden := confirm.Display(canonical)
	r := confirm.Request{
		Session: c.s.ID, Group: c.s.Group, Tool: c.tool.Name, Correlation: c.req.Correlation,
		ArgsHash: confirm.HashArguments(canonical), Arguments: canonical, Display: display, Hidden: hidden, Summary: summary, Why: why,
	}
	if c.preview != nil { // the gate shows people DisplayPreview of it
		r.Preview, r.PreviewDigest = c.preview.Text, c.preview.Digest
	}
	tk, err := p.opts.Gate.Request(r)
	switch {
	case errors.Is(err, confirm.ErrTooMany):
		return &confirmFailure{audit.OutcomeDenied, ipc.Errorf(ipc.CodeConfirmationDenied, 5,
			"too many confirmations are already waiting for the user in group %s, so %s was denied without asking; wait for the user to answer them", c.s.Group, c.tool.Name)}
	case err != nil: // the confirmation could not be recorded: fail closed
		return &confirmFailure{audit.OutcomeRejected, ipc.Errorf(ipc.CodePluginUnavailable, 5, "the core cannot write its audit log, so the request was not run")}
	}
	// The gate's observer records the confirmation itself; a call that
	// joins an identical pending one is recorded here.
	if tk.Joined {
		reason := "joined an identical pending confirmation"
		for _, w := range why {
			reason += "; " + textutil.Clip(w, 500)
		}
		if err := p.write(c, &audit.Entry{Stage: audit.StageConfirm, Outcome: audit.OutcomePending, Source: "core", Confirmation: tk.ID(),
			Reason: reason}); err != nil {
			return &confirmFailure{audit.OutcomeRejected, ipc.Errorf(ipc.CodePluginUnavailable, 5, "the core cannot write its audit log, so the request was not run")}
		}
	}
	c.send(p.pendingFrame(c, tk.Confirmation()), false)

	wctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(p.drainCtx, func() { cancel(errors.New("the core is shutting down")) })
	err = p.opts.Gate.Wait(wctx, tk)
	stop()
	cancel(nil)
	cf := tk.Confirmation()
	switch {
	case err == nil:
		c.approval = tk.ID()
		return nil
	case errors.Is(err, confirm.ErrDenied):
		return &confirmFailure{audit.OutcomeDenied, ipc.Errorf(ipc.CodeConfirmationDenied, 5, "User denied %s request", c.tool.Name)}
	case errors.Is(err, confirm.ErrTimeout):
		return &confirmFailure{audit.OutcomeExpired, ipc.Errorf(ipc.CodeConfirmationTimeout, 5, "Nobody approved %s within %s", c.tool.Name, cf.Expires.Sub(cf.Created).Round(time.Second))}
	default:
		why := "the session closed"
		if p.Draining() {
			why = "the core is shutting down"
		}
		return &confirmFailure{audit.OutcomeRejected, ipc.Errorf(ipc.CodePluginUnavailable, 5, "%s; the confirmation was withdrawn", why)}
	}
}

// answer maps the handler's outcome to what the agent sees (core/outcome)
// and writes the audit entries: for a failure the handler's own outcome,
// then the response; for a result the response, with what the sanitiser
// removed.
func (p *Pipeline) answer(c *call, res map[string]any, herr error) {
	plug := c.tool.Plugin
	o := outcome.Of(res, herr, outcome.Options{Plugin: plug, Timeout: p.opts.HandlerTimeout,
		Envelope: func(result json.RawMessage) []byte { return p.frame(c, plug, result, nil) }})
	if !o.OK() {
		// The audit log keeps why; for a ToolError, whose message is
		// the whole story, the message.
		reason := textutil.Clip(o.Error.Message, 500)
		if o.Detail != "" {
			reason, _ = sanitize.String(o.Detail)
			reason = textutil.Clip(reason, 8000)
		}
		_ = p.write(c, &audit.Entry{Stage: audit.StageHandler, Outcome: audit.OutcomeError, Source: plug, Code: o.AuditCode(), Reason: reason})
		if herr != nil && o.Error.Code == ipc.CodePluginError {
			p.log.Error("plugin handler failed", "plugin", plug, "tool", c.tool.Name, "correlation", c.req.Correlation, "err", textutil.Clip(reason, 300))
		}
		p.respondErrorAt(c, audit.StageResponse, o.Source, audit.OutcomeError, o.Error, o.Redacted)
		return
	}
	e := &audit.Entry{Stage: audit.StageResponse, Outcome: audit.OutcomeOK, Source: plug}
	if len(o.Redacted) > 0 {
		e.Outcome = audit.OutcomeSanitized
		e.Redacted = redactionPaths(o.Redacted)
		p.log.Warn("sanitiser redacted a response", "plugin", plug, "tool", c.tool.Name, "paths", e.Redacted)
	}
	e.DurationMS = ms(time.Since(c.received))
	_ = p.write(c, e)
	p.forward(c, o.Frame)
}

// fail answers a request the pipeline refused or could not route.
func (p *Pipeline) fail(c *call, stage, result string, e *ipc.Error) {
	p.respondErrorAt(c, stage, "core", result, e, nil)
}

// respondErrorAt is the response path for errors: sanitise the message, log
// the entry (with the stage that produced it and what was redacted before,
// if anything), forward.
func (p *Pipeline) respondErrorAt(c *call, stage, source, result string, e *ipc.Error, redacted []sanitize.Redaction) {
	msg, kinds := sanitize.String(e.Message)
	e.Message = textutil.Clip(msg, 2000)
	e.Field = textutil.Clip(e.Field, 200)
	entry := &audit.Entry{Stage: stage, Outcome: result, Source: source, Code: string(e.Code), Field: e.Field, Reason: textutil.Clip(e.Message, 500), DurationMS: ms(time.Since(c.received))}
	if len(kinds) > 0 || len(redacted) > 0 {
		entry.Redacted = []string{"error.message"}
		p.log.Warn("sanitiser redacted an error message", "source", source, "paths", entry.Redacted)
	}
	audited := true
	if result == audit.OutcomeRejected {
		var skipped int
		audited, skipped = c.s.AuditRejection(p.opts.Rejections.limit(), p.opts.Rejections.Burst)
		if skipped > 0 {
			entry.Reason = textutil.Clip(entry.Reason, 400) + fmt.Sprintf(" (and %d more rejections in this session not logged one by one)", skipped)
		}
	}
	if audited {
		if err := p.write(c, entry); err != nil {
			p.log.Error("audit log unwritable", "err", err)
		}
	}
	p.forward(c, p.errorFrame(c, source, e))
}

func (p *Pipeline) write(c *call, e *audit.Entry) error {
	e.Time = time.Now().UTC()
	e.ID, e.Session, e.Group = c.id, c.s.ID, c.s.Group
	e.Topic, e.Correlation = c.req.Topic, c.req.Correlation
	if len(e.Topic) > 200 {
		e.Topic = textutil.Clip(e.Topic, 200)
	}
	err := p.opts.Audit.Write(e)
	c.s.Record(*e)
	return err
}

func (p *Pipeline) forward(c *call, frame []byte) { c.send(frame, true) }

func (p *Pipeline) errorFrame(c *call, source string, e *ipc.Error) []byte {
	return p.frame(c, source, nil, e)
}

func (p *Pipeline) frame(c *call, source string, result json.RawMessage, e *ipc.Error) []byte {
	r := ipc.Response{
		ID: c.id, Version: ipc.ProtocolVersion, Type: ipc.TypeResponse, Topic: textutil.Clip(c.req.Topic, ipc.MaxTopicLen),
		Source: source, Correlation: c.req.Correlation, Timestamp: time.Now().UTC(), Group: c.s.Group,
		Payload: ipc.Payload{Result: result, Error: e},
	}
	b, err := json.Marshal(&r)
	if err != nil { // cannot happen for these types; never send nothing
		p.log.Error("marshal response", "err", err)
		b, _ = json.Marshal(&ipc.Response{ID: c.id, Version: ipc.ProtocolVersion, Type: ipc.TypeResponse, Source: "core", Correlation: c.req.Correlation, Group: c.s.Group,
			Payload: ipc.Payload{Error: &ipc.Error{Code: ipc.CodePluginError, Message: "Internal error"}}})
	}
	return b
}

func (p *Pipeline) pendingFrame(c *call, pend confirm.Confirmation) []byte {
	r := ipc.Response{
		ID: c.id, Version: ipc.ProtocolVersion, Type: ipc.TypePending, Topic: c.req.Topic, Source: "core",
		Correlation: c.req.Correlation, Timestamp: time.Now().UTC(), Group: c.s.Group,
		Payload: ipc.Payload{Confirmation: &ipc.Confirmation{ID: pend.ID, ExpiresAt: pend.Expires}},
	}
	b, _ := json.Marshal(&r)
	return b
}

func redactionPaths(rs []sanitize.Redaction) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Path)
	}
	return out
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }
