package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/ipc/zmtp"
)

// Serve runs h as an out-of-process plugin handler: the main of an external
// plugin's handler executable is
//
//	func main() {
//		if err := plugin.Serve(&myHandler{}); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//	}
//
// The core starts the executable with the plugin's socket and a one-time
// token in its environment; Serve connects, says hello, and runs each call
// of the core in a goroutine of its own, so calls run concurrently as they
// do in process. The Services given to Init call the core; pass them the
// ctx that Invoke (or HandleEvent, Verify, MemoryBrief) received, so that
// the core scopes them to that call, or a ctx of no call (such as
// context.Background()) for ReadCredential, GetToolCatalog and
// PublishEvent. Arguments, config and event payloads carry numbers as
// json.Number, as in process.
//
// Serve returns nil after the core's shutdown call (once h.Shutdown has
// returned and the core has its answer), and an error if the environment
// is not that of a handler started by the core, or if the core goes away.
// It writes nothing to stdout or stderr: log what Serve returns and exit.
func Serve(h Handler) error {
	env := map[string]string{}
	var missing []string
	for _, k := range []string{pluginproto.EnvEndpoint, pluginproto.EnvToken, pluginproto.EnvName, pluginproto.EnvData} {
		if env[k] = os.Getenv(k); env[k] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (%s not set)", errNotStarted, strings.Join(missing, ", "))
	}
	endpoint := env[pluginproto.EnvEndpoint]
	if fd := os.Getenv(pluginproto.EnvConnFD); fd != "" {
		ep, err := inherit(fd, endpoint)
		if err != nil {
			return err
		}
		endpoint = ep
	}
	return serve(h, endpoint, env[pluginproto.EnvToken], parentWatch{getppid: os.Getppid, every: parentEvery})
}

// inherited holds the connection the core made for this handler until the
// transport takes it: once, since a lost connection is the end of the
// handler (there is nothing to dial again).
var inherited struct {
	sync.Mutex
	conn net.Conn
}

// inheritedName is the scheme of inheritedScheme.
const inheritedName = "zipc-inherited"

// inheritedScheme is the transport of a handler's inherited connection:
// the hardened Unix transport, except that its one "dial" takes the
// connection the core made.
var inheritedScheme = zmtp.Lazy(inheritedName, zmtp.New(zmtp.Options{
	DialConn: func(context.Context, string) (net.Conn, error) {
		inherited.Lock()
		defer inherited.Unlock()
		c := inherited.conn
		inherited.conn = nil
		if c == nil {
			return nil, errors.New("plugin: the connection to the core is gone and cannot be made again")
		}
		return c, nil
	},
}))

// inherit takes the connection the core made for this handler on
// descriptor fd, and returns the endpoint that speaks on it.
func inherit(fd, endpoint string) (string, error) {
	n, err := strconv.Atoi(fd)
	if err != nil || n < 3 {
		return "", fmt.Errorf("plugin: %s=%q is not a descriptor the core passes", pluginproto.EnvConnFD, fd)
	}
	ep, err := zmtp.Endpoint(endpoint)
	if err != nil {
		return "", fmt.Errorf("plugin: %s: %w", pluginproto.EnvEndpoint, err)
	}
	f := os.NewFile(uintptr(n), "carapace-core")
	c, err := net.FileConn(f)
	f.Close() // FileConn holds a duplicate
	if err != nil {
		return "", fmt.Errorf("plugin: the connection to the core on descriptor %d: %w", n, err)
	}
	inherited.Lock()
	inherited.conn = c
	inherited.Unlock()
	return inheritedScheme() + "://" + strings.TrimPrefix(ep, zmtp.Scheme+"://"), nil
}

var errNotStarted = errors.New("this program is a Carapace plugin handler: the Carapace core starts it " +
	"and talks to it over a private socket, so it does not run on its own. Install the plugin with " +
	"`carapace plugin install`, then run `carapace serve`. To test the handler, use the package " +
	"github.com/carapace-dev/carapace/core/plugin/plugintest")

// parentWatch is how serve notices that the core went away without closing
// the connection (on macOS there is no Pdeathsig): it asks for the parent
// process every so often, and a different parent means the core exited.
type parentWatch struct {
	getppid func() int
	every   time.Duration
}

// Bounds of what the SDK sends, and how often it looks for its parent.
const (
	parentEvery     = 500 * time.Millisecond
	shutdownTimeout = 10 * time.Second
	sendTimeout     = 10 * time.Second
	maxErrText      = 16 << 10 // bytes of an error message sent to the core
	maxErrField     = 256      // bytes of an error's code or field
)

// errTooLarge is the ToolError for a result over pluginproto.MaxResult, as
// the core's in-process path words it.
var errTooLarge = &ToolError{Code: "HANDLER_ERROR", Message: fmt.Sprintf("Response exceeded maximum size (%d bytes)", pluginproto.MaxResult)}

// client is one connection to the core.
type client struct {
	h      Handler
	sock   zmq4.Socket
	sendMu sync.Mutex // zmq4 sockets are not safe for concurrent Send

	mu       sync.Mutex
	nextID   uint64
	pending  map[uint64]chan *pluginproto.Message // our service calls
	inflight map[uint64]context.CancelFunc        // the core's calls
	closed   bool

	done     chan struct{} // closed when Serve returns
	shutdown chan struct{} // closed once the shutdown reply is sent
	stopOnce sync.Once
}

func serve(h Handler, endpoint, token string, parent parentWatch) error {
	ep := endpoint
	if !strings.HasPrefix(ep, inheritedName+"://") {
		var err error
		if ep, err = zmtp.Endpoint(endpoint); err != nil {
			return fmt.Errorf("plugin: %s: %w", pluginproto.EnvEndpoint, err)
		}
	}
	ppid := parent.getppid()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sock := zmq4.NewDealer(ctx, zmq4.WithLogger(log.New(io.Discard, "", 0)), zmq4.WithTimeout(sendTimeout),
		zmq4.WithDialerMaxRetries(2), zmq4.WithDialerRetry(100*time.Millisecond))
	defer sock.Close()
	if err := sock.Dial(ep); err != nil {
		return fmt.Errorf("plugin: connect to the core: %w", err)
	}
	c := &client{
		h:        h,
		sock:     sock,
		pending:  map[uint64]chan *pluginproto.Message{},
		inflight: map[uint64]context.CancelFunc{},
		done:     make(chan struct{}),
		shutdown: make(chan struct{}),
	}
	defer c.close()
	hello, err := pluginproto.Encode(&pluginproto.Message{Type: pluginproto.TypeHello, Token: token, Version: pluginproto.Version, PID: os.Getpid()})
	if err != nil {
		return err
	}
	if err := c.send(hello); err != nil {
		return fmt.Errorf("plugin: hello: %w", err)
	}

	// Messages are handled on the receiving goroutine itself (handle never
	// blocks: calls get their own goroutines), a hop fewer per call.
	lost := make(chan error, 1)
	go func() {
		for {
			m, err := sock.Recv()
			if err != nil {
				lost <- err
				return
			}
			select {
			case <-c.done:
				return
			default:
			}
			c.handle(m)
		}
	}()
	tick := time.NewTicker(parent.every)
	defer tick.Stop()
	for {
		select {
		case <-c.shutdown:
			return nil
		case err := <-lost:
			return fmt.Errorf("plugin: connection to the core lost: %w", err)
		case <-tick.C:
			if parent.getppid() != ppid {
				return errors.New("plugin: the core that started this handler has exited")
			}
		}
	}
}

// close fails pending service calls and cancels the core's calls.
func (c *client) close() {
	c.mu.Lock()
	c.closed = true
	for _, cancel := range c.inflight {
		cancel()
	}
	c.mu.Unlock()
	close(c.done)
}

func (c *client) send(frame []byte) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.sock.Send(zmq4.NewMsg(frame))
}

// handle dispatches one message of the core. The core is trusted; what is
// not understood is ignored.
func (c *client) handle(zm zmq4.Msg) {
	if zm.Type == zmq4.CmdMsg || len(zm.Frames) != 1 {
		return
	}
	m, err := pluginproto.Decode(zm.Frames[0])
	if err != nil {
		return
	}
	switch m.Type {
	case pluginproto.TypeReply:
		c.mu.Lock()
		ch, ok := c.pending[m.ID]
		delete(c.pending, m.ID)
		c.mu.Unlock()
		if ok {
			ch <- m
		}
	case pluginproto.TypeCancel:
		c.mu.Lock()
		cancel, ok := c.inflight[m.ID]
		c.mu.Unlock()
		if ok {
			cancel()
		}
	case pluginproto.TypeCall:
		c.dispatch(m)
	}
}

// scopeKey is the context key of the core call a ctx belongs to.
type scopeKey struct{}

// dispatch runs a core call in its own goroutine and replies.
func (c *client) dispatch(m *pluginproto.Message) {
	base := context.Background()
	switch m.Method {
	case pluginproto.MethodInit, pluginproto.MethodInvoke, pluginproto.MethodEvent, pluginproto.MethodVerify, pluginproto.MethodBrief, pluginproto.MethodPreview:
		base = context.WithValue(base, scopeKey{}, m.ID)
	}
	ctx, cancel := context.WithCancel(base)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		return
	}
	c.inflight[m.ID] = cancel
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			delete(c.inflight, m.ID)
			c.mu.Unlock()
			cancel()
		}()
		result, err := c.run(ctx, m)
		frame := replyFrame(m.ID, m.Method, result, err)
		_ = c.send(frame) // if the core is gone, Serve is returning anyway
		if m.Method == pluginproto.MethodShutdown {
			c.stopOnce.Do(func() { close(c.shutdown) })
		}
	}()
}

// panicError is a recovered handler panic.
type panicError struct{ v any }

func (e *panicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.v) }

// run calls the handler for one core call.
func (c *client) run(ctx context.Context, m *pluginproto.Message) (result any, err error) {
	defer func() {
		if v := recover(); v != nil {
			result, err = nil, &panicError{v}
		}
	}()
	empty := struct{}{}
	switch m.Method {
	case pluginproto.MethodInit:
		var p pluginproto.InitParams
		if err := pluginproto.DecodeValue(m.Params, &p); err != nil {
			return nil, err
		}
		return empty, c.h.Init(ctx, p.Config, remoteServices{c})
	case pluginproto.MethodInvoke:
		var req Request
		if err := pluginproto.DecodeValue(m.Params, &req); err != nil {
			return nil, err
		}
		out, err := c.h.Invoke(ctx, &req)
		if err != nil {
			return nil, err
		}
		return out, nil
	case pluginproto.MethodEvent:
		eh, ok := c.h.(EventHandler)
		if !ok {
			return nil, ErrNotImplemented
		}
		var ev Event
		if err := pluginproto.DecodeValue(m.Params, &ev); err != nil {
			return nil, err
		}
		return empty, eh.HandleEvent(ctx, &ev)
	case pluginproto.MethodVerify:
		v, ok := c.h.(Verifier)
		if !ok {
			return nil, ErrNotImplemented
		}
		out, err := v.Verify(ctx)
		if err != nil {
			return nil, err
		}
		return out, nil
	case pluginproto.MethodBrief:
		bp, ok := c.h.(BriefProvider)
		if !ok {
			return nil, ErrNotImplemented
		}
		var p pluginproto.BriefParams
		if err := pluginproto.DecodeValue(m.Params, &p); err != nil {
			return nil, err
		}
		out, err := bp.MemoryBrief(ctx, p.Group)
		if err != nil {
			return nil, err
		}
		return out, nil
	case pluginproto.MethodPreview:
		pv, ok := c.h.(Previewer)
		if !ok {
			return nil, ErrNotImplemented
		}
		var req Request
		if err := pluginproto.DecodeValue(m.Params, &req); err != nil {
			return nil, err
		}
		out, err := pv.Preview(ctx, &req)
		if err != nil {
			return nil, err
		}
		return out, nil
	case pluginproto.MethodShutdown:
		sctx, cancel := context.WithTimeout(ctx, shutdownTimeout)
		defer cancel()
		return empty, c.h.Shutdown(sctx)
	}
	return nil, fmt.Errorf("unknown method %q", m.Method)
}

// replyFrame encodes the reply to call id.
func replyFrame(id uint64, method string, result any, err error) []byte {
	m := &pluginproto.Message{Type: pluginproto.TypeReply, ID: id}
	if err == nil {
		raw, merr := json.Marshal(result)
		switch {
		case merr != nil:
			err = fmt.Errorf("result is not encodable as JSON: %w", merr)
		case len(raw) > pluginproto.MaxResult:
			err = errTooLarge
		default:
			m.Result = raw
		}
	}
	if err != nil {
		m.Error = wireError(method, err)
	}
	frame, eerr := pluginproto.Encode(m)
	if eerr != nil { // cannot happen with the caps above; answer anyway
		m.Error = &pluginproto.Error{Kind: pluginproto.KindInternal, Message: "reply too large"}
		m.Result = nil
		frame, _ = pluginproto.Encode(m)
	}
	return frame
}

// wireError maps a handler's error to the protocol's.
func wireError(method string, err error) *pluginproto.Error {
	var pe *panicError
	if errors.As(err, &pe) {
		return &pluginproto.Error{Kind: pluginproto.KindInternal, Message: capText(pe.Error(), maxErrText)}
	}
	if method == pluginproto.MethodInit {
		msg := err
		if ie, ok := errors.AsType[*InitError](err); ok && ie.Err != nil {
			msg = ie.Err // the category travels in its own field
		}
		return &pluginproto.Error{Kind: pluginproto.KindInternal, Category: CategoryOf(err), Message: capText(errText(msg), maxErrText)}
	}
	if errors.Is(err, ErrNotImplemented) {
		return &pluginproto.Error{Kind: pluginproto.KindNotImplemented, Message: err.Error()}
	}
	if te, ok := AsToolError(err); ok {
		if te == nil {
			return &pluginproto.Error{Kind: pluginproto.KindInternal, Message: "handler returned a nil *ToolError"}
		}
		code := te.Code
		if code == "" {
			code = "HANDLER_ERROR"
		}
		return &pluginproto.Error{Kind: pluginproto.KindTool, Code: capText(code, maxErrField), Message: capText(te.Message, maxErrText),
			Retriable: te.Retriable, Field: capText(te.Field, maxErrField), RetryAfter: te.RetryAfter}
	}
	return &pluginproto.Error{Kind: pluginproto.KindInternal, Message: capText(errText(err), maxErrText)}
}

// errText is err.Error(), or a note if that panics (a typed nil error):
// a handler's bug must not take the process down.
func errText(err error) (s string) {
	defer func() {
		if recover() != nil {
			s = fmt.Sprintf("handler returned a broken error (%T)", err)
		}
	}()
	return err.Error()
}

// capText cuts s to at most n bytes on a rune boundary.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// callCore makes a service call, scoped to the core call ctx belongs to.
func (c *client) callCore(ctx context.Context, method string, params, out any) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("carapace core: %s: encode params: %w", method, err)
	}
	scope, _ := ctx.Value(scopeKey{}).(uint64)
	ch := make(chan *pluginproto.Message, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("carapace core: %s: %w", method, errClosed)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	frame, err := pluginproto.Encode(&pluginproto.Message{Type: pluginproto.TypeCall, ID: id, Method: method, Scope: scope, Params: raw})
	if err != nil {
		forget()
		return fmt.Errorf("carapace core: %s: %w", method, err)
	}
	if err := c.send(frame); err != nil {
		forget()
		return fmt.Errorf("carapace core: %s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return coreError(method, r.Error)
		}
		if out == nil {
			return nil
		}
		if err := pluginproto.DecodeValue(r.Result, out); err != nil {
			return fmt.Errorf("carapace core: %s: %w", method, err)
		}
		return nil
	case <-ctx.Done():
		forget()
		return ctx.Err()
	case <-c.done:
		forget()
		return fmt.Errorf("carapace core: %s: %w", method, errClosed)
	}
}

var errClosed = errors.New("connection to the core closed")

// coreError maps a failed service call to the Services errors.
func coreError(method string, e *pluginproto.Error) error {
	switch e.Kind {
	case pluginproto.KindNoRequest:
		return ErrNoRequest
	case pluginproto.KindNoCredential:
		return ErrNoCredential
	case pluginproto.KindNotChannel:
		return ErrNotChannel
	case pluginproto.KindCoreTopic:
		return ErrCoreTopic
	case pluginproto.KindNotSurface:
		return ErrNotSurface
	case pluginproto.KindDecided:
		return fmt.Errorf("%w: %s", ErrAlreadyDecided, e.Message)
	case pluginproto.KindGroupNotGranted:
		return fmt.Errorf("%w: %s", ErrGroupNotGranted, e.Message)
	}
	return fmt.Errorf("carapace core: %s: %s", method, e.Message)
}

// remoteServices are the core's Services, over the connection.
type remoteServices struct{ c *client }

var _ Services = remoteServices{}

// GetAuditLog implements Services.
func (s remoteServices) GetAuditLog(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	var out []AuditEntry
	err := s.c.callCore(ctx, pluginproto.MethodAuditLog, f, &out)
	return out, err
}

// GetToolCatalog implements Services.
func (s remoteServices) GetToolCatalog(ctx context.Context) ([]ToolInfo, error) {
	var out []ToolInfo
	err := s.c.callCore(ctx, pluginproto.MethodToolCatalog, struct{}{}, &out)
	return out, err
}

// GetSessionInfo implements Services.
func (s remoteServices) GetSessionInfo(ctx context.Context) (SessionInfo, error) {
	var out SessionInfo
	err := s.c.callCore(ctx, pluginproto.MethodSessionInfo, struct{}{}, &out)
	return out, err
}

// ReadCredential implements Services.
func (s remoteServices) ReadCredential(ctx context.Context, key string) (string, error) {
	var out pluginproto.CredentialResult
	err := s.c.callCore(ctx, pluginproto.MethodReadCredential, pluginproto.CredentialParams{Key: key}, &out)
	return out.Value, err
}

// PublishEvent implements Services.
func (s remoteServices) PublishEvent(ctx context.Context, ev *Event) error {
	return s.c.callCore(ctx, pluginproto.MethodPublishEvent, ev, nil)
}

// AuditDropped implements Services.
func (s remoteServices) AuditDropped(ctx context.Context, what string) error {
	return s.c.callCore(ctx, pluginproto.MethodAuditDropped, pluginproto.DroppedParams{What: what}, nil)
}

// ReportHealth implements Services.
func (s remoteServices) ReportHealth(ctx context.Context, degraded bool, why string) error {
	return s.c.callCore(ctx, pluginproto.MethodReportHealth, pluginproto.HealthParams{Degraded: degraded, Why: why}, nil)
}

// Paused implements Services.
func (s remoteServices) Paused(ctx context.Context) (bool, error) {
	var out pluginproto.PausedParams
	err := s.c.callCore(ctx, pluginproto.MethodPaused, struct{}{}, &out)
	return out.Paused, err
}

// Decide implements Services.
func (s remoteServices) Decide(ctx context.Context, d Decision) error {
	return s.c.callCore(ctx, pluginproto.MethodDecide, d, nil)
}

// CoreStatus implements Services.
func (s remoteServices) CoreStatus(ctx context.Context) (CoreStatus, error) {
	var out CoreStatus
	err := s.c.callCore(ctx, pluginproto.MethodCoreStatus, struct{}{}, &out)
	return out, err
}

// SetPaused implements Services.
func (s remoteServices) SetPaused(ctx context.Context, paused bool) error {
	return s.c.callCore(ctx, pluginproto.MethodSetPaused, pluginproto.PausedParams{Paused: paused}, nil)
}

// StopSession implements Services.
func (s remoteServices) StopSession(ctx context.Context, session string) error {
	return s.c.callCore(ctx, pluginproto.MethodStopSession, pluginproto.SessionParams{Session: session}, nil)
}
