// Package agent starts agent sessions: the one place where a session of a
// group is opened and its agent set running, for the control API
// (`carapace run`) and for events — a channel plugin's message, which may
// continue one of the group's conversations, and a scheduled task.
//
// For each session it writes the files the agent reads — the skill tree,
// CLAUDE.md with the memory brief, Claude Code's settings, the prompt,
// the empty shadows (agent.go, shadow.go) — and, for a container runtime,
// runs the container with the hardened flags of core/runtime through the
// engine config.toml names, resuming a named conversation's transcript
// (containers.go; the engines' versions for status in engines.go) and
// carrying the conversation's taint over (conversationTaint), with
// the session's model API proxy beside it (llm.go). It bounds each
// group's concurrent and queued sessions (slots.go), stops containers that
// stay idle or whose agent never reaches the core (slots.go, reach.go),
// removes those a previous core left behind, and publishes agent.started,
// agent.completed and agent.error. For each group that receives events it
// keeps containers started ahead, which only that group's next event
// session claims (warm.go).
//
// The spawner (Spawn, below) starts a session for each event of a
// configured group ([groups.NAME] topics in config.toml) unless sessions
// for events are paused; it answers a plugin's event with channel.started
// and channel.reply, to that plugin alone, and tells the scheduler
// (TaskRuns) how a task's run went.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/provenance"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/core/session"
	"github.com/carapace-dev/carapace/core/skills"
	"github.com/carapace-dev/carapace/core/tasks"
	"github.com/carapace-dev/carapace/internal/clock"
	"github.com/carapace-dev/carapace/internal/textutil"
	"github.com/carapace-dev/carapace/keychain"
)

// Plugins is what a session's files need from the plugins.
type Plugins interface {
	// Healthy returns the healthy plugins, for the session's skill tree.
	Healthy() []skills.Plugin
	// BriefProvider returns the healthy plugin that provides the memory
	// brief and its hook, or a nil hook when there is none.
	BriefProvider() (name string, bp plugin.BriefProvider)
}

// Catalog lists the tools, for the intrinsics' skill.
type Catalog interface {
	List() []*catalog.Tool
}

// Auditor writes audit entries.
type Auditor interface {
	Write(e *audit.Entry) error
}

// Publisher puts the core's events on the bus: the agents' lifecycle, and
// the answers to channels. It takes what a topic's Topic.Event returns
// (events.Bus.PublishCore).
type Publisher interface {
	PublishCore(ev *plugin.Event, err error)
}

// Options configure a Runner.
type Options struct {
	Home        home.Dir
	Config      *config.Config
	Logger      *slog.Logger
	Version     string
	Audit       Auditor
	Sessions    *session.Manager
	Bus         Publisher
	Plugins     Plugins
	Catalog     Catalog
	Credentials keychain.Store // the model API key
	// NewEngine returns the container engine config.toml names; nil
	// refuses every container session.
	NewEngine func(name string) (runtime.Engine, error)
	// BriefTimeout bounds the memory brief hook; zero means BriefTimeout.
	BriefTimeout time.Duration
	// NoShadows leaves out the shadow mounts (tests only: shadow.go).
	NoShadows bool
	// TaskRuns, if set, is told how the sessions of the scheduler's own
	// task.triggered events go (core/tasks).
	TaskRuns TaskRuns
	// Clock times warm containers' idle time (warm.go); nil is the
	// system clock.
	Clock clock.Clock
	// WarmChanged, if set, is told when a warm container starts, is
	// claimed or goes (for the watchers' core.status).
	WarmChanged func()
}

// TaskRuns records the runs of scheduled tasks: the session that runs one,
// and how it ended (nil: the agent exited 0).
type TaskRuns interface {
	Started(ctx context.Context, run int64, session string) error
	Finished(ctx context.Context, run int64, err error) error
}

// Runner starts and tracks agent sessions. Create it with New.
type Runner struct {
	prints   manifestPrints // warmPrint's cache
	opts     Options
	cfg      *config.Config
	log      *slog.Logger
	audit    Auditor
	sessions *session.Manager
	creds    keychain.Store
	ctrs     containers
	llm      llmShared
	paused   atomic.Bool       // no sessions for events
	origins  map[string]string // session → the plugin whose event started it; guarded by ctrs.mu
	warm     warmPool          // warm.go

	convOnce sync.Once // opens convs
	convs    *provenance.Conversations
	convErr  error
}

// New returns a Runner.
func New(o Options) *Runner {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runner{opts: o, cfg: o.Config, log: o.Logger, audit: o.Audit, sessions: o.Sessions, creds: o.Credentials,
		ctrs: containers{engines: map[string]runtime.Engine{}, infos: map[string]runtime.Info{}, live: map[string]*agentRun{}, slots: groupSlots{groups: map[string]*slots{}}}}
	r.ctrs.slots.max, r.ctrs.slots.queue = o.Config.Sessions.MaxPerGroup, o.Config.Sessions.Queue
	r.ctrs.slots.freed = r.fillWarm
	return r
}

// CheckConfig reports a config.toml whose [llm] section cannot work (an
// unreadable ca_file), so that the core refuses to start rather than fail
// at its first container session.
func CheckConfig(cfg *config.Config) error {
	r := &Runner{cfg: cfg}
	return r.llmSetup()
}

// Start clears what a core that crashed left behind (session folders, and
// containers when an engine is configured and ready) and runs the reapers
// of idle and unreached containers until ctx ends.
func (r *Runner) Start(ctx context.Context) {
	r.clearAgents()
	r.removeLeftovers(ctx)
	r.startWarming()
	go r.reapIdle(ctx)
	go r.reapUnreached(ctx)
}

// Open opens a session for req.Group, whose name the caller has checked.
// With the runtime "none" the caller runs the agent and Agent is nil;
// otherwise the agent runs in a container and Agent carries its output.
func (r *Runner) Open(ctx context.Context, req api.SessionRequest) (api.Session, *api.Agent, error) {
	if req.Runtime != "" && req.Runtime != "none" {
		return r.openContainerSession(ctx, req, "", nil, nil)
	}
	info, err := r.sessions.Open(req.Group, "none")
	if err != nil {
		return api.Session{}, nil, fmt.Errorf("%w: %w", api.ErrInvalid, err)
	}
	r.startProvenance(info, req.Prompt, nil, nil)
	if err := r.prepareAgent(ctx, info.ID, req.Group, info.Runtime, req.Prompt); err != nil {
		_ = r.sessions.Close(info.ID)
		return api.Session{}, nil, err
	}
	return r.View(info), nil, nil
}

// Close ends session id: its container, its socket, its files;
// ErrNotFound (wrapped in api.ErrNotFound) if there is no such session.
func (r *Runner) Close(_ context.Context, id string) error {
	r.stopContainer(id)
	if err := r.sessions.Close(id); err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return fmt.Errorf("%w: %w", api.ErrNotFound, err)
		}
		return err
	}
	r.removeAgent(id)
	return nil
}

// Stop stops every agent container and removes every session's files: the
// core is shutting down. The sessions themselves are the caller's to
// close.
func (r *Runner) Stop() {
	r.stopWarming()
	r.stopAllContainers()
}

// Clear removes every session's files, after the sessions are closed.
func (r *Runner) Clear() { r.clearAgents() }

// View is the control API's view of a session.
func (r *Runner) View(i session.Info) api.Session {
	return api.Session{ID: i.ID, Group: i.Group, Socket: i.Socket, Runtime: i.Runtime, Started: i.Started,
		Skills: filepath.Join(r.agentDir(i.ID), "skills"), ClaudeMD: filepath.Join(r.agentDir(i.ID), claudeFile)}
}

// Engines are the container engines checked and found ready.
func (r *Runner) Engines() []api.EngineStatus { return r.engineStatus() }

// agentEnded publishes agent.completed or agent.error for the session of
// info, with the exit status or the error.
func (r *Runner) agentEnded(t plugin.Topic[plugin.AgentEnded], info session.Info, p plugin.AgentEnded) {
	p.Session = info.ID
	r.opts.Bus.PublishCore(t.Event(info.Group, p))
}

// SetPaused stops (true) or resumes starting sessions for events. Sessions
// opened with Open still start, and running ones go on.
func (r *Runner) SetPaused(paused bool) {
	r.paused.Store(paused)
	r.pauseWarm(paused)
}

// Paused reports whether sessions for events are paused.
func (r *Runner) Paused() bool { return r.paused.Load() }

// Spawn starts agent sessions for the events that name a configured group
// ([groups.NAME] in config.toml) with one of its topics; the payload's
// text is the prompt (plugin.Inbound, plugin.TaskTrigger: decoded once,
// here). Events of other groups, those with no text and all while paused
// are logged and dropped; a plugin's dropped event gets a channel.reply
// saying why, so that its channel can tell the sender. It runs until the
// subscription closes.
func (r *Runner) Spawn(sub *events.Subscription) {
	for ev := range sub.C() {
		in := spawnEvent(ev)
		g, ok := r.cfg.Groups[ev.Group]
		if !ok || !slices.Contains(g.Topics, ev.Topic) {
			r.log.Info("event dropped: its group is not configured to start agent sessions ([groups.NAME] in config.toml)",
				"topic", ev.Topic, "group", ev.Group, "source", ev.Source, "event", ev.ID)
			why := fmt.Sprintf("group %s does not start agent sessions for %s: add [groups.%s] to config.toml", ev.Group, ev.Topic, ev.Group)
			r.answer(in, plugin.TopicChannelReply, in.reply(why))
			r.taskEnded(in, errors.New(why))
			continue
		}
		if r.paused.Load() {
			r.log.Info("event dropped: sessions for events are paused (carapace resume)", "topic", ev.Topic, "group", ev.Group, "source", ev.Source, "event", ev.ID)
			_ = r.audit.Write(&audit.Entry{Source: "core", Group: ev.Group, Topic: ev.Topic, ID: ev.ID, Stage: audit.StageEvent,
				Outcome: audit.OutcomeRejected, Reason: "paused: no session starts for events until resumed"})
			r.answer(in, plugin.TopicChannelReply, in.reply("paused: no agent session starts for events until carapace resume"))
			r.taskEnded(in, errors.New("paused: no agent session starts for events until carapace resume"))
			continue
		}
		if strings.TrimSpace(in.Text) == "" {
			r.log.Warn("event dropped: no text for the agent", "topic", ev.Topic, "group", ev.Group, "source", ev.Source, "event", ev.ID)
			r.answer(in, plugin.TopicChannelReply, in.reply("the message has no text for the agent"))
			r.taskEnded(in, errors.New("the task has no prompt"))
			continue
		}
		go r.runForEvent(in)
	}
}

// spawning is an event that may start a session, with its payload decoded.
type spawning struct {
	*plugin.Event
	plugin.TaskTrigger // message.inbound's fields, and a scheduled run's
}

// spawnEvent decodes ev's payload. A member of the wrong type (a text
// that is not a string) is left empty and the others are kept, reply_to
// above all: such an event has no text, and its channel is told so.
func spawnEvent(ev *plugin.Event) spawning {
	in := spawning{Event: ev}
	_ = ev.Decode(&in.TaskTrigger)
	return in
}

// taskRun returns the run id of the scheduler's own task.triggered event
// (false for any other event: a plugin's task.triggered is its own
// business).
func (in spawning) taskRun() (int64, bool) {
	if in.Source != "core" || in.Topic != plugin.TopicTaskTriggered.Name() {
		return 0, false
	}
	return in.Run, in.Run > 0
}

// taskEnded tells TaskRuns how the run of in ended, if it is one.
func (r *Runner) taskEnded(in spawning, err error) {
	run, ok := in.taskRun()
	if !ok || r.opts.TaskRuns == nil {
		return
	}
	if ferr := r.opts.TaskRuns.Finished(context.Background(), run, err); ferr != nil {
		r.log.Warn("could not record how a task run ended", "run", run, "err", ferr)
	}
}

// reply is the ChannelReply to in, with an error when no session ran: the
// event's reply_to goes back as it came, byte for byte.
func (in spawning) reply(err string) plugin.ChannelReply {
	return plugin.ChannelReply{Plugin: in.Source, Event: in.ID, ReplyTo: in.ReplyTo, Error: err}
}

// answer sends a plugin's event its channel.started or channel.reply (to
// that plugin alone: core/loader routes channel.* by ChannelReply.Plugin).
// Events of the core itself are not answered.
func (r *Runner) answer(in spawning, topic plugin.Topic[plugin.ChannelReply], rep plugin.ChannelReply) {
	if in.Source == "" || in.Source == "core" {
		return
	}
	ev, err := topic.Event(in.Group, rep)
	if err == nil {
		ev.Correlation = in.ID
	}
	r.opts.Bus.PublishCore(ev, err)
}

// runForEvent runs one agent session for in and logs how it went. The
// session waits in its group's queue when the group is busy; past the
// queue the event is dropped (logged by openContainerSession). A plugin's
// event is answered: channel.started once the session runs, channel.reply
// with the agent's output when it ends, both to that plugin alone and with
// the event's reply_to as it was (the target never comes from the agent).
func (r *Runner) runForEvent(in spawning) {
	ctx := context.Background()
	reply := in.reply("")
	answer := func(topic plugin.Topic[plugin.ChannelReply], rep plugin.ChannelReply) { r.answer(in, topic, rep) }
	origin := in.Source
	if _, ok := in.taskRun(); ok {
		origin = tasks.OriginTask
	}
	var taint *provenance.Taint
	if in.Untrusted {
		taint = &provenance.Taint{Source: "the event " + in.Topic + " from " + in.Source + " (marked untrusted)", Time: time.Now().UTC()}
	}
	sess, agent, err := r.openContainerSession(ctx, api.SessionRequest{Group: in.Group, Runtime: "container", Prompt: in.Text,
		Conversation: textutil.Clip(in.Conversation, 200)}, origin, taint, nil)
	if err != nil {
		r.log.Warn("event dropped: no agent session could start", "topic", in.Topic, "group", in.Group, "event", in.ID, "err", err)
		_ = r.audit.Write(&audit.Entry{Source: "core", Group: in.Group, Topic: in.Topic, ID: in.ID, Stage: audit.StageEvent,
			Outcome: audit.OutcomeRejected, Reason: "no agent session could start: " + textutil.Clip(textutil.OneLine(err.Error()), 500)})
		reply.Error = "no agent session could start: " + textutil.Clip(textutil.OneLine(err.Error()), 500)
		answer(plugin.TopicChannelReply, reply)
		r.taskEnded(in, errors.New(reply.Error))
		return
	}
	if run, ok := in.taskRun(); ok && r.opts.TaskRuns != nil {
		if err := r.opts.TaskRuns.Started(ctx, run, sess.ID); err != nil {
			r.log.Warn("could not record a task run's session", "run", run, "session", sess.ID, "err", err)
		}
	}
	defer r.setOrigin(sess.ID, "")
	r.log.Info("agent session started for an event", "session", sess.ID, "group", in.Group, "topic", in.Topic, "event", in.ID)
	reply.Session = sess.ID
	answer(plugin.TopicChannelStarted, reply)
	var out tail
	answered := false
	// The answer goes as soon as the agent is done: when its entrypoint
	// says so (Done, before the engine has torn the container down), else
	// when the container has gone (Exit or Error). What comes after Done
	// is not the agent's answer; the session lasts until the container
	// has gone either way.
	end := func() {
		if answered {
			return
		}
		answered = true
		reply.Text = out.String()
		answer(plugin.TopicChannelReply, reply)
		switch {
		case reply.Error != "":
			r.taskEnded(in, errors.New(reply.Error))
		case reply.Exit == nil:
			r.taskEnded(in, errors.New("the agent's exit status is unknown"))
		case *reply.Exit != 0:
			r.taskEnded(in, fmt.Errorf("the agent exited with status %d", *reply.Exit))
		default:
			r.taskEnded(in, nil)
		}
	}
	for o := range agent.Output {
		switch {
		case o.Done != nil && !answered:
			reply.Exit = o.Done
			r.log.Info("agent said it is done", "session", sess.ID, "exit", *o.Done, "output_bytes", out.total)
			end()
		case o.Exit != nil:
			if !answered {
				reply.Exit = o.Exit
			}
			r.log.Info("agent session for an event ended", "session", sess.ID, "exit", *o.Exit, "output_bytes", out.total)
		case o.Error != "":
			if !answered {
				reply.Error = o.Error
			}
			r.log.Warn("agent session for an event failed", "session", sess.ID, "err", o.Error)
		case o.Stream == "stdout" && !answered:
			out.write(o.Data)
		}
	}
	end()
	cctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	_ = r.Close(cctx, sess.ID)
}

// maxAnswer bounds the answer a channel.reply carries (an event is at most
// events.MaxEventSize): the head of a longer output, and a note.
const maxAnswer = 48 << 10

// tail keeps the first maxAnswer bytes of the agent's output and counts
// the rest.
type tail struct {
	b     strings.Builder
	total int
}

func (t *tail) write(s string) {
	t.total += len(s)
	if room := maxAnswer - t.b.Len(); room > 0 {
		t.b.WriteString(textutil.Clip(s, room))
	}
}

func (t *tail) String() string {
	s := strings.TrimSpace(t.b.String())
	if t.total > maxAnswer {
		s += fmt.Sprintf("\n\n(the answer was %d bytes; the first %d are shown)", t.total, maxAnswer)
	}
	return s
}

// setOrigin records (or, with "", forgets) the plugin whose event started
// session id, for SessionOrigin.
func (r *Runner) setOrigin(id, plugin string) {
	r.ctrs.mu.Lock()
	defer r.ctrs.mu.Unlock()
	if r.origins == nil {
		r.origins = map[string]string{}
	}
	if plugin == "" {
		delete(r.origins, id)
		return
	}
	r.origins[id] = plugin
}

// SessionOrigin names the plugin whose event started session id, "" if
// none did.
func (r *Runner) SessionOrigin(id string) string {
	r.ctrs.mu.Lock()
	defer r.ctrs.mu.Unlock()
	return r.origins[id]
}

// startProvenance records what started session info, before its agent
// can make a call: the URLs in prompt — what the user wrote — are given;
// a session started by an untrusted event (taint not nil) gives none and
// starts tainted, audited with the event. A session of a named
// conversation (conv not nil) carries the conversation's taint over
// (conversationTaint).
func (r *Runner) startProvenance(info session.Info, prompt string, taint *provenance.Taint, conv *convRef) {
	s, ok := r.sessions.State(info.ID)
	if !ok {
		return
	}
	if taint == nil {
		if dropped := s.Provenance.Give(prompt); dropped > 0 {
			r.log.Warn("provenance store full: URLs of the prompt are not given (their calls will wait for the user)", "session", info.ID, "dropped", dropped)
		}
	} else if s.Provenance.Taint(*taint) {
		_ = r.audit.Write(&audit.Entry{Source: "core", Session: info.ID, Group: info.Group, Stage: audit.StageTaint, Outcome: audit.OutcomeTainted,
			Reason: "session tainted from its start: " + textutil.Clip(taint.Source, 300) + "; its egress calls wait for the user"})
	}
	if conv != nil {
		r.conversationTaint(info, s.Provenance, conv)
	}
}

// conversationTaint joins the taint of session info to that of its named
// conversation conv, both ways, before the session's agent can make a
// call (docs/SECURITY.md, "Provenance and taint"):
//
//   - a session that resumes a tainted conversation has the earlier
//     sessions' untrusted text in its model's context: it starts tainted,
//     with the conversation's first taint as the reason, audited;
//   - a session that starts its conversation anew (no transcript) clears
//     the conversation's record, unless the session that wrote it still
//     runs (it may yet write the transcript): then it starts tainted too;
//   - the session's own first taint, whenever it comes, is recorded as the
//     conversation's at once, on disk, before the call that brought it is
//     answered (provenance.Store.OnTaint).
//
// The record is the core's (core/home's ConversationsDir), out of the
// agent's reach. What cannot be read or kept fails closed where it can:
// an unreadable record or an unusable folder taints the session.
func (r *Runner) conversationTaint(info session.Info, pv *provenance.Store, conv *convRef) {
	taintFromStart := func(t provenance.Taint, why string) {
		if pv.Taint(t) {
			_ = r.audit.Write(&audit.Entry{Source: "core", Session: info.ID, Group: info.Group, Stage: audit.StageTaint, Outcome: audit.OutcomeTainted,
				Reason: "session tainted from its start: " + textutil.Clip(why, 400) + "; its egress calls wait for the user"})
		}
	}
	convs, err := r.conversations()
	if err != nil {
		r.log.Error("conversation taint records unusable: the session starts tainted", "session", info.ID, "err", err)
		taintFromStart(provenance.Unreadable(time.Now()), "the records of which conversations are tainted are unusable")
		return
	}
	rec, found, err := convs.Lookup(conv.id)
	switch {
	case err != nil:
		r.log.Error("conversation taint record unreadable: the session starts tainted", "session", info.ID, "conversation", conv.id, "err", err)
		taintFromStart(provenance.Unreadable(time.Now()), "its conversation's taint record is unreadable")
	case found && (conv.resume || r.live(rec.Session)):
		taintFromStart(rec.Taint, fmt.Sprintf("it resumes conversation %s, which session %s tainted: %s", conv.id, rec.Session, textutil.Clip(rec.Taint.Reason(), 300)))
		r.log.Info("session resumes a tainted conversation", "session", info.ID, "conversation", conv.id, "tainted_by", rec.Session)
	case found:
		if err := convs.Clear(conv.id); err != nil {
			r.log.Error("could not clear a new conversation's stale taint record: the session starts tainted", "session", info.ID, "conversation", conv.id, "err", err)
			taintFromStart(rec.Taint, "its conversation's stale taint record could not be cleared: "+textutil.Clip(rec.Taint.Reason(), 300))
		} else {
			r.log.Info("conversation starts anew: its taint record is cleared", "session", info.ID, "conversation", conv.id)
		}
	}
	pv.OnTaint(func(t provenance.Taint) {
		if t.Earlier {
			return // the conversation's own record, carried over
		}
		written, err := convs.Record(conv.id, info.ID, t)
		switch {
		case err != nil:
			r.log.Error("conversation taint not recorded: the next session of this conversation will not start tainted", "session", info.ID, "conversation", conv.id, "err", err)
		case written:
			r.log.Info("conversation tainted", "session", info.ID, "conversation", conv.id, "tool", t.Tool)
		}
	})
}

// conversations returns the records of tainted conversations, opened once.
func (r *Runner) conversations() (*provenance.Conversations, error) {
	r.convOnce.Do(func() { r.convs, r.convErr = provenance.NewConversations(r.opts.Home.ConversationsDir()) })
	return r.convs, r.convErr
}

// live reports whether session id is open.
func (r *Runner) live(id string) bool {
	_, ok := r.sessions.State(id)
	return ok
}
