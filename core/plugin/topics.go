package plugin

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/internal/pluginproto"
)

// The core's event vocabulary: every topic the core publishes or routes,
// declared here once with the type of its payload. A plugin subscribes to
// them by name (its manifest's "subscribes"), makes an event of one with
// Topic.Event and reads one with Topic.Decode; the core's producers do the
// same, so that a renamed topic or a changed payload fails to compile
// rather than silently.
//
// The topics the watch stream shows (GET /v1/watch) are named in core/api
// (api.Watch*): a watch line's type is the topic of the event it comes
// from, and its member is the payload. A plugin may subscribe to any of
// them; confirmation.* reaches only a plugin granted the surface
// capability, and channel.* only the plugin it answers.
//
// An event's payload is a JSON object encoded once, by its publisher; the
// bus and every transport after it (a plugin's in-process subscription,
// the plugin protocol, the event socket, the watch stream) hand on those
// bytes, and each consumer decodes them once, into the topic's type.
const (
	// A channel's conversation with the core. A channel plugin publishes
	// message.inbound; when the core starts a session for it, it sends
	// that plugin (and no other) channel.started, and when the session
	// ends, channel.reply.
	TopicMessageInbound Topic[Inbound]      = "message.inbound"
	TopicChannelStarted Topic[ChannelReply] = "channel.started"
	TopicChannelReply   Topic[ChannelReply] = "channel.reply"

	// TopicTaskTriggered: a scheduled task fires now (the core's
	// scheduler), or a channel starts a session with it as with
	// message.inbound.
	TopicTaskTriggered Topic[TaskTrigger] = "task.triggered"

	// An agent container's life: started, then completed (exit 0) or
	// error (another exit status, or why it did not run).
	TopicAgentStarted   Topic[AgentStarted] = "agent.started"
	TopicAgentCompleted Topic[AgentEnded]   = "agent.completed"
	TopicAgentError     Topic[AgentEnded]   = "agent.error"

	// A plugin's life: initialised, and stopping gracefully.
	TopicPluginReady    Topic[PluginReady]    = "plugin.ready"
	TopicPluginStopping Topic[PluginStopping] = "plugin.stopping"

	// What the watch stream shows people.
	TopicConfirmationRequested Topic[api.Confirmation] = api.WatchConfirmationRequested
	TopicConfirmationResolved  Topic[api.Confirmation] = api.WatchConfirmationResolved
	TopicSessionOpened         Topic[api.Session]      = api.WatchSessionOpened
	TopicSessionClosed         Topic[api.Session]      = api.WatchSessionClosed
	TopicPluginHealth          Topic[api.PluginStatus] = api.WatchPluginHealth
	TopicCoreStatus            Topic[api.Status]       = api.WatchStatus
	TopicTaskCreated           Topic[TaskChange]       = api.WatchTaskCreated
	TopicTaskChanged           Topic[TaskChange]       = api.WatchTaskChanged
	TopicTaskFired             Topic[TaskChange]       = api.WatchTaskFired
	TopicTaskFinished          Topic[TaskChange]       = api.WatchTaskFinished
	TopicTaskRemoved           Topic[TaskChange]       = api.WatchTaskRemoved
)

// Topic is a topic of the core's vocabulary whose payload is a P. The
// topics are constants of this type (TopicMessageInbound, ...); compare
// an event's topic with Name.
type Topic[P any] string

// Name returns the topic as events and manifests spell it.
func (t Topic[P]) Name() string { return string(t) }

// Event returns an event of topic t for group, with p encoded as its
// payload: the one encoding of p on its way to every subscriber.
func (t Topic[P]) Event(group string, p P) (*Event, error) {
	return NewEvent(string(t), group, p)
}

// Decode decodes ev's payload, which must be of topic t, into a P.
func (t Topic[P]) Decode(ev *Event) (P, error) {
	var p P
	if ev.Topic != string(t) {
		return p, fmt.Errorf("decode an event of %s as %s", ev.Topic, t)
	}
	err := ev.Decode(&p)
	return p, err
}

// NewEvent returns an event of topic for group whose payload is p encoded
// once, here. p must encode to a JSON object (nil is the empty object).
// For the core's topics, their Topic.Event types the payload.
func NewEvent(topic, group string, p any) (*Event, error) {
	ev := &Event{Topic: topic, Group: group, Payload: json.RawMessage("{}")}
	if p == nil {
		return ev, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("event %s: encode the payload: %w", topic, err)
	}
	if pluginproto.JSONType(b) != "object" {
		return nil, fmt.Errorf("event %s: the payload is a JSON %s, not an object", topic, pluginproto.JSONType(b))
	}
	ev.Payload = b
	return ev, nil
}

// Decode decodes the event's payload into v, numbers into an any as
// json.Number (as the core hands over arguments). An empty payload
// decodes as null: v is left as it is.
func (e *Event) Decode(v any) error {
	if err := pluginproto.DecodeValue(e.Payload, v); err != nil {
		return fmt.Errorf("event %s: decode the payload: %w", e.Topic, err)
	}
	return nil
}

// Inbound is the payload of message.inbound: what a channel hands the
// agent.
type Inbound struct {
	// Text is the prompt.
	Text string `json:"text"`
	// ReplyTo is any JSON object the channel needs to answer (a chat id):
	// the core never interprets it, and hands it back, as it was, in the
	// ChannelReply of the event. The reply target comes from the event,
	// never from the agent.
	ReplyTo json.RawMessage `json:"reply_to,omitempty"`
	// Conversation, when set, names the conversation the message belongs
	// to (one per chat): the agent then continues that conversation
	// rather than starting afresh. It is the publishing plugin's own: no
	// other plugin can name it.
	Conversation string `json:"conversation,omitempty"`
	// Untrusted says Text is not the owner's own words but content from
	// anyone (a mail's body): the publishing plugin sets it. A session
	// started by such an event starts tainted, and the URLs in Text are
	// not given (docs/SECURITY.md, "Provenance and taint"). A channel
	// that checked the sender is the owner (Telegram) leaves it unset.
	Untrusted bool `json:"untrusted,omitempty"`
}

// TaskTrigger is the payload of task.triggered. The core's scheduler sets
// the run's fields (Task, Run, ...) and the prompt (Text); a channel that
// publishes task.triggered sets Inbound's fields, as for message.inbound.
type TaskTrigger struct {
	Inbound
	Task      string    `json:"task,omitempty"`     // the task's id
	Run       int64     `json:"run,omitempty"`      // the run's id: the core tells the scheduler how it went
	Scheduled time.Time `json:"scheduled,omitzero"` // the occurrence, to the second
	LateMS    int64     `json:"late_ms"`            // how late it fires
	CatchUp   bool      `json:"catch_up"`           // a missed occurrence caught up
	Manual    bool      `json:"manual"`             // run now, by the user
}

// ChannelReply is the payload of channel.started and channel.reply.
type ChannelReply struct {
	Plugin  string          `json:"plugin"`   // the channel plugin the event came from: the one it goes to
	Session string          `json:"session"`  // the session started for the event
	Event   string          `json:"event"`    // the inbound event's id
	ReplyTo json.RawMessage `json:"reply_to"` // the inbound event's reply_to, as it was
	// channel.reply only: the agent's final answer (its output), and how
	// the session ended: exit status, or an error that says why it did
	// not run or was stopped.
	Text  string `json:"text,omitempty"`
	Exit  *int   `json:"exit,omitempty"`
	Error string `json:"error,omitempty"`
}

// AgentStarted is the payload of agent.started.
type AgentStarted struct {
	Session string `json:"session"`
	Engine  string `json:"engine"` // the container engine: docker, podman, apple
}

// AgentEnded is the payload of agent.completed and agent.error: the exit
// status, or the error that says why the container did not run or failed.
type AgentEnded struct {
	Session string `json:"session"`
	Exit    *int   `json:"exit,omitempty"`
	Error   string `json:"error,omitempty"`
}

// PluginReady is the payload of plugin.ready.
type PluginReady struct {
	Plugin  string `json:"plugin"`
	Version string `json:"version"`
}

// PluginStopping is the payload of plugin.stopping.
type PluginStopping struct {
	Plugin string `json:"plugin"`
}

// TaskChange is the payload of the task.* topics the watch stream shows:
// the task as it now stands and, for task.fired and task.finished, the
// run.
type TaskChange struct {
	Task api.Task     `json:"task"`
	Run  *api.TaskRun `json:"task_run,omitempty"`
}
