package pluginproto_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// A golden frame: one message of the protocol exactly as it crosses the
// socket. The envelope is msg; body is the typed params (of a call) or
// result (of a reply) that the sending side marshals, as pluginhost and
// plugin.Serve do (json.Marshal, then pluginproto.Encode).
type golden struct {
	file string
	msg  pluginproto.Message
	body any
}

// The story the frames tell, so that ids and scopes agree: the core calls
// init (1), invoke (2), event (3), verify (4), brief (5), shutdown (6)
// and preview (7, of a call of a tool that declares one);
// while invoke 2 runs, the handler makes its service calls 1 to 11, scoped
// to it where they need a request.
var (
	when       = time.Date(2026, 11, 21, 10, 30, 11, 0, time.UTC)
	session    = "s-r35umrvqcw3sw"
	helloToken = "9c1f4e2a7b3d5c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6"
)

// call and reply build envelopes.
func call(id uint64, method string, scope uint64) pluginproto.Message {
	return pluginproto.Message{Type: pluginproto.TypeCall, ID: id, Method: method, Scope: scope}
}

func reply(id uint64) pluginproto.Message {
	return pluginproto.Message{Type: pluginproto.TypeReply, ID: id}
}

func replyErr(id uint64, e pluginproto.Error) pluginproto.Message {
	m := reply(id)
	m.Error = &e
	return m
}

// coreCalls are the methods the core calls on the plugin, and
// serviceCalls those the plugin calls on the core: together, every
// Method constant of proto.go (TestGoldenCoversTheProtocol).
var (
	coreCalls = []string{pluginproto.MethodInit, pluginproto.MethodInvoke, pluginproto.MethodEvent,
		pluginproto.MethodVerify, pluginproto.MethodBrief, pluginproto.MethodShutdown, pluginproto.MethodPreview}
	serviceCalls = []string{pluginproto.MethodAuditLog, pluginproto.MethodToolCatalog, pluginproto.MethodSessionInfo,
		pluginproto.MethodReadCredential, pluginproto.MethodPublishEvent, pluginproto.MethodAuditDropped,
		pluginproto.MethodReportHealth, pluginproto.MethodPaused, pluginproto.MethodDecide, pluginproto.MethodCoreStatus,
		pluginproto.MethodSetPaused, pluginproto.MethodStopSession}
)

var empty = struct{}{}

// frames are the golden frames: every message kind, each way. File names
// say who sends it (core-, plugin-), the kind, and the method or error
// kind with "_" written "-".
var frames = []golden{
	// Handshake.
	{file: "plugin-hello.json", msg: pluginproto.Message{Type: pluginproto.TypeHello, Token: helloToken, Version: pluginproto.Version, PID: 48213}},

	// The core's calls and the plugin's replies.
	{file: "core-call-init.json", msg: call(1, pluginproto.MethodInit, 0),
		body: pluginproto.InitParams{Config: map[string]any{"units": "metric", "max_results": json.Number("5")}}},
	{file: "plugin-reply-init.json", msg: reply(1), body: empty},
	{file: "core-call-invoke.json", msg: call(2, pluginproto.MethodInvoke, 0),
		body: plugin.Request{Tool: "weather_now", Arguments: map[string]any{"city": "Lisbon", "days": json.Number("2")}, Group: "main",
			Session: session, Correlation: "9f1c2a7e4b3d4c1f8e2a6b5d7c9e0f11", EnvelopeID: "0b6f3c52-5d7e-4b8a-9a51-2f7d3e9c1a44", Time: when}},
	{file: "plugin-reply-invoke.json", msg: reply(2), body: map[string]any{"city": "Lisbon", "temperature_c": json.Number("17.5"), "sky": "clear"}},
	// An event's payload is the publisher's bytes, which the protocol
	// carries as they are: any JSON object. (The core's ChannelReply
	// encodes its members in field order; these frames keep the order of
	// the map-encoded payloads they were first written from.)
	{file: "core-call-event.json", msg: call(3, pluginproto.MethodEvent, 0),
		body: plugin.Event{ID: "ev-7d1e", Topic: plugin.TopicChannelReply.Name(), Group: "main", Correlation: "c-42", Time: when, Source: "core",
			Payload: json.RawMessage(`{"event":"ev-5a0c","exit":0,"plugin":"chat","reply_to":{"chat_id":42},"session":"` + session +
				`","text":"It is 17.5 °C and clear in Lisbon."}`)}},
	{file: "plugin-reply-event.json", msg: reply(3), body: empty},
	{file: "core-call-verify.json", msg: call(4, pluginproto.MethodVerify, 0), body: empty},
	{file: "plugin-reply-verify.json", msg: reply(4), body: plugin.VerifyResult{OK: true, Message: "api.example.com accepted the key"}},
	{file: "core-call-brief.json", msg: call(5, pluginproto.MethodBrief, 0), body: pluginproto.BriefParams{Group: "main"}},
	{file: "plugin-reply-brief.json", msg: reply(5), body: plugin.Brief{
		Entries:    []plugin.BriefEntry{{ID: "m-12", Type: "preference", Content: "Prefers metric units", Behavioral: true, Tags: []string{"units"}, AgeDays: 3}},
		EntryCount: 9, BriefCount: 1, GeneratedAt: when}},
	{file: "core-call-shutdown.json", msg: call(6, pluginproto.MethodShutdown, 0), body: empty},
	{file: "plugin-reply-shutdown.json", msg: reply(6), body: empty},
	{file: "core-call-preview.json", msg: call(7, pluginproto.MethodPreview, 0),
		body: plugin.Request{Tool: "mail_send", Arguments: map[string]any{"draft_id": "d-17"}, Group: "main",
			Session: session, Correlation: "4e2a6b5d7c9e0f119f1c2a7e4b3d4c1f", EnvelopeID: "7d3e9c1a-44b8-4a51-9f2d-0b6f3c525d7e", Time: when}},
	{file: "plugin-reply-preview.json", msg: reply(7), body: plugin.Preview{
		Text:   "From: me@example.org\nTo: anna@example.org\nSubject: Lunch\n\nTomorrow at 12?\n",
		Digest: "sha256:5d41402abc4b2a76b9719d911017c592a1c5e9f3b0c8d7e6f5a4b3c2d1e0f9a8"}},
	{file: "core-call-invoke-approved-preview.json", msg: call(8, pluginproto.MethodInvoke, 0),
		body: plugin.Request{Tool: "mail_send", Arguments: map[string]any{"draft_id": "d-17"}, Group: "main",
			Session: session, Correlation: "4e2a6b5d7c9e0f119f1c2a7e4b3d4c1f", EnvelopeID: "7d3e9c1a-44b8-4a51-9f2d-0b6f3c525d7e", Time: when,
			PreviewDigest: "sha256:5d41402abc4b2a76b9719d911017c592a1c5e9f3b0c8d7e6f5a4b3c2d1e0f9a8"}},
	{file: "core-cancel.json", msg: pluginproto.Message{Type: pluginproto.TypeCancel, ID: 2}},

	// The plugin's failed replies.
	{file: "plugin-reply-error-tool.json", msg: replyErr(2, pluginproto.Error{Kind: pluginproto.KindTool, Code: "CITY_UNKNOWN",
		Message: "the city is unknown", Retriable: true, Field: "city", RetryAfter: 5})},
	{file: "plugin-reply-error-internal.json", msg: replyErr(2, pluginproto.Error{Kind: pluginproto.KindInternal,
		Message: "open /var/lib/weather.db: permission denied"})},
	{file: "plugin-reply-error-init.json", msg: replyErr(1, pluginproto.Error{Kind: pluginproto.KindInternal,
		Message: "token rejected by api.example.com", Category: plugin.CategoryAuth})},
	{file: "plugin-reply-error-not-implemented.json", msg: replyErr(3, pluginproto.Error{Kind: pluginproto.KindNotImplemented,
		Message: plugin.ErrNotImplemented.Error()})},

	// The plugin's service calls and the core's answers.
	{file: "plugin-call-audit-log.json", msg: call(1, pluginproto.MethodAuditLog, 2), body: plugin.AuditFilter{Outcome: "error", LastN: 20}},
	{file: "core-reply-audit-log.json", msg: reply(1), body: []plugin.AuditEntry{{Time: when, Session: session, Group: "main", Source: "weather",
		Topic: "tool.invoke.weather_now", Correlation: "9f1c2a7e4b3d4c1f8e2a6b5d7c9e0f11", Stage: "handler", Outcome: "error", Code: "CITY_UNKNOWN",
		Reason: "the city is unknown", DurationMS: 12.5}}},
	{file: "plugin-call-tool-catalog.json", msg: call(2, pluginproto.MethodToolCatalog, 2), body: empty},
	{file: "core-reply-tool-catalog.json", msg: reply(2), body: []plugin.ToolInfo{{Name: "weather_now", Plugin: "weather",
		Description: "Current weather for a city", RiskLevel: "low"}}},
	{file: "plugin-call-session-info.json", msg: call(3, pluginproto.MethodSessionInfo, 2), body: empty},
	{file: "core-reply-session-info.json", msg: reply(3), body: plugin.SessionInfo{ID: session, Group: "main", Started: when}},
	{file: "plugin-call-read-credential.json", msg: call(4, pluginproto.MethodReadCredential, 0), body: pluginproto.CredentialParams{Key: "api_key"}},
	{file: "core-reply-read-credential.json", msg: reply(4), body: pluginproto.CredentialResult{Value: "sk-example-not-a-secret"}},
	{file: "plugin-call-publish-event.json", msg: call(5, pluginproto.MethodPublishEvent, 0), body: plugin.Event{Topic: plugin.TopicMessageInbound.Name(),
		Group: "main", Payload: json.RawMessage(`{"conversation":"42","reply_to":{"chat_id":42},"text":"weather in Lisbon?"}`)}},
	{file: "core-reply-publish-event.json", msg: reply(5), body: empty},
	{file: "plugin-call-audit-dropped.json", msg: call(6, pluginproto.MethodAuditDropped, 0),
		body: pluginproto.DroppedParams{What: "message from stranger user 777 in chat 777"}},
	{file: "core-reply-audit-dropped.json", msg: reply(6), body: empty},
	{file: "plugin-call-report-health.json", msg: call(7, pluginproto.MethodReportHealth, 0),
		body: pluginproto.HealthParams{Degraded: true, Why: "no answer from api.telegram.org for 300 s"}},
	{file: "core-reply-report-health.json", msg: reply(7), body: empty},
	{file: "plugin-call-paused.json", msg: call(12, pluginproto.MethodPaused, 0), body: empty},
	{file: "core-reply-paused.json", msg: reply(12), body: pluginproto.PausedParams{Paused: false}},
	{file: "plugin-call-decide.json", msg: call(8, pluginproto.MethodDecide, 0), body: plugin.Decision{ID: "c-5f3a9b21", Approve: true,
		ArgsHash: "3ac0afa6e1f04b7c9d2e8a5b6c7d8e9f", Decider: "telegram user 42"}},
	{file: "core-reply-decide.json", msg: reply(8), body: empty},
	{file: "plugin-call-core-status.json", msg: call(9, pluginproto.MethodCoreStatus, 0), body: empty},
	{file: "core-reply-core-status.json", msg: reply(9), body: plugin.CoreStatus{Version: "0.9.0", Started: when, Paused: false, Sessions: 1,
		PendingConfirmations: 1, Unhealthy: []string{"mail"}, Tasks: []plugin.TaskSummary{{ID: "t-1", Group: "main",
			Schedule: "every day at 07:30", Enabled: true, Next: when.Add(21 * time.Hour), Last: "ok"}}}},
	{file: "plugin-call-set-paused.json", msg: call(10, pluginproto.MethodSetPaused, 0), body: pluginproto.PausedParams{Paused: true}},
	{file: "core-reply-set-paused.json", msg: reply(10), body: empty},
	{file: "plugin-call-stop-session.json", msg: call(11, pluginproto.MethodStopSession, 0), body: pluginproto.SessionParams{Session: session}},
	{file: "core-reply-stop-session.json", msg: reply(11), body: empty},

	// The core's failed answers, one per error kind it sends.
	{file: "core-reply-error-no-request.json", msg: replyErr(1, pluginproto.Error{Kind: pluginproto.KindNoRequest, Message: plugin.ErrNoRequest.Error()})},
	{file: "core-reply-error-no-credential.json", msg: replyErr(4, pluginproto.Error{Kind: pluginproto.KindNoCredential, Message: plugin.ErrNoCredential.Error()})},
	{file: "core-reply-error-not-channel.json", msg: replyErr(5, pluginproto.Error{Kind: pluginproto.KindNotChannel, Message: plugin.ErrNotChannel.Error()})},
	{file: "core-reply-error-group-not-granted.json", msg: replyErr(5, pluginproto.Error{Kind: pluginproto.KindGroupNotGranted, Message: plugin.ErrGroupNotGranted.Error()})},
	{file: "core-reply-error-core-topic.json", msg: replyErr(5, pluginproto.Error{Kind: pluginproto.KindCoreTopic, Message: plugin.ErrCoreTopic.Error()})},
	{file: "core-reply-error-not-surface.json", msg: replyErr(8, pluginproto.Error{Kind: pluginproto.KindNotSurface, Message: plugin.ErrNotSurface.Error()})},
	{file: "core-reply-error-decided.json", msg: replyErr(8, pluginproto.Error{Kind: pluginproto.KindDecided,
		Message: "conflict: confirmation c-5f3a9b21 is already decided: approved"})},
	{file: "core-reply-error-internal.json", msg: replyErr(9, pluginproto.Error{Kind: pluginproto.KindInternal,
		Message: "too many service calls: rate limit exceeded"})},
}

func framePath(file string) string { return filepath.Join("testdata", "frames", file) }

// encode marshals g's body into its envelope as the sending side does and
// returns the frame.
func (g golden) encode(t *testing.T) []byte {
	t.Helper()
	m := g.msg
	if g.body != nil {
		raw, err := json.Marshal(g.body)
		if err != nil {
			t.Fatal(err)
		}
		if m.Type == pluginproto.TypeCall {
			m.Params = raw
		} else {
			m.Result = raw
		}
	}
	b, err := pluginproto.Encode(&m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGoldenFrames encodes every message kind and compares it with its
// golden file (go test -update rewrites them), then decodes each golden
// file back: the same envelope, the same typed body, and the same bytes
// when encoded again.
func TestGoldenFrames(t *testing.T) {
	for _, g := range frames {
		t.Run(g.file, func(t *testing.T) {
			testutil.Golden(t, framePath(g.file), append(g.encode(t), '\n'))

			raw, err := os.ReadFile(framePath(g.file))
			if err != nil {
				t.Fatal(err)
			}
			frame := bytes.TrimSuffix(raw, []byte("\n"))
			m, err := pluginproto.Decode(frame)
			if err != nil {
				t.Fatalf("the golden frame does not decode: %v", err)
			}
			body := m.Result
			if m.Type == pluginproto.TypeCall {
				body = m.Params
			}
			envelope := *m
			envelope.Params, envelope.Result = nil, nil
			if !reflect.DeepEqual(envelope, g.msg) {
				t.Errorf("decoded envelope %+v (error %+v), want %+v (error %+v)", envelope, envelope.Error, g.msg, g.msg.Error)
			}
			if g.body == nil && body != nil {
				t.Errorf("a body %s where none belongs", body)
			}
			if g.body != nil {
				v := reflect.New(reflect.TypeOf(g.body))
				if err := pluginproto.DecodeValue(body, v.Interface()); err != nil {
					t.Fatalf("body %s: %v", body, err)
				}
				if !reflect.DeepEqual(v.Elem().Interface(), g.body) {
					t.Errorf("decoded body %#v, want %#v", v.Elem().Interface(), g.body)
				}
			}
			again, err := pluginproto.Encode(m)
			if err != nil || !bytes.Equal(again, frame) {
				t.Errorf("re-encoded\n%s (%v)\nwant\n%s", again, err, frame)
			}
		})
	}
}

// TestGoldenFilesAreAllKnown fails on a file in testdata/frames that no
// test writes: a renamed frame must not leave its old file behind.
func TestGoldenFilesAreAllKnown(t *testing.T) {
	known := map[string]bool{}
	for _, g := range frames {
		if known[g.file] {
			t.Errorf("%s is listed twice", g.file)
		}
		known[g.file] = true
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "frames"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !known[e.Name()] {
			t.Errorf("testdata/frames/%s is not a golden frame of this test: delete it", e.Name())
		}
	}
}

// dashed writes a method or kind as it appears in a file name.
func dashed(s string) string { return strings.ReplaceAll(s, "_", "-") }

// TestGoldenCoversTheProtocol fails when proto.go declares a message type,
// method or error kind without its golden frames: a method added to the
// protocol needs its call and its answer here (and a line in
// docs/PLUGIN-PROTOCOL.md, TestProtocolPage).
func TestGoldenCoversTheProtocol(t *testing.T) {
	have := map[string]bool{}
	for _, g := range frames {
		have[g.file] = true
	}
	decl := protoConstants(t)
	declared := map[string]bool{}
	for _, m := range decl["Method"] {
		declared[m] = true
	}
	for _, m := range append(append([]string(nil), coreCalls...), serviceCalls...) {
		if !declared[m] {
			t.Errorf("method %q is listed here but not declared in proto.go", m)
		}
		delete(declared, m)
	}
	for m := range declared {
		t.Errorf("method %q of proto.go is in neither coreCalls nor serviceCalls: add it, and its golden frames", m)
	}
	want := map[string]string{}
	for _, m := range coreCalls {
		want["core-call-"+dashed(m)+".json"] = "the core's call " + m
		want["plugin-reply-"+dashed(m)+".json"] = "the plugin's answer to " + m
	}
	for _, m := range serviceCalls {
		want["plugin-call-"+dashed(m)+".json"] = "the plugin's service call " + m
		want["core-reply-"+dashed(m)+".json"] = "the core's answer to " + m
	}
	// An error kind has the core's error frame, but for those the plugin
	// sends; a message type is in every method's frames, but for these.
	byKind := map[string][]string{
		pluginproto.KindTool:           {"plugin-reply-error-tool.json"},
		pluginproto.KindInternal:       {"plugin-reply-error-internal.json", "plugin-reply-error-init.json", "core-reply-error-internal.json"},
		pluginproto.KindNotImplemented: {"plugin-reply-error-not-implemented.json"},
	}
	for _, k := range decl["Kind"] {
		files, ok := byKind[k]
		if !ok {
			files = []string{"core-reply-error-" + dashed(k) + ".json"}
		}
		for _, f := range files {
			want[f] = "error kind " + k
		}
	}
	byType := map[string][]string{pluginproto.TypeHello: {"plugin-hello.json"}, pluginproto.TypeCancel: {"core-cancel.json"},
		pluginproto.TypeCall: {}, pluginproto.TypeReply: {}}
	for _, typ := range decl["Type"] {
		files, ok := byType[typ]
		if !ok {
			t.Errorf("message type %q of proto.go has no golden frame: add one", typ)
		}
		for _, f := range files {
			want[f] = "message type " + typ
		}
	}
	for file, what := range want {
		if !have[file] {
			t.Errorf("no golden frame %s (%s)", file, what)
		}
	}
}
