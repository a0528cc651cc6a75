package plugintest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/core/plugin"
)

// FakeCredentials is an in-memory credential store, safe for concurrent use.
// It remembers which keys were read, so a test can check that a handler
// reads only the credentials it declares. The zero value and nil are empty
// stores.
type FakeCredentials struct {
	mu    sync.Mutex
	m     map[string]string
	reads []string
}

// NewFakeCredentials returns a store holding a copy of m (key → secret).
func NewFakeCredentials(m map[string]string) *FakeCredentials {
	return &FakeCredentials{m: maps.Clone(m)}
}

// Get returns the secret of key, and records the read.
func (c *FakeCredentials) Get(key string) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads = append(c.reads, key)
	v, ok := c.m[key]
	return v, ok
}

// Has reports whether key is set, without counting as a read.
func (c *FakeCredentials) Has(key string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[key]
	return ok
}

// Keys returns the keys that are set, sorted.
func (c *FakeCredentials) Keys() []string {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.m))
}

// Set sets key to value, as `carapace auth set` would.
func (c *FakeCredentials) Set(key, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	c.m[key] = value
}

// Delete unsets key.
func (c *FakeCredentials) Delete(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// Reads returns the keys read so far, in order, repeats included (keys
// that were not set too).
func (c *FakeCredentials) Reads() []string {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reads)
}

// secrets returns the stored values labelled by key, for leak checks.
func (c *FakeCredentials) secrets() []secret {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []secret
	for _, k := range slices.Sorted(maps.Keys(c.m)) {
		out = append(out, secret{label: fmt.Sprintf("the value of credential %q", k), value: c.m[k]})
	}
	return out
}

// DefaultPlugin is the plugin name Services and Harness use when none is
// given (Conformance uses the plugin folder's name).
const DefaultPlugin = "test-plugin"

// Services implements plugin.Services the way the core does, from fields a
// test fills in. Use a pointer; it is safe for concurrent use once handed
// to a handler (set the fields before).
//
// GetSessionInfo and GetAuditLog are scoped to the request in ctx, as in
// the core: the Harness puts it there (see RequestContext); outside a
// request they fail with plugin.ErrNoRequest.
type Services struct {
	// Plugin is the name of the plugin these services belong to: the
	// Source stamped on published events (default DefaultPlugin).
	Plugin string
	// Credentials backs ReadCredential; nil means none are set.
	Credentials *FakeCredentials
	// Tools is what GetToolCatalog returns.
	Tools []plugin.ToolInfo
	// Audit is the whole audit log; GetAuditLog returns the entries of the
	// request's group that match the filter, oldest first.
	Audit []plugin.AuditEntry
	// Channel makes the plugin a channel plugin, which may publish events
	// and ask Paused; otherwise they fail with plugin.ErrNotChannel.
	Channel bool
	// Groups are the groups the plugin is granted (allowed_groups); none
	// means every group. PublishEvent refuses an event of another group,
	// or of no group when some are granted, with
	// plugin.ErrGroupNotGranted, as the core does.
	Groups []string
	// SessionStart is the session's start in GetSessionInfo; zero means the
	// time of the request.
	SessionStart time.Time
	// Surface grants the surface capability: Decide, CoreStatus, SetPaused
	// and StopSession work; otherwise they fail with plugin.ErrNotSurface.
	Surface bool
	// Status is what CoreStatus returns; Paused answers its Paused (and
	// SetPaused sets it).
	Status plugin.CoreStatus
	// DecideFunc, if set, answers each decision (an error wrapping
	// plugin.ErrAlreadyDecided, say); nil accepts them all.
	DecideFunc func(plugin.Decision) error

	mu        sync.Mutex
	calls     []string // the methods called, in order (Calls)
	events    []plugin.Event
	dropped   []string
	health    []Health
	decisions []plugin.Decision
	stopped   []string
}

var _ plugin.Services = (*Services)(nil)

// called records a call of method (its protocol name, as Calls reports
// it).
func (s *Services) called(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, method)
}

// Calls returns the services the handler called, in order, by their
// method names on the core↔plugin protocol ("publish_event", "paused",
// "core_status", ...): what a test counts to learn what its plugin's work
// costs in calls to the core.
func (s *Services) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *Services) pluginName() string {
	if s.Plugin == "" {
		return DefaultPlugin
	}
	return s.Plugin
}

// GetAuditLog implements plugin.Services.
func (s *Services) GetAuditLog(ctx context.Context, f plugin.AuditFilter) ([]plugin.AuditEntry, error) {
	s.called(pluginproto.MethodAuditLog)
	req, ok := requestFrom(ctx)
	if !ok {
		return nil, plugin.ErrNoRequest
	}
	var out []plugin.AuditEntry
	for _, e := range s.Audit {
		if e.Group != req.Group {
			continue
		}
		switch {
		case f.Correlation != "" && e.Correlation != f.Correlation,
			f.Topic != "" && e.Topic != f.Topic,
			f.Outcome == "error" && e.Outcome != "error" && e.Outcome != "rejected",
			f.Outcome != "" && f.Outcome != "error" && e.Outcome != f.Outcome,
			!f.Since.IsZero() && e.Time.Before(f.Since),
			!f.Until.IsZero() && !e.Time.Before(f.Until):
			continue
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	if n := min(f.LastN, 1000); n > 0 && len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}

// GetToolCatalog implements plugin.Services.
func (s *Services) GetToolCatalog(context.Context) ([]plugin.ToolInfo, error) {
	s.called(pluginproto.MethodToolCatalog)
	return slices.Clone(s.Tools), nil
}

// GetSessionInfo implements plugin.Services.
func (s *Services) GetSessionInfo(ctx context.Context) (plugin.SessionInfo, error) {
	s.called(pluginproto.MethodSessionInfo)
	req, ok := requestFrom(ctx)
	if !ok {
		return plugin.SessionInfo{}, plugin.ErrNoRequest
	}
	start := s.SessionStart
	if start.IsZero() {
		start = req.Time
	}
	return plugin.SessionInfo{ID: req.Session, Group: req.Group, Started: start}, nil
}

// ReadCredential implements plugin.Services: plugin.ErrNoCredential when
// the key is not set.
func (s *Services) ReadCredential(_ context.Context, key string) (string, error) {
	s.called(pluginproto.MethodReadCredential)
	v, ok := s.Credentials.Get(key)
	if !ok {
		return "", plugin.ErrNoCredential
	}
	return v, nil
}

// PublishEvent implements plugin.Services: it records a copy of the event,
// stamped with the plugin's name as Source, an id and the time, as the core
// does; plugin.ErrNotChannel unless Channel is set.
func (s *Services) PublishEvent(_ context.Context, ev *plugin.Event) error {
	s.called(pluginproto.MethodPublishEvent)
	if !s.Channel {
		return plugin.ErrNotChannel
	}
	if ev == nil {
		return errors.New("plugintest: PublishEvent(nil)")
	}
	if plugin.CoreTopic(ev.Topic) {
		return fmt.Errorf("publish event %q: %w", ev.Topic, plugin.ErrCoreTopic)
	}
	if len(s.Groups) > 0 && !slices.Contains(s.Groups, ev.Group) {
		return fmt.Errorf("%w: %s is not granted group %q; it is granted %s", plugin.ErrGroupNotGranted, s.pluginName(), ev.Group, strings.Join(s.Groups, ", "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := *ev
	e.Payload = slices.Clone(ev.Payload)
	e.Source = s.pluginName()
	e.ID = fmt.Sprintf("test-event-%d", len(s.events)+1)
	e.Time = time.Now().UTC()
	s.events = append(s.events, e)
	return nil
}

// AuditDropped implements plugin.Services: it records what (see
// Dropped); plugin.ErrNotChannel unless Channel is set.
func (s *Services) AuditDropped(_ context.Context, what string) error {
	s.called(pluginproto.MethodAuditDropped)
	if !s.Channel {
		return plugin.ErrNotChannel
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropped = append(s.dropped, what)
	return nil
}

// Health is one ReportHealth call.
type Health struct {
	Degraded bool
	Why      string
}

// ReportHealth implements plugin.Services: it records the report (see
// Reports).
func (s *Services) ReportHealth(_ context.Context, degraded bool, why string) error {
	s.called(pluginproto.MethodReportHealth)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health = append(s.health, Health{Degraded: degraded, Why: why})
	return nil
}

// Reports returns what ReportHealth recorded, oldest first.
func (s *Services) Reports() []Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.health)
}

// Dropped returns what AuditDropped recorded, oldest first.
func (s *Services) Dropped() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.dropped)
}

// Events returns the events published so far, oldest first.
func (s *Services) Events() []plugin.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Decide implements plugin.Services: it records the decision (see
// Decisions) and answers with DecideFunc.
func (s *Services) Decide(_ context.Context, d plugin.Decision) error {
	s.called(pluginproto.MethodDecide)
	if !s.Surface {
		return plugin.ErrNotSurface
	}
	if s.DecideFunc != nil {
		if err := s.DecideFunc(d); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decisions = append(s.decisions, d)
	return nil
}

// Decisions returns the decisions made so far, oldest first.
func (s *Services) Decisions() []plugin.Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.decisions)
}

// CoreStatus implements plugin.Services.
func (s *Services) CoreStatus(context.Context) (plugin.CoreStatus, error) {
	s.called(pluginproto.MethodCoreStatus)
	if !s.Surface {
		return plugin.CoreStatus{}, plugin.ErrNotSurface
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Status, nil
}

// Paused implements plugin.Services: Status.Paused;
// plugin.ErrNotChannel unless Channel is set.
func (s *Services) Paused(context.Context) (bool, error) {
	s.called(pluginproto.MethodPaused)
	if !s.Channel {
		return false, plugin.ErrNotChannel
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Status.Paused, nil
}

// SetPaused implements plugin.Services: Status.Paused follows it.
func (s *Services) SetPaused(_ context.Context, paused bool) error {
	s.called(pluginproto.MethodSetPaused)
	if !s.Surface {
		return plugin.ErrNotSurface
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Status.Paused = paused
	return nil
}

// StopSession implements plugin.Services: it records the session (see
// Stopped).
func (s *Services) StopSession(_ context.Context, id string) error {
	s.called(pluginproto.MethodStopSession)
	if !s.Surface {
		return plugin.ErrNotSurface
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = append(s.stopped, id)
	return nil
}

// Stopped returns the sessions StopSession was asked to stop, in order.
func (s *Services) Stopped() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.stopped)
}
