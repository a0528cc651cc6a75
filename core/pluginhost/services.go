package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/core/plugin"
)

// serveCall answers a service call of the handler in a goroutine of its
// own. Runs on the receive loop, which is the only caller of
// p.services.Add, and closeTransport waits for the loop before it waits
// for p.services.
func (p *Process) serveCall(m *pluginproto.Message) {
	if m.ID == 0 {
		p.cutOff("made a call without an id")
		return
	}
	if !p.svcLimit.Allow() {
		p.reply(m.ID, nil, &pluginproto.Error{Kind: pluginproto.KindInternal, Message: "too many service calls: rate limit exceeded"})
		return
	}
	select {
	case p.svcSlots <- struct{}{}:
	default:
		p.reply(m.ID, nil, &pluginproto.Error{Kind: pluginproto.KindInternal, Message: "too many service calls in flight"})
		return
	}
	p.services.Add(1)
	go func() {
		defer p.services.Done()
		defer func() { <-p.svcSlots }()
		result, perr := p.service(m)
		p.reply(m.ID, result, perr)
	}()
}

// service runs one service call with the ctx of the core call it names.
func (p *Process) service(m *pluginproto.Message) (any, *pluginproto.Error) {
	p.mu.Lock()
	svc := p.svc
	var callCtx context.Context
	if c, ok := p.calls[m.Scope]; ok && m.Scope != 0 {
		callCtx = c.ctx
	}
	p.mu.Unlock()
	if svc == nil {
		return nil, &pluginproto.Error{Kind: pluginproto.KindInternal, Message: errServicesBeforeInit.Error()}
	}
	switch {
	case m.Scope != 0 && callCtx == nil:
		return nil, serviceError(plugin.ErrNoRequest)
	case m.Scope == 0 && (m.Method == pluginproto.MethodAuditLog || m.Method == pluginproto.MethodSessionInfo):
		return nil, serviceError(plugin.ErrNoRequest) // they need a request: no need to ask
	case m.Scope == 0:
		callCtx = context.Background()
	}
	// The call's values (the core's scoping) with the socket's lifetime too.
	ctx, cancel := context.WithCancel(callCtx)
	defer cancel()
	stop := context.AfterFunc(p.rctx, cancel)
	defer stop()

	var (
		result any
		err    error
	)
	switch m.Method {
	case pluginproto.MethodAuditLog:
		var f plugin.AuditFilter
		if perr := params(m.Params, &f); perr != nil {
			return nil, perr
		}
		result, err = svc.GetAuditLog(ctx, f)
	case pluginproto.MethodToolCatalog:
		result, err = svc.GetToolCatalog(ctx)
	case pluginproto.MethodSessionInfo:
		result, err = svc.GetSessionInfo(ctx)
	case pluginproto.MethodReadCredential:
		var cp pluginproto.CredentialParams
		if perr := params(m.Params, &cp); perr != nil {
			return nil, perr
		}
		var v string
		v, err = svc.ReadCredential(ctx, cp.Key)
		result = pluginproto.CredentialResult{Value: v}
	case pluginproto.MethodPublishEvent:
		var ev plugin.Event
		if perr := params(m.Params, &ev); perr != nil {
			return nil, perr
		}
		err = svc.PublishEvent(ctx, &ev)
		result = struct{}{}
	case pluginproto.MethodAuditDropped:
		var dp pluginproto.DroppedParams
		if perr := params(m.Params, &dp); perr != nil {
			return nil, perr
		}
		err = svc.AuditDropped(ctx, dp.What)
		result = struct{}{}
	case pluginproto.MethodReportHealth:
		var hp pluginproto.HealthParams
		if perr := params(m.Params, &hp); perr != nil {
			return nil, perr
		}
		err = svc.ReportHealth(ctx, hp.Degraded, hp.Why)
		result = struct{}{}
	case pluginproto.MethodPaused:
		var paused bool
		paused, err = svc.Paused(ctx)
		result = pluginproto.PausedParams{Paused: paused}
	case pluginproto.MethodDecide:
		var d plugin.Decision
		if perr := params(m.Params, &d); perr != nil {
			return nil, perr
		}
		err = svc.Decide(ctx, d)
		result = struct{}{}
	case pluginproto.MethodCoreStatus:
		result, err = svc.CoreStatus(ctx)
	case pluginproto.MethodSetPaused:
		var pp pluginproto.PausedParams
		if perr := params(m.Params, &pp); perr != nil {
			return nil, perr
		}
		err = svc.SetPaused(ctx, pp.Paused)
		result = struct{}{}
	case pluginproto.MethodStopSession:
		var sp pluginproto.SessionParams
		if perr := params(m.Params, &sp); perr != nil {
			return nil, perr
		}
		err = svc.StopSession(ctx, sp.Session)
		result = struct{}{}
	default:
		return nil, &pluginproto.Error{Kind: pluginproto.KindInternal, Message: "unknown service method " + strconvQuote(m.Method)}
	}
	if err != nil {
		if e := serviceError(err); e.Kind != pluginproto.KindInternal {
			return nil, e
		}
		p.log.Warn("plugin service call failed", "method", m.Method, "err", err)
		return nil, &pluginproto.Error{Kind: pluginproto.KindInternal, Message: m.Method + " failed"}
	}
	return result, nil
}

func params(raw json.RawMessage, v any) *pluginproto.Error {
	if err := pluginproto.DecodeValue(raw, v); err != nil {
		return &pluginproto.Error{Kind: pluginproto.KindInternal, Message: "bad params: " + err.Error()}
	}
	return nil
}

// serviceError maps the Services sentinels to their kinds; anything else
// is internal.
func serviceError(err error) *pluginproto.Error {
	for _, k := range []struct {
		err    error
		kind   string
		detail bool // the message says more than the sentinel: how the confirmation ended (the surface shows it), which group was refused
	}{
		{plugin.ErrNoRequest, pluginproto.KindNoRequest, false},
		{plugin.ErrNoCredential, pluginproto.KindNoCredential, false},
		{plugin.ErrNotChannel, pluginproto.KindNotChannel, false},
		{plugin.ErrCoreTopic, pluginproto.KindCoreTopic, false},
		{plugin.ErrNotSurface, pluginproto.KindNotSurface, false},
		{plugin.ErrAlreadyDecided, pluginproto.KindDecided, true},
		{plugin.ErrGroupNotGranted, pluginproto.KindGroupNotGranted, true},
	} {
		switch {
		case !errors.Is(err, k.err):
		case k.detail:
			return &pluginproto.Error{Kind: k.kind, Message: strings.TrimPrefix(err.Error(), k.err.Error()+": ")}
		default:
			return &pluginproto.Error{Kind: k.kind, Message: k.err.Error()}
		}
	}
	return &pluginproto.Error{Kind: pluginproto.KindInternal, Message: "internal error"}
}

// reply sends the answer to the handler's call id.
func (p *Process) reply(id uint64, result any, perr *pluginproto.Error) {
	m := &pluginproto.Message{Type: pluginproto.TypeReply, ID: id, Error: perr}
	if perr == nil {
		raw, err := json.Marshal(result)
		if err != nil {
			p.log.Warn("plugin service result not encodable", "err", err)
			m.Error = &pluginproto.Error{Kind: pluginproto.KindInternal, Message: "result not encodable"}
		} else {
			m.Result = raw
		}
	}
	frame, err := pluginproto.Encode(m)
	if err != nil {
		m.Result = nil
		m.Error = &pluginproto.Error{Kind: pluginproto.KindInternal, Message: "result too large"}
		if frame, err = pluginproto.Encode(m); err != nil {
			return
		}
	}
	select {
	case p.out <- frame:
	case <-p.quit:
	}
}
