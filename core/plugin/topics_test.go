package plugin_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/plugin"
)

// vocabulary is every topic of topics.go, by its constant's name, with a
// payload of its type to carry: TestVocabularyIsComplete keeps it in step
// with the declarations.
var vocabulary = map[string]struct {
	name string
	trip func(t *testing.T) // publishes a sample payload and decodes it
}{
	"TopicMessageInbound": {plugin.TopicMessageInbound.Name(), tripper(plugin.TopicMessageInbound,
		plugin.Inbound{Text: "hi", ReplyTo: json.RawMessage(`{"chat_id":42}`), Conversation: "c"})},
	"TopicChannelStarted": {plugin.TopicChannelStarted.Name(), tripper(plugin.TopicChannelStarted, plugin.ChannelReply{Plugin: "p", Session: "s", Event: "e", ReplyTo: json.RawMessage(`{"chat_id":42}`)})},
	"TopicChannelReply":   {plugin.TopicChannelReply.Name(), tripper(plugin.TopicChannelReply, plugin.ChannelReply{Plugin: "p", ReplyTo: json.RawMessage(`"x"`), Text: "answer", Exit: new(int)})},
	"TopicTaskTriggered": {plugin.TopicTaskTriggered.Name(), tripper(plugin.TopicTaskTriggered,
		plugin.TaskTrigger{Inbound: plugin.Inbound{Text: "check"}, Task: "t-1", Run: 7, Scheduled: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), LateMS: 12, CatchUp: true})},
	"TopicAgentStarted":          {plugin.TopicAgentStarted.Name(), tripper(plugin.TopicAgentStarted, plugin.AgentStarted{Session: "s", Engine: "docker"})},
	"TopicAgentCompleted":        {plugin.TopicAgentCompleted.Name(), tripper(plugin.TopicAgentCompleted, plugin.AgentEnded{Session: "s", Exit: new(int)})},
	"TopicAgentError":            {plugin.TopicAgentError.Name(), tripper(plugin.TopicAgentError, plugin.AgentEnded{Session: "s", Error: "no image"})},
	"TopicPluginReady":           {plugin.TopicPluginReady.Name(), tripper(plugin.TopicPluginReady, plugin.PluginReady{Plugin: "echo", Version: "1.0.0"})},
	"TopicPluginStopping":        {plugin.TopicPluginStopping.Name(), tripper(plugin.TopicPluginStopping, plugin.PluginStopping{Plugin: "echo"})},
	"TopicConfirmationRequested": {plugin.TopicConfirmationRequested.Name(), tripper(plugin.TopicConfirmationRequested, api.Confirmation{ID: "c", Arguments: json.RawMessage(`{"n":9007199254740993}`)})},
	"TopicConfirmationResolved":  {plugin.TopicConfirmationResolved.Name(), tripper(plugin.TopicConfirmationResolved, api.Confirmation{ID: "c", Decision: "approved"})},
	"TopicSessionOpened":         {plugin.TopicSessionOpened.Name(), tripper(plugin.TopicSessionOpened, api.Session{ID: "s", Group: "main"})},
	"TopicSessionClosed":         {plugin.TopicSessionClosed.Name(), tripper(plugin.TopicSessionClosed, api.Session{ID: "s", Group: "main"})},
	"TopicPluginHealth":          {plugin.TopicPluginHealth.Name(), tripper(plugin.TopicPluginHealth, api.PluginStatus{Name: "echo", Healthy: true})},
	"TopicCoreStatus":            {plugin.TopicCoreStatus.Name(), tripper(plugin.TopicCoreStatus, api.Status{Version: "v1", Paused: true})},
	"TopicTaskCreated":           {plugin.TopicTaskCreated.Name(), tripper(plugin.TopicTaskCreated, plugin.TaskChange{Task: api.Task{ID: "t-1"}})},
	"TopicTaskChanged":           {plugin.TopicTaskChanged.Name(), tripper(plugin.TopicTaskChanged, plugin.TaskChange{Task: api.Task{ID: "t-1"}})},
	"TopicTaskFired":             {plugin.TopicTaskFired.Name(), tripper(plugin.TopicTaskFired, plugin.TaskChange{Task: api.Task{ID: "t-1"}, Run: &api.TaskRun{ID: 7}})},
	"TopicTaskFinished":          {plugin.TopicTaskFinished.Name(), tripper(plugin.TopicTaskFinished, plugin.TaskChange{Task: api.Task{ID: "t-1"}, Run: &api.TaskRun{ID: 7, State: "ok"}})},
	"TopicTaskRemoved":           {plugin.TopicTaskRemoved.Name(), tripper(plugin.TopicTaskRemoved, plugin.TaskChange{Task: api.Task{ID: "t-1"}})},
}

// tripper returns a test that makes an event of topic with p and decodes
// it: the same value, from one encoding.
func tripper[P any](topic plugin.Topic[P], p P) func(*testing.T) {
	return func(t *testing.T) {
		ev, err := topic.Event("main", p)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Topic != topic.Name() || ev.Group != "main" {
			t.Fatalf("event %+v", ev)
		}
		got, err := topic.Decode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("decoded %+v, want %+v", got, p)
		}
	}
}

// TestVocabularyIsComplete reads topics.go: every Topic constant it
// declares is in vocabulary, and nothing else is.
func TestVocabularyIsComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "topics.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if ix, ok := vs.Type.(*ast.IndexExpr); ok {
			if id, ok := ix.X.(*ast.Ident); ok && id.Name == "Topic" {
				for _, name := range vs.Names {
					declared = append(declared, name.Name)
				}
			}
		}
		return true
	})
	if len(declared) < 10 {
		t.Fatalf("found %d Topic constants in topics.go: the parse is wrong", len(declared))
	}
	for _, name := range declared {
		if _, ok := vocabulary[name]; !ok {
			t.Errorf("topics.go declares %s: add it to this test's vocabulary", name)
		}
	}
	for name := range vocabulary {
		if !slices.Contains(declared, name) {
			t.Errorf("vocabulary lists %s, which topics.go does not declare", name)
		}
	}
}

// TestVocabulary: each topic is a valid topic of the bus, named once,
// carries its payload through one encoding, and is the core's own —
// no plugin may publish it — but for the two a channel starts sessions
// with; the watch stream's topics are all in it; only the confirmations
// need the surface capability.
func TestVocabulary(t *testing.T) {
	seen := map[string]string{}
	for const_, topic := range vocabulary {
		t.Run(topic.name, func(t *testing.T) {
			if err := events.CheckTopic(topic.name); err != nil {
				t.Fatal(err)
			}
			if other, dup := seen[topic.name]; dup {
				t.Fatalf("%s and %s are both %s", const_, other, topic.name)
			}
			seen[topic.name] = const_
			open := topic.name == plugin.TopicMessageInbound.Name() || topic.name == plugin.TopicTaskTriggered.Name()
			if plugin.CoreTopic(topic.name) == open {
				t.Errorf("CoreTopic(%s) = %v", topic.name, !open)
			}
			surface := strings.HasPrefix(const_, "TopicConfirmation")
			if plugin.SurfaceTopic(topic.name) != surface {
				t.Errorf("SurfaceTopic(%s) = %v", topic.name, !surface)
			}
			topic.trip(t)
		})
	}
	for _, w := range api.WatchTopics {
		if _, ok := seen[w]; !ok {
			t.Errorf("the watch follows %s, which the vocabulary does not declare", w)
		}
	}
}

// TestEventPayload: NewEvent encodes once and refuses what is not a JSON
// object; Decode reads numbers into an any as json.Number and refuses a
// topic's Decode of another topic's event.
func TestEventPayload(t *testing.T) {
	ev, err := plugin.NewEvent("x.y", "g", map[string]any{"n": 9007199254740993})
	if err != nil || string(ev.Payload) != `{"n":9007199254740993}` {
		t.Fatalf("NewEvent: %s, %v", ev.Payload, err)
	}
	var m map[string]any
	if err := ev.Decode(&m); err != nil || m["n"] != json.Number("9007199254740993") {
		t.Fatalf("Decode: %#v, %v", m, err)
	}
	if ev, err := plugin.NewEvent("x.y", "", nil); err != nil || string(ev.Payload) != "{}" {
		t.Errorf("NewEvent(nil): %v, %v", ev, err)
	}
	for _, p := range []any{[]int{1}, "text", 7} {
		if _, err := plugin.NewEvent("x.y", "", p); err == nil || !strings.Contains(err.Error(), "not an object") {
			t.Errorf("NewEvent(%#v): %v, want not an object", p, err)
		}
	}
	if _, err := plugin.NewEvent("x.y", "", func() {}); err == nil {
		t.Error("NewEvent of a func succeeded")
	}
	if _, err := plugin.TopicChannelReply.Decode(ev); err == nil || !strings.Contains(err.Error(), "x.y") {
		t.Errorf("channel.reply's Decode of an x.y event: %v", err)
	}
	bad := &plugin.Event{Topic: "x.y", Payload: json.RawMessage(`{"n":`)}
	if err := bad.Decode(&m); err == nil || !strings.Contains(err.Error(), "x.y") {
		t.Errorf("Decode of a broken payload: %v", err)
	}
}
