package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"
	"golang.org/x/time/rate"

	"github.com/carapace-dev/carapace/core/egress"
	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/core/plugin"
)

// Process is a running handler process. It implements plugin.Handler,
// plugin.EventHandler, plugin.Verifier and plugin.BriefProvider; whether the
// handler implements the optional ones is its own affair (it answers
// "not implemented" otherwise). All methods are safe for concurrent use.
type Process struct {
	spec     Spec
	log      *slog.Logger
	socket   string
	sockInfo os.FileInfo
	token    string
	cmd      *exec.Cmd
	pid      int
	pipes    []*os.File
	egress   *egress.Point // its egress point, if it has one; closed with the process

	router  zmq4.Socket
	rctx    context.Context // the socket's life; cancelled at cleanup
	rcancel context.CancelFunc
	out     chan []byte   // frames for the writer
	sendMu  sync.Mutex    // serialises Send: zmq4 sockets are not safe for concurrent use
	quit    chan struct{} // closed at cleanup: writer and service replies stop

	// Written by the receive loop only.
	peer      []byte
	helloDone bool
	helloOK   chan struct{} // closed when the token's hello arrived
	helloErr  chan error    // a hello with the token but unusable

	svcLimit  *rate.Limiter // service calls per second
	svcSlots  chan struct{} // service calls in flight
	strangers *rate.Limiter // log lines about ignored messages
	rejects   *rate.Limiter // log lines about transport rejects
	loops     sync.WaitGroup
	services  sync.WaitGroup
	output    sync.WaitGroup

	replies atomic.Uint64 // replies received, late ones too (Replies)

	mu        sync.Mutex
	nextID    uint64
	calls     map[uint64]*pending
	svc       plugin.Services
	closed    bool   // no new calls: stopping or gone
	started   bool   // Start returned the process: OnExit applies
	requested bool   // the core asked for the stop: no OnExit
	killed    bool   // Kill was called
	reaped    bool   // Wait returned: the pid may be reused, never signal it
	cutReason string // why the process was cut off, if it was

	exited  chan struct{} // closed once Wait returned and the fields below are set
	waitErr error         // what Wait returned
	crash   error         // wraps ErrCrashed: what in-flight calls get
	done    chan struct{} // closed after cleanup (and OnExit)
}

// pending is a core call waiting for its reply.
type pending struct {
	ctx context.Context
	ch  chan *pluginproto.Message // buffered 1: the receive loop never blocks
}

// Interface guards.
var (
	_ plugin.Handler       = (*Process)(nil)
	_ plugin.EventHandler  = (*Process)(nil)
	_ plugin.Verifier      = (*Process)(nil)
	_ plugin.BriefProvider = (*Process)(nil)
)

// PID returns the process id (also its process group id).
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Alive reports whether the process runs and accepts calls.
func (p *Process) Alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && !p.reaped
}

// Done is closed once the process has exited and its socket, pipes and
// goroutines are cleaned up.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr reports how the process ended: nil while it runs or after a
// clean exit the core asked for; an error wrapping ErrCrashed if it died on
// its own or was cut off; otherwise what its exit status was (e.g. killed).
func (p *Process) ExitErr() error {
	select {
	case <-p.exited:
	default:
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started && !p.requested {
		return p.crash
	}
	return p.waitErr
}

// Init sends init with the config, and answers the handler's service calls
// with services from now on.
func (p *Process) Init(ctx context.Context, config map[string]any, services plugin.Services) error {
	p.mu.Lock()
	p.svc = services
	p.mu.Unlock()
	r, err := p.call(ctx, pluginproto.MethodInit, pluginproto.InitParams{Config: config}, false)
	if err != nil {
		return err
	}
	if r.Error != nil {
		cat := r.Error.Category
		switch cat {
		case plugin.CategoryNetwork, plugin.CategoryAuth, plugin.CategoryConfig, plugin.CategoryInternal:
		default:
			cat = plugin.CategoryInternal
		}
		return plugin.NewInitError(cat, fmt.Errorf("plugin %s: init: %s", p.spec.Name, r.Error.Message))
	}
	return nil
}

// Invoke runs one tool call in the handler. A result that is not a JSON
// object or null is a *ResultError.
func (p *Process) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	r, err := p.call(ctx, pluginproto.MethodInvoke, req, false)
	if err != nil {
		return nil, err
	}
	if r.Error != nil {
		return nil, p.replyError(pluginproto.MethodInvoke, r.Error)
	}
	switch t := pluginproto.JSONType(r.Result); t {
	case "null":
		return nil, nil
	case "object":
		var out map[string]any
		if err := pluginproto.DecodeValue(r.Result, &out); err != nil {
			return nil, fmt.Errorf("plugin %s: invoke: result: %w", p.spec.Name, err)
		}
		return out, nil
	default:
		return nil, &ResultError{JSONType: t}
	}
}

// HandleEvent delivers an event.
func (p *Process) HandleEvent(ctx context.Context, ev *plugin.Event) error {
	r, err := p.call(ctx, pluginproto.MethodEvent, ev, false)
	if err != nil {
		return err
	}
	if r.Error != nil {
		return p.replyError(pluginproto.MethodEvent, r.Error)
	}
	return nil
}

// Verify asks the handler to check its setup.
func (p *Process) Verify(ctx context.Context) (*plugin.VerifyResult, error) {
	var out *plugin.VerifyResult
	err := p.callResult(ctx, pluginproto.MethodVerify, struct{}{}, &out)
	return out, err
}

// MemoryBrief asks the handler for the memory brief of group.
func (p *Process) MemoryBrief(ctx context.Context, group string) (*plugin.Brief, error) {
	var out *plugin.Brief
	err := p.callResult(ctx, pluginproto.MethodBrief, pluginproto.BriefParams{Group: group}, &out)
	return out, err
}

// Preview asks the handler for the preview of a call of a tool that
// declares one (plugin.Previewer). A handler that does not implement it
// answers an error; so does one that returns null.
func (p *Process) Preview(ctx context.Context, req *plugin.Request) (*plugin.Preview, error) {
	var out *plugin.Preview
	if err := p.callResult(ctx, pluginproto.MethodPreview, req, &out); err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("plugin %s: preview: the handler returned no preview", p.spec.Name)
	}
	return out, nil
}

func (p *Process) callResult(ctx context.Context, method string, params, out any) error {
	r, err := p.call(ctx, method, params, false)
	if err != nil {
		return err
	}
	if r.Error != nil {
		return p.replyError(method, r.Error)
	}
	if err := pluginproto.DecodeValue(r.Result, out); err != nil {
		return fmt.Errorf("plugin %s: %s: result: %w", p.spec.Name, method, err)
	}
	return nil
}

// replyError turns a reply's error into what an in-process handler would
// have returned.
func (p *Process) replyError(method string, e *pluginproto.Error) error {
	switch e.Kind {
	case pluginproto.KindTool:
		code := e.Code
		if code == "" {
			code = "HANDLER_ERROR"
		}
		return &plugin.ToolError{Code: code, Message: e.Message, Retriable: e.Retriable, Field: e.Field, RetryAfter: e.RetryAfter}
	case pluginproto.KindNoRequest:
		return fmt.Errorf("plugin %s: %s: %w", p.spec.Name, method, plugin.ErrNoRequest)
	case pluginproto.KindNoCredential:
		return fmt.Errorf("plugin %s: %s: %w", p.spec.Name, method, plugin.ErrNoCredential)
	case pluginproto.KindNotChannel:
		return fmt.Errorf("plugin %s: %s: %w", p.spec.Name, method, plugin.ErrNotChannel)
	case pluginproto.KindNotImplemented:
		return fmt.Errorf("plugin %s: %s: %w", p.spec.Name, method, plugin.ErrNotImplemented)
	default: // internal, or a kind this core does not know
		return fmt.Errorf("plugin %s: %s: %s", p.spec.Name, method, e.Message)
	}
}

// call sends a call and waits for its reply, ctx, or the process's death.
// stopping lets Shutdown's own call through once new calls are refused.
func (p *Process) call(ctx context.Context, method string, params any, stopping bool) (*pluginproto.Message, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %s: encode params: %w", p.spec.Name, method, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.reaped || (p.closed && !stopping) {
		p.mu.Unlock()
		return nil, p.unavailable()
	}
	p.nextID++
	id := p.nextID
	c := &pending{ctx: ctx, ch: make(chan *pluginproto.Message, 1)}
	p.calls[id] = c
	p.mu.Unlock()

	frame, err := pluginproto.Encode(&pluginproto.Message{Type: pluginproto.TypeCall, ID: id, Method: method, Params: raw})
	if err != nil {
		p.forget(id)
		return nil, fmt.Errorf("plugin %s: %s: %w", p.spec.Name, method, err)
	}
	// Sent on the caller's goroutine, not through the writer: a hop fewer
	// on every call (see docs/PERFORMANCE.md (f)).
	if err := p.sendNow(frame); err != nil {
		p.forget(id)
		select {
		case <-p.exited:
			return nil, p.unavailable()
		default:
		}
		return nil, fmt.Errorf("plugin %s: %s: send: %w", p.spec.Name, method, err)
	}
	select {
	case r := <-c.ch:
		return r, nil
	case <-ctx.Done():
		if p.forget(id) {
			p.cancel(id)
		}
		return nil, ctx.Err()
	case <-p.exited:
		select {
		case r := <-c.ch: // answered just before the exit
			return r, nil
		default:
		}
		p.forget(id)
		return nil, p.crash
	}
}

// forget removes a call from the table; false if the reply took it first.
func (p *Process) forget(id uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.calls[id]
	delete(p.calls, id)
	return ok
}

// cancel asks the handler to abandon call id. It never blocks: if the
// writer's queue is full the handler is not reading, and the cancel is
// dropped.
func (p *Process) cancel(id uint64) {
	frame, err := pluginproto.Encode(&pluginproto.Message{Type: pluginproto.TypeCancel, ID: id})
	if err != nil {
		return
	}
	select {
	case p.out <- frame:
	default:
		p.log.Warn("plugin cancel dropped: send queue full", "id", id)
	}
}

// Replies returns how many replies the handler has sent since it started,
// to any call, including late ones to calls whose ctx had already ended
// (which are dropped). A caller that sees it unchanged across several
// timed-out calls knows the handler answered nothing in between.
func (p *Process) Replies() uint64 { return p.replies.Load() }

// deliver hands a reply to its caller. Runs on the receive loop.
func (p *Process) deliver(m *pluginproto.Message) {
	p.replies.Add(1)
	p.mu.Lock()
	c, ok := p.calls[m.ID]
	if ok {
		// Under the lock: once a call has left the table, its reply is
		// in its channel (which has room for it), and wait's settle can
		// rely on an empty table.
		delete(p.calls, m.ID)
		c.ch <- m
	}
	issued := m.ID != 0 && m.ID <= p.nextID
	p.mu.Unlock()
	if !ok && !issued {
		p.cutOff("replied to a call never made")
	} // else: a late reply to a call abandoned by its ctx: dropped
}

func (p *Process) unavailable() error {
	return fmt.Errorf("plugin %s: %w", p.spec.Name, ErrUnavailable)
}

// cutOff kills a handler that broke the protocol. It never blocks (it runs
// on transport goroutines too); the exit is handled by wait.
func (p *Process) cutOff(reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return
	}
	if p.cutReason == "" {
		p.cutReason = reason
	}
	p.closed = true
	p.killLocked()
}

// killLocked sends SIGKILL to the process group, unless the process was
// reaped (its id may belong to someone else by now). Called with p.mu held.
func (p *Process) killLocked() {
	if p.reaped || p.cmd == nil || p.pid <= 1 { // never kill(0) or kill(-1)
		return
	}
	if err := syscall.Kill(-p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.log.Warn("kill plugin process group failed", "pgid", p.pid, "err", err)
	}
	// The leader too, by its handle, in case it left the group (setsid).
	_ = p.cmd.Process.Kill()
}

// Kill sends SIGKILL to the process group now. In-flight calls fail with
// ErrCrashed (they may have had effects), later ones with ErrUnavailable,
// and OnExit is not called. It does not wait: Done is closed once the
// process is gone and cleaned up. Idempotent.
func (p *Process) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		p.requested, p.killed = true, true
	}
	p.closed = true
	p.killLocked()
}

// Shutdown asks the handler to shut down and waits, until ctx is done, for
// its reply and its exit; then it kills the process group. It returns
// within ctx plus a short grace, with the handler's Shutdown error, an
// error if the process had to be killed or exited badly, or one wrapping
// ErrUnavailable if the process was already gone or stopping.
func (p *Process) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if p.closed || p.reaped {
		p.mu.Unlock()
		return p.unavailable()
	}
	p.closed, p.requested = true, true
	p.mu.Unlock()

	var serr error
	r, err := p.call(ctx, pluginproto.MethodShutdown, struct{}{}, true)
	switch {
	case err == nil && r.Error != nil:
		serr = p.replyError(pluginproto.MethodShutdown, r.Error)
	case errors.Is(err, ErrCrashed): // exited before its reply was read: the exit status tells
	case err != nil:
		serr = err
	}
	killed := false
	select {
	case <-p.exited:
	case <-ctx.Done():
		p.Kill()
		killed = true
	}
	grace := time.NewTimer(exitGrace)
	defer grace.Stop()
	select {
	case <-p.done:
	case <-grace.C:
		return fmt.Errorf("plugin %s: process %d still not gone %v after SIGKILL", p.spec.Name, p.pid, exitGrace)
	}
	switch {
	case killed:
		return fmt.Errorf("plugin %s: did not exit after shutdown, killed: %w", p.spec.Name, ctx.Err())
	case serr != nil:
		return serr
	case p.waitErr != nil:
		return fmt.Errorf("plugin %s: %s after shutdown", p.spec.Name, describeExit(p.waitErr))
	}
	return nil
}

// wait reaps the process, fails its in-flight calls, cleans up, and calls
// OnExit if the core did not ask for the exit.
func (p *Process) wait() {
	err := p.cmd.Wait()
	p.mu.Lock()
	p.closed = true // new calls: ErrUnavailable from now on
	p.mu.Unlock()
	p.settle()
	p.mu.Lock()
	p.killLocked() // whatever is left of the group: children die with it
	p.reaped, p.closed = true, true
	p.waitErr = err
	detail := describeExit(err)
	if p.cutReason != "" {
		detail = "cut off (" + p.cutReason + "), " + detail
	}
	p.crash = fmt.Errorf("plugin %s: %w: %s", p.spec.Name, ErrCrashed, detail)
	requested := p.requested || !p.started
	cut := p.cutReason
	p.mu.Unlock()
	close(p.exited)

	p.closeTransport()
	p.closeOutput()
	p.closeEgress()
	switch {
	case cut != "":
		p.log.Error("plugin cut off for breaking the protocol", "reason", cut, "exit", describeExit(err))
	case !requested:
		p.log.Error("plugin process died", "exit", detail)
	default:
		p.log.Info("plugin process exited", "exit", detail)
	}
	if !requested && p.spec.OnExit != nil {
		p.spec.OnExit(p.crash)
	}
	close(p.done)
}

// settle gives replies the process sent just before it exited a moment to
// arrive: they are in the socket's buffer, but zmq4's reader and the
// receive loop may not have handed them over yet (a handler exits right
// after its shutdown reply). Not after a kill: nothing worth waiting for.
func (p *Process) settle() {
	deadline := time.Now().Add(replyGrace)
	for {
		p.mu.Lock()
		n, killed := len(p.calls), p.killed || p.cutReason != ""
		p.mu.Unlock()
		if n == 0 || killed || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// closeEgress closes the process's egress point, if it has one: its
// relayed connections end with the process.
func (p *Process) closeEgress() {
	if p.egress != nil {
		if err := p.egress.Close(); err != nil {
			p.log.Warn("plugin egress point: close", "err", err)
		}
	}
}

// describeExit says how a process ended, for errors and logs.
func describeExit(err error) string {
	if err == nil {
		return "exited with status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
			switch {
			case ws.Signaled():
				return "killed by signal " + ws.Signal().String()
			case ws.Exited():
				return fmt.Sprintf("exited with status %d", ws.ExitStatus())
			}
		}
		return ee.String()
	}
	return "wait failed: " + err.Error()
}
