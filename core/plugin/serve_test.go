package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
)

// hang bounds every wait here: a guard against hangs, never an assertion.
const hang = 20 * time.Second

const testToken = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// fakeCore is the core's side of one connection, in the test process: a
// ROUTER on the zipc transport, with Serve running against it.
type fakeCore struct {
	t        *testing.T
	r        zmq4.Socket
	peer     []byte
	msgs     chan *pluginproto.Message
	served   chan error // what serve returned
	nextID   uint64
	endpoint string
}

func newFakeCore(t *testing.T) *fakeCore {
	t.Helper()
	dir, err := os.MkdirTemp("", "sv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := &fakeCore{t: t, msgs: make(chan *pluginproto.Message, 64), served: make(chan error, 1)}
	c.endpoint = "zipc://" + filepath.Join(dir, "p.sock")
	c.r = zmq4.NewRouter(context.Background(), zmq4.WithLogger(log.New(io.Discard, "", 0)))
	if err := c.r.Listen(c.endpoint); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := c.r.Recv()
			if err != nil {
				close(c.msgs)
				return
			}
			if m.Type == zmq4.CmdMsg || len(m.Frames) != 2 {
				continue
			}
			msg, err := pluginproto.Decode(m.Frames[1])
			if err != nil {
				t.Errorf("plugin sent a bad frame %q: %v", m.Frames[1], err)
				continue
			}
			if msg.Type == pluginproto.TypeHello {
				c.peer = m.Frames[0] // read by the test only after it received the hello
			}
			c.msgs <- msg
		}
	}()
	t.Cleanup(func() { c.r.Close() })
	return c
}

// realParent is the parent watch of Serve.
var realParent = parentWatch{getppid: os.Getppid, every: parentEvery}

// serve runs serve(h) against the core and checks its hello.
func (c *fakeCore) serve(h Handler) {
	c.t.Helper()
	go func() { c.served <- serve(h, c.endpoint, testToken, realParent) }()
	hello := c.recv()
	if hello.Type != pluginproto.TypeHello || hello.Token != testToken || hello.Version != pluginproto.Version || hello.PID != os.Getpid() {
		c.t.Fatalf("hello = %+v", hello)
	}
	c.t.Cleanup(func() {
		c.r.Close()
		select {
		case <-c.served:
		case <-time.After(hang):
			c.t.Error("serve did not return after the core closed")
		}
	})
}

func (c *fakeCore) recv() *pluginproto.Message {
	c.t.Helper()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			c.t.Fatal("core socket closed")
		}
		return m
	case <-time.After(hang):
		c.t.Fatal("no message from the plugin")
	}
	return nil
}

func (c *fakeCore) send(m *pluginproto.Message) {
	c.t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.r.Send(zmq4.NewMsgFrom(c.peer, b)); err != nil {
		c.t.Fatal(err)
	}
}

// call sends a call and returns its id.
func (c *fakeCore) call(method string, params any) uint64 {
	c.t.Helper()
	raw, err := json.Marshal(params)
	if err != nil {
		c.t.Fatal(err)
	}
	c.nextID++
	c.send(&pluginproto.Message{Type: pluginproto.TypeCall, ID: c.nextID, Method: method, Params: raw})
	return c.nextID
}

// roundTrip makes a call and waits for its reply, answering nothing else.
func (c *fakeCore) roundTrip(method string, params any) *pluginproto.Message {
	c.t.Helper()
	id := c.call(method, params)
	m := c.recv()
	if m.Type != pluginproto.TypeReply || m.ID != id {
		c.t.Fatalf("got %+v, want the reply to %d", m, id)
	}
	return m
}

// testHandler does what its tool name says.
type testHandler struct {
	mu      sync.Mutex
	config  map[string]any
	svc     Services
	started chan string // tools as they start
	stopped atomic.Bool
}

func newTestHandler() *testHandler { return &testHandler{started: make(chan string, 16)} }

func (h *testHandler) Init(ctx context.Context, config map[string]any, svc Services) error {
	h.mu.Lock()
	h.config, h.svc = config, svc
	h.mu.Unlock()
	switch config["fail"] {
	case "config":
		return NewInitError(CategoryConfig, errors.New("no such mailbox"))
	case "plain":
		return errors.New("boom")
	case "credential":
		_, err := svc.ReadCredential(ctx, "token")
		return err
	}
	return nil
}

func (h *testHandler) Invoke(ctx context.Context, req *Request) (map[string]any, error) {
	select {
	case h.started <- req.Tool:
	default: // nobody is watching
	}
	switch req.Tool {
	case "echo":
		types := map[string]any{}
		for k, v := range req.Arguments {
			types[k] = fmt.Sprintf("%T", v)
		}
		return map[string]any{"args": req.Arguments, "types": types, "session": req.Session, "time": req.Time}, nil
	case "toolerror":
		return nil, fmt.Errorf("wrapped: %w", &ToolError{Code: "HANDLER_ERROR", Message: "no such city", Field: "city", RetryAfter: 3, Retriable: true})
	case "toolerror-nil":
		var te *ToolError
		return nil, te // a bug in the handler: must not crash the process
	case "toolerror-nocode":
		return nil, &ToolError{Message: "x"}
	case "plain":
		return nil, errors.New("upstream said 500")
	case "panic":
		panic("boom")
	case "big":
		return map[string]any{"s": strings.Repeat("x", pluginproto.MaxResult)}, nil
	case "longerror":
		return nil, NewToolError(strings.Repeat("é", 20000), false)
	case "unencodable":
		return map[string]any{"f": func() {}}, nil
	case "null":
		return nil, nil
	case "block":
		<-ctx.Done()
		return nil, ctx.Err()
	case "services":
		info, ierr := h.svc.GetSessionInfo(ctx)
		cred, cerr := h.svc.ReadCredential(context.Background(), "token")
		_, aerr := h.svc.GetAuditLog(ctx, AuditFilter{LastN: 3})
		_, terr := h.svc.GetToolCatalog(ctx)
		perr := h.svc.PublishEvent(ctx, &Event{Topic: "t"})
		return map[string]any{"session": info.ID, "cred": cred, "errs": fmt.Sprint(ierr, cerr, aerr == ErrNoCredential, errors.Is(terr, ErrNotChannel), errors.Is(perr, ErrNotChannel)),
			"audit_err": fmt.Sprint(aerr), "catalog_err": fmt.Sprint(terr)}, nil
	}
	return nil, NewToolError("unknown tool", false)
}

func (h *testHandler) Shutdown(ctx context.Context) error {
	h.stopped.Store(true)
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("shutdown ctx has no deadline")
	}
	return nil
}

// fullHandler adds the optional interfaces.
type fullHandler struct{ *testHandler }

func (fullHandler) HandleEvent(ctx context.Context, ev *Event) error {
	var p map[string]any
	if err := ev.Decode(&p); err != nil || p["n"] != json.Number("7") {
		return fmt.Errorf("payload %s: %v", ev.Payload, err)
	}
	return nil
}

func (fullHandler) Verify(ctx context.Context) (*VerifyResult, error) {
	return &VerifyResult{OK: true, Message: "ok"}, nil
}

func (fullHandler) MemoryBrief(ctx context.Context, group string) (*Brief, error) {
	return &Brief{Entries: []BriefEntry{{ID: "m1", Type: "fact", Content: "brief of " + group}}, EntryCount: 1, BriefCount: 1}, nil
}

func TestServeWithoutCore(t *testing.T) {
	for _, k := range []string{pluginproto.EnvEndpoint, pluginproto.EnvToken, pluginproto.EnvName, pluginproto.EnvData} {
		t.Setenv(k, "")
	}
	err := Serve(newTestHandler())
	if err == nil {
		t.Fatal("Serve without the core's environment succeeded")
	}
	for _, want := range []string{"Carapace plugin handler", "carapace plugin install", "carapace serve", "plugintest", pluginproto.EnvEndpoint} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestServeFromEnvironment(t *testing.T) {
	c := newFakeCore(t)
	t.Setenv(pluginproto.EnvEndpoint, c.endpoint)
	t.Setenv(pluginproto.EnvToken, testToken)
	t.Setenv(pluginproto.EnvName, "test")
	t.Setenv(pluginproto.EnvData, t.TempDir())
	go func() { c.served <- Serve(newTestHandler()) }()
	if m := c.recv(); m.Type != pluginproto.TypeHello || m.Token != testToken {
		t.Fatalf("hello = %+v", m)
	}
	c.roundTrip(pluginproto.MethodInit, pluginproto.InitParams{})
	if r := c.roundTrip(pluginproto.MethodShutdown, struct{}{}); r.Error != nil {
		t.Fatalf("shutdown reply %+v", r.Error)
	}
	select {
	case err := <-c.served:
		if err != nil {
			t.Fatalf("Serve after shutdown = %v", err)
		}
	case <-time.After(hang):
		t.Fatal("Serve did not return after shutdown")
	}
}

func TestServeCalls(t *testing.T) {
	c := newFakeCore(t)
	h := newTestHandler()
	c.serve(fullHandler{h})

	r := c.roundTrip(pluginproto.MethodInit, pluginproto.InitParams{Config: map[string]any{"n": 1, "s": "x"}})
	if r.Error != nil || string(r.Result) != "{}" {
		t.Fatalf("init reply %+v %s", r.Error, r.Result)
	}
	h.mu.Lock()
	if h.config["n"] != json.Number("1") {
		t.Errorf("config number is %T, want json.Number", h.config["n"])
	}
	h.mu.Unlock()

	when := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	r = c.roundTrip(pluginproto.MethodInvoke, Request{Tool: "echo", Arguments: map[string]any{"n": 2.5, "b": true}, Session: "s-9", Time: when})
	var out map[string]any
	if r.Error != nil || json.Unmarshal(r.Result, &out) != nil {
		t.Fatalf("invoke reply %+v %s", r.Error, r.Result)
	}
	if want := map[string]any{"n": "json.Number", "b": "bool"}; !reflect.DeepEqual(out["types"], want) {
		t.Errorf("argument types %v, want %v", out["types"], want)
	}
	if out["session"] != "s-9" || out["time"] != "2026-05-06T07:08:09Z" {
		t.Errorf("request fields came through as %v", out)
	}

	for _, tc := range []struct {
		method string
		params any
		want   string
	}{
		{pluginproto.MethodEvent, Event{Topic: "x", Payload: json.RawMessage(`{"n":7}`)}, `{}`},
		{pluginproto.MethodVerify, struct{}{}, `{"ok":true,"message":"ok"}`},
		{pluginproto.MethodBrief, pluginproto.BriefParams{Group: "main"}, `"content":"brief of main"`},
	} {
		r := c.roundTrip(tc.method, tc.params)
		if r.Error != nil || !strings.Contains(string(r.Result), tc.want) {
			t.Errorf("%s: reply %+v %s, want %s", tc.method, r.Error, r.Result, tc.want)
		}
	}

	r = c.roundTrip(pluginproto.MethodShutdown, struct{}{})
	if r.Error != nil || !h.stopped.Load() {
		t.Fatalf("shutdown reply %+v, handler stopped %v", r.Error, h.stopped.Load())
	}
	select {
	case err := <-c.served:
		if err != nil {
			t.Fatalf("serve after shutdown = %v", err)
		}
		c.served <- nil // for the cleanup
	case <-time.After(hang):
		t.Fatal("serve did not return after shutdown")
	}
}

func TestServeOptionalNotImplemented(t *testing.T) {
	c := newFakeCore(t)
	c.serve(newTestHandler())
	// An optional method the handler lacks is said to be so (the core
	// reads it as plugin.ErrNotImplemented: doctor --online skips a
	// plugin without a check); an unknown method is an internal error.
	for m, kind := range map[string]string{pluginproto.MethodEvent: pluginproto.KindNotImplemented, pluginproto.MethodVerify: pluginproto.KindNotImplemented,
		pluginproto.MethodBrief: pluginproto.KindNotImplemented, "teleport": pluginproto.KindInternal} {
		r := c.roundTrip(m, struct{}{})
		if r.Error == nil || r.Error.Kind != kind {
			t.Errorf("%s: reply error %+v, want %s", m, r.Error, kind)
		}
	}
}

func TestServeErrors(t *testing.T) {
	c := newFakeCore(t)
	c.serve(newTestHandler())
	c.roundTrip(pluginproto.MethodInit, pluginproto.InitParams{})
	longMsg := strings.Repeat("é", 20000)
	for _, tc := range []struct {
		tool   string
		want   *pluginproto.Error
		result string // when want is nil
	}{
		{tool: "toolerror", want: &pluginproto.Error{Kind: pluginproto.KindTool, Code: "HANDLER_ERROR", Message: "no such city", Retriable: true, Field: "city", RetryAfter: 3}},
		{tool: "toolerror-nocode", want: &pluginproto.Error{Kind: pluginproto.KindTool, Code: "HANDLER_ERROR", Message: "x"}},
		{tool: "toolerror-nil", want: &pluginproto.Error{Kind: pluginproto.KindInternal, Message: "handler returned a nil *ToolError"}},
		{tool: "plain", want: &pluginproto.Error{Kind: pluginproto.KindInternal, Message: "upstream said 500"}},
		{tool: "panic", want: &pluginproto.Error{Kind: pluginproto.KindInternal, Message: "handler panicked: boom"}},
		{tool: "big", want: &pluginproto.Error{Kind: pluginproto.KindTool, Code: "HANDLER_ERROR", Message: "Response exceeded maximum size (1048576 bytes)"}},
		{tool: "longerror", want: &pluginproto.Error{Kind: pluginproto.KindTool, Code: "HANDLER_ERROR", Message: longMsg[:maxErrText]}},
		{tool: "null", result: "null"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			r := c.roundTrip(pluginproto.MethodInvoke, Request{Tool: tc.tool})
			if tc.want == nil {
				if r.Error != nil || string(r.Result) != tc.result {
					t.Fatalf("reply %+v %s, want result %s", r.Error, r.Result, tc.result)
				}
				return
			}
			if r.Result != nil || !reflect.DeepEqual(r.Error, tc.want) {
				t.Fatalf("reply error %+v (result %s), want %+v", r.Error, r.Result, tc.want)
			}
		})
	}
	r := c.roundTrip(pluginproto.MethodInvoke, Request{Tool: "unencodable"})
	if r.Error == nil || r.Error.Kind != pluginproto.KindInternal || !strings.Contains(r.Error.Message, "not encodable") {
		t.Fatalf("unencodable result: reply %+v", r.Error)
	}
}

func TestServeInitErrors(t *testing.T) {
	for _, tc := range []struct {
		fail     string
		category string
		message  string
	}{
		{"config", CategoryConfig, "no such mailbox"},
		{"plain", CategoryInternal, "boom"},
	} {
		t.Run(tc.fail, func(t *testing.T) {
			c := newFakeCore(t)
			c.serve(newTestHandler())
			r := c.roundTrip(pluginproto.MethodInit, pluginproto.InitParams{Config: map[string]any{"fail": tc.fail}})
			want := &pluginproto.Error{Kind: pluginproto.KindInternal, Category: tc.category, Message: tc.message}
			if !reflect.DeepEqual(r.Error, want) {
				t.Fatalf("init reply error %+v, want %+v", r.Error, want)
			}
		})
	}
}

func TestServeCancel(t *testing.T) {
	c := newFakeCore(t)
	th := newTestHandler()
	c.serve(th)
	c.roundTrip(pluginproto.MethodInit, pluginproto.InitParams{})
	id := c.call(pluginproto.MethodInvoke, Request{Tool: "block"})
	if got := <-th.started; got != "block" {
		t.Fatalf("started %q", got)
	}
	// Another call runs while the first blocks: calls are concurrent.
	if r := c.roundTrip(pluginproto.MethodInvoke, Request{Tool: "null"}); r.Error != nil {
		t.Fatalf("second call: %+v", r.Error)
	}
	<-th.started
	c.send(&pluginproto.Message{Type: pluginproto.TypeCancel, ID: id})
	r := c.recv()
	if r.ID != id || r.Error == nil || r.Error.Message != context.Canceled.Error() {
		t.Fatalf("reply to the cancelled call: %+v %+v", r, r.Error)
	}
}

func TestServeServices(t *testing.T) {
	c := newFakeCore(t)
	th := newTestHandler()
	c.serve(th)

	// Init reads a credential: a service call scoped to the init call.
	initID := c.call(pluginproto.MethodInit, pluginproto.InitParams{Config: map[string]any{"fail": "credential"}})
	sc := c.recv()
	if sc.Type != pluginproto.TypeCall || sc.Method != pluginproto.MethodReadCredential || sc.Scope != initID || string(sc.Params) != `{"key":"token"}` {
		t.Fatalf("service call during init: %+v %s", sc, sc.Params)
	}
	c.send(&pluginproto.Message{Type: pluginproto.TypeReply, ID: sc.ID, Result: json.RawMessage(`{"value":"v"}`)})
	if r := c.recv(); r.ID != initID || r.Error != nil {
		t.Fatalf("init reply %+v", r)
	}

	invokeID := c.call(pluginproto.MethodInvoke, Request{Tool: "services"})
	<-th.started
	answers := map[string]*pluginproto.Message{
		pluginproto.MethodSessionInfo:    {Result: json.RawMessage(`{"session":"s-7","group":"main"}`)},
		pluginproto.MethodReadCredential: {Result: json.RawMessage(`{"value":"sekrit"}`)},
		pluginproto.MethodAuditLog:       {Error: &pluginproto.Error{Kind: pluginproto.KindNoCredential, Message: "x"}},
		pluginproto.MethodToolCatalog:    {Error: &pluginproto.Error{Kind: pluginproto.KindNotChannel, Message: "x"}},
		pluginproto.MethodPublishEvent:   {Error: &pluginproto.Error{Kind: pluginproto.KindNotChannel, Message: "x"}},
	}
	wantScope := map[string]uint64{
		pluginproto.MethodSessionInfo: invokeID, pluginproto.MethodReadCredential: 0, pluginproto.MethodAuditLog: invokeID,
		pluginproto.MethodToolCatalog: invokeID, pluginproto.MethodPublishEvent: invokeID,
	}
	for range answers {
		m := c.recv()
		a, ok := answers[m.Method]
		if m.Type != pluginproto.TypeCall || !ok {
			t.Fatalf("unexpected %+v", m)
		}
		if m.Scope != wantScope[m.Method] {
			t.Errorf("%s: scope %d, want %d", m.Method, m.Scope, wantScope[m.Method])
		}
		c.send(&pluginproto.Message{Type: pluginproto.TypeReply, ID: m.ID, Result: a.Result, Error: a.Error})
	}
	r := c.recv()
	var out map[string]any
	if r.ID != invokeID || r.Error != nil || json.Unmarshal(r.Result, &out) != nil {
		t.Fatalf("invoke reply %+v %s", r, r.Result)
	}
	want := map[string]any{"session": "s-7", "cred": "sekrit", "errs": "<nil> <nil> true true true",
		"audit_err": ErrNoCredential.Error(), "catalog_err": ErrNotChannel.Error()}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("handler saw %v\nwant %v", out, want)
	}
}

func TestServeCoreGone(t *testing.T) {
	t.Run("connection closed", func(t *testing.T) {
		c := newFakeCore(t)
		go func() { c.served <- serve(newTestHandler(), c.endpoint, testToken, realParent) }()
		c.recv()
		c.r.Close()
		select {
		case err := <-c.served:
			if err == nil || !strings.Contains(err.Error(), "connection to the core lost") {
				t.Fatalf("serve = %v", err)
			}
		case <-time.After(hang):
			t.Fatal("serve did not notice the core went away")
		}
	})
	t.Run("parent changed", func(t *testing.T) {
		var calls atomic.Int32
		parent := parentWatch{
			getppid: func() int { return 100 + int(calls.Add(1)/3) }, // changes on the third look
			every:   5 * time.Millisecond,
		}
		c := newFakeCore(t)
		go func() { c.served <- serve(newTestHandler(), c.endpoint, testToken, parent) }()
		c.recv()
		select {
		case err := <-c.served:
			if err == nil || !strings.Contains(err.Error(), "has exited") {
				t.Fatalf("serve = %v", err)
			}
		case <-time.After(hang):
			t.Fatal("serve did not notice its parent changed")
		}
	})
}

func TestCapText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"}, // never splits a rune
		{"éé", 3, "é"},
	} {
		if got := capText(tc.in, tc.n); got != tc.want {
			t.Errorf("capText(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
