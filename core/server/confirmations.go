package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/confirm"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/session"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// newGate returns the confirmation gate of config.toml's [confirm], whose
// every change is audited and published on the bus.
func (s *Server) newGate() *confirm.Gate {
	return confirm.New(confirm.Options{
		Timeout:    s.cfg.Confirm.Timeout.Duration,
		MaxPending: s.cfg.Confirm.MaxPending,
		Observe:    s.observeConfirmation,
	})
}

// observeConfirmation records a confirmation's change: an audit line
// (requested, approved, denied, expired, withdrawn), a log line, and
// confirmation.requested or confirmation.resolved on the bus for the
// surfaces. Called with the gate's lock held: nothing here waits. A new
// confirmation that cannot be audited is refused.
func (s *Server) observeConfirmation(c confirm.Confirmation) error {
	e := &audit.Entry{Source: "core", Session: c.Session, Group: c.Group, Topic: "tool.invoke." + c.Tool, Correlation: c.Correlation,
		Stage: audit.StageConfirm, Confirmation: c.ID}
	topic := plugin.TopicConfirmationResolved
	switch c.Decision {
	case "":
		topic = plugin.TopicConfirmationRequested
		e.Outcome, e.Reason = audit.OutcomePending, "waits for the user until "+c.Expires.Format(time.RFC3339)
		s.log.Warn("confirmation required", "id", c.ID, "tool", c.Tool, "group", c.Group, "session", c.Session,
			"expires", c.Expires.Format(time.RFC3339), "approve", "carapace confirm approve "+api.ShortID(c.ID))
	case confirm.Approved, confirm.Denied:
		e.Outcome, e.Reason = string(c.Decision), "decided on "+c.Surface
		if c.Decider != "" {
			e.Reason += " by " + textutil.OneLine(c.Decider)
		}
		s.log.Info("confirmation "+string(c.Decision), "id", c.ID, "tool", c.Tool, "surface", c.Surface, "decider", c.Decider)
	case confirm.Expired:
		e.Outcome, e.Reason = audit.OutcomeExpired, "nobody answered before "+c.Expires.Format(time.RFC3339)
	default:
		e.Outcome, e.Reason = audit.OutcomeWithdrawn, c.Reason
	}
	if err := s.audit.Write(e); err != nil && c.Pending() {
		return fmt.Errorf("audit the confirmation: %w", err)
	}
	s.bus.PublishCore(topic.Event(c.Group, confirmationView(c, true)))
	return nil
}

// maxEventArguments bounds the arguments a confirmation event carries; a
// larger one goes without them (arguments_omitted), and surfaces fetch it.
const maxEventArguments = 32 << 10

// confirmationView is the control API's view of c; for an event, arguments
// too large for one are left out.
func confirmationView(c confirm.Confirmation, event bool) api.Confirmation {
	v := api.Confirmation{
		ID: c.ID, Tool: c.Tool, Group: c.Group, Session: c.Session, Correlation: c.Correlation, ArgsHash: c.ArgsHash,
		Arguments: json.RawMessage(c.Display), Summary: c.Summary, CreatedAt: c.Created, ExpiresAt: c.Expires,
		Decision: string(c.Decision), Surface: c.Surface, Decider: c.Decider, Reason: c.Reason,
	}
	if len(c.Display) == 0 {
		v.Arguments = nil
	}
	for _, h := range c.Hidden {
		v.Hidden = append(v.Hidden, api.Hidden{Path: h.Path, Kind: h.Kind, Chars: h.Chars})
	}
	if !c.Decided.IsZero() {
		t := c.Decided
		v.DecidedAt = &t
	}
	if event && len(v.Arguments) > maxEventArguments {
		v.Arguments, v.ArgumentsOmitted = nil, true
	}
	return v
}

// Confirmations implements control.Backend.
func (s *Server) Confirmations(_ context.Context, recent bool) []api.Confirmation {
	list := s.gate.Pending()
	if recent {
		list = s.gate.Recent()
	}
	out := make([]api.Confirmation, 0, len(list))
	for _, c := range list {
		out = append(out, confirmationView(c, false))
	}
	return out
}

// RawArguments implements control.Backend: a pending confirmation's
// arguments as they run. Reading them is audited: they may hold a secret
// the display hides.
func (s *Server) RawArguments(_ context.Context, id string) (json.RawMessage, error) {
	if s.gate == nil {
		return nil, fmt.Errorf("%w: the core is starting", api.ErrConflict)
	}
	c, ok := s.gate.Get(id)
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: no confirmation %s", api.ErrNotFound, id)
	case !c.Pending():
		return nil, fmt.Errorf("%w: confirmation %s is already decided (%s): its arguments are kept only while it waits", api.ErrConflict, id, c.Decision)
	}
	if len(c.Hidden) > 0 {
		_ = s.audit.Write(&audit.Entry{Source: "core", Session: c.Session, Group: c.Group, Topic: "tool.invoke." + c.Tool,
			Stage: audit.StageConfirm, Outcome: audit.OutcomePending, Confirmation: c.ID,
			Reason: "the arguments as they run, which the display redacts, were shown on the control API"})
	}
	return json.RawMessage(c.Arguments), nil
}

// Decide implements control.Backend. A refused decision is audited too.
func (s *Server) Decide(_ context.Context, d api.Decision) (api.Confirmation, error) {
	if s.gate == nil { // a plugin's Init, before the gate exists
		return api.Confirmation{}, fmt.Errorf("%w: no confirmation can be decided yet: the core is starting", api.ErrConflict)
	}
	c, err := s.gate.Decide(confirm.Decide{ID: d.ID, Approve: d.Approve, ArgsHash: d.ArgsHash, Surface: d.Surface, Decider: d.Decider, Raw: d.Raw})
	if err == nil {
		return confirmationView(c, false), nil
	}
	if !errors.Is(err, confirm.ErrNotFound) {
		verb := "denial"
		if d.Approve {
			verb = "approval"
		}
		reason := fmt.Sprintf("%s on %s refused: %s", verb, d.Surface, textutil.OneLine(err.Error()))
		if d.Decider != "" {
			reason = fmt.Sprintf("%s on %s by %s refused: %s", verb, d.Surface, textutil.OneLine(d.Decider), textutil.OneLine(err.Error()))
		}
		_ = s.audit.Write(&audit.Entry{Source: "core", Session: c.Session, Group: c.Group, Topic: "tool.invoke." + c.Tool,
			Stage: audit.StageConfirm, Outcome: audit.OutcomeRejected, Confirmation: d.ID, Reason: textutil.Clip(reason, 1000)})
		s.log.Info("confirmation decision refused", "id", d.ID, "surface", d.Surface, "err", err)
	}
	var decided *confirm.ErrDecided
	switch {
	case errors.Is(err, confirm.ErrNotFound):
		return api.Confirmation{}, fmt.Errorf("%w: %w", api.ErrNotFound, err)
	case errors.Is(err, confirm.ErrHidden):
		return confirmationView(c, false), fmt.Errorf("%w: %w: review them as they run with carapace confirm show --raw %s, and approve there with carapace confirm approve --raw %s",
			api.ErrConflict, err, api.ShortID(c.ID), api.ShortID(c.ID))
	case errors.As(err, &decided), errors.Is(err, confirm.ErrMismatch):
		return confirmationView(c, false), fmt.Errorf("%w: %w", api.ErrConflict, err)
	case errors.Is(err, confirm.ErrInvalid):
		return api.Confirmation{}, fmt.Errorf("%w: %w", api.ErrInvalid, err)
	}
	return api.Confirmation{}, err
}

// observeSession publishes session.opened and session.closed; a session
// that closes withdraws its pending confirmations.
func (s *Server) observeSession(info session.Info, opened bool) {
	topic := plugin.TopicSessionOpened
	if !opened {
		topic = plugin.TopicSessionClosed
		if s.gate != nil {
			s.gate.WithdrawSession(info.ID, "the session closed")
		}
	}
	s.bus.PublishCore(topic.Event(info.Group, s.agents.View(info)))
}

// Watch implements control.Backend: a cut-off subscription to the watch
// topics on the bus, taken before the snapshot so that nothing falls
// between them.
func (s *Server) Watch(ctx context.Context) (*control.Watch, error) {
	sub, err := s.bus.SubscribeCutOff(api.WatchTopics...)
	if err != nil {
		if errors.Is(err, events.ErrClosed) {
			return nil, fmt.Errorf("the core is shutting down: %w", api.ErrConflict)
		}
		return nil, fmt.Errorf("watch: %w", err)
	}
	st := s.Status(ctx)
	snap := api.WatchEvent{Type: api.WatchSnapshot, Time: time.Now().UTC(), Status: &st,
		Sessions: s.Sessions(ctx), Confirmations: s.Confirmations(ctx, false), Plugins: st.Plugins}
	if ts, err := s.Tasks(ctx); err == nil {
		snap.Tasks = ts
	} else {
		s.log.Warn("watch: the tasks could not be listed for the snapshot", "err", err)
	}
	out := make(chan api.WatchEvent)
	done := make(chan struct{})
	var (
		mu    sync.Mutex
		ended string
	)
	end := func(why string) {
		mu.Lock()
		ended = why
		mu.Unlock()
	}
	go func() {
		defer close(out)
		for {
			select {
			case ev, ok := <-sub.C():
				if !ok {
					end("the core is stopping")
					return
				}
				if ev.Source != "core" {
					continue // the watch shows the core's own changes (plugins cannot publish these topics either)
				}
				we, err := watchEvent(ev)
				if err != nil {
					s.log.Warn("watch: an event could not be converted; skipped", "topic", ev.Topic, "err", err)
					continue
				}
				select {
				case out <- we:
				case <-sub.Cut():
					end(cutOff)
					return
				case <-done:
					return
				}
			case <-sub.Cut():
				end(cutOff)
				return
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return &control.Watch{
		Snapshot: snap,
		Events:   out,
		Ended: func() string {
			mu.Lock()
			defer mu.Unlock()
			return ended
		},
		Close: func() { once.Do(func() { close(done); _ = sub.Close() }) },
	}, nil
}

// cutOff is why a watch that fell behind ends.
const cutOff = "the watcher fell behind and was cut off; watch again for a fresh snapshot"

// watchEvent turns a bus event of a watch topic into its line.
func watchEvent(ev *plugin.Event) (api.WatchEvent, error) {
	we := api.WatchEvent{Type: ev.Topic, Time: ev.Time}
	var err error
	switch ev.Topic {
	case api.WatchConfirmationRequested, api.WatchConfirmationResolved:
		we.Confirmation = new(api.Confirmation)
		err = ev.Decode(we.Confirmation)
	case api.WatchSessionOpened, api.WatchSessionClosed:
		we.Session = new(api.Session)
		err = ev.Decode(we.Session)
	case api.WatchPluginHealth:
		we.Plugin = new(api.PluginStatus)
		err = ev.Decode(we.Plugin)
	case api.WatchStatus:
		we.Status = new(api.Status)
		err = ev.Decode(we.Status)
	case api.WatchTaskCreated, api.WatchTaskChanged, api.WatchTaskFired, api.WatchTaskFinished, api.WatchTaskRemoved:
		var p plugin.TaskChange
		err = ev.Decode(&p)
		we.Task, we.TaskRun = &p.Task, p.Run
	}
	return we, err
}
