package loader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/session"
	"github.com/carapace-dev/carapace/internal/textutil"
	"github.com/carapace-dev/carapace/keychain"
)

// maxAuditEntries bounds one GetAuditLog answer.
const maxAuditEntries = 1000

// services are the core services handed to one plugin. Request-scoped
// methods read the session from ctx (the ctx the pipeline passed to Invoke;
// for an out-of-process plugin, the one pluginhost keeps for the call the
// plugin names), never from anything the plugin sends.
type services struct {
	l  *Loader
	st *pluginState
}

var _ plugin.Services = (*services)(nil)

// GetToolCatalog implements plugin.Services: within a request, the tools
// the request's group may use; outside one (Init), every tool.
func (v *services) GetToolCatalog(ctx context.Context) ([]plugin.ToolInfo, error) {
	sess, scoped := session.FromContext(ctx)
	out := []plugin.ToolInfo{}
	for _, t := range v.l.catalog.List() {
		if scoped && !t.Allowed(sess.Group) {
			continue
		}
		out = append(out, plugin.ToolInfo{Name: t.Name, Plugin: t.Plugin, Description: t.Description, RiskLevel: t.RiskLevel})
	}
	return out, nil
}

// GetSessionInfo implements plugin.Services.
func (v *services) GetSessionInfo(ctx context.Context) (plugin.SessionInfo, error) {
	sess, ok := session.FromContext(ctx)
	if !ok {
		return plugin.SessionInfo{}, plugin.ErrNoRequest
	}
	return plugin.SessionInfo{ID: sess.ID, Group: sess.Group, Started: sess.Started}, nil
}

// GetAuditLog implements plugin.Services: entries of the request's group
// only. The filter has no group or session field to override that.
func (v *services) GetAuditLog(ctx context.Context, f plugin.AuditFilter) ([]plugin.AuditEntry, error) {
	sess, ok := session.FromContext(ctx)
	if !ok {
		return nil, plugin.ErrNoRequest
	}
	entries, err := audit.Read(v.l.opts.Home.AuditLog(), audit.Filter{Group: sess.Group, Correlation: f.Correlation, Outcome: f.Outcome})
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	out := []plugin.AuditEntry{}
	for _, e := range entries {
		if e.Group != sess.Group || // belt and braces: the filter already did
			f.Topic != "" && e.Topic != f.Topic ||
			!f.Since.IsZero() && e.Time.Before(f.Since) ||
			!f.Until.IsZero() && !e.Time.Before(f.Until) {
			continue
		}
		ae := plugin.AuditEntry{
			Time: e.Time, Session: e.Session, Group: e.Group, Source: e.Source, Topic: e.Topic,
			Correlation: e.Correlation, Stage: e.Stage, Outcome: e.Outcome, Code: e.Code,
			Reason: e.Reason, Field: e.Field, DurationMS: e.DurationMS,
		}
		if e.Source != v.st.name && (e.Stage == audit.StageHandler || e.Stage == audit.StageService || e.Stage == audit.StageCore || e.Stage == audit.StageChannel) {
			// Another plugin's internal detail (paths, hosts) stays in
			// the host's log, as get_diagnostics keeps it from the agent.
			ae.Reason = ""
		}
		out = append(out, ae)
	}
	n := maxAuditEntries
	if f.LastN > 0 && f.LastN < n {
		n = f.LastN
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}

// ReadCredential implements plugin.Services: the plugin's own credentials,
// and no other's. The read is audited by key name; the value never is.
func (v *services) ReadCredential(ctx context.Context, key string) (string, error) {
	if err := keychain.CheckKey(key); err != nil {
		return "", err
	}
	val, err := v.l.creds.Get(v.st.name, key)
	outcome, reason := audit.OutcomeOK, "credential read: "+key
	switch {
	case errors.Is(err, keychain.ErrNotFound):
		outcome, reason, err = audit.OutcomeError, "credential not set: "+key, plugin.ErrNoCredential
	case err != nil:
		outcome, reason = audit.OutcomeError, "credential unreadable: "+key
		v.l.log.Error("credential unreadable", "plugin", v.st.name, "key", key, "err", err)
		err = fmt.Errorf("credential %s of plugin %s could not be read (see the core's log)", key, v.st.name)
	}
	e := &audit.Entry{Source: v.st.name, Stage: audit.StageService, Outcome: outcome, Reason: reason}
	if sess, ok := session.FromContext(ctx); ok {
		e.Session, e.Group = sess.ID, sess.Group
	}
	_ = v.l.audit.Write(e)
	if err != nil {
		return "", err
	}
	return string(val), nil
}

// PublishEvent implements plugin.Services: channel plugins only, for the
// groups they are granted (grant.go). The core stamps the source, id and
// time, audits the event (topic and group, never the payload) and hands
// it to every healthy plugin subscribed to it and granted its group.
func (v *services) PublishEvent(ctx context.Context, ev *plugin.Event) error {
	if !v.channel() {
		return plugin.ErrNotChannel
	}
	if ev == nil || ev.Topic == "" {
		return errors.New("publish event: the topic is empty")
	}
	if plugin.CoreTopic(ev.Topic) {
		return fmt.Errorf("publish event %q: %w", textutil.Clip(ev.Topic, 64), plugin.ErrCoreTopic)
	}
	if !v.st.granted(ev.Group) {
		return v.l.refuseGroup(v.st, ev)
	}
	e := *ev
	e.Source, e.ID, e.Time = v.st.name, uuid.NewString(), time.Now().UTC()
	return v.l.publish(ctx, &e)
}

// AuditDropped implements plugin.Services: channel plugins only, one line
// of at most plugin.MaxAuditDropped bytes, at most dropRate a minute per
// plugin; the ones over it are counted in the next entry written.
func (v *services) AuditDropped(_ context.Context, what string) error {
	if !v.channel() {
		return plugin.ErrNotChannel
	}
	d := &v.st.dropped
	d.mu.Lock()
	if d.limit == nil {
		d.limit = rate.NewLimiter(rate.Every(time.Minute/dropRate), dropBurst)
	}
	if !d.limit.Allow() {
		d.skipped++
		d.mu.Unlock()
		return nil
	}
	skipped := d.skipped
	d.skipped = 0
	d.mu.Unlock()
	reason := textutil.Clip(textutil.OneLine(what), plugin.MaxAuditDropped)
	if skipped > 0 {
		reason += fmt.Sprintf(" (and %d more dropped before it, not logged one by one)", skipped)
	}
	return v.l.audit.Write(&audit.Entry{Source: v.st.name, Stage: audit.StageChannel, Outcome: audit.OutcomeDropped, Reason: reason})
}

// ReportHealth implements plugin.Services: it records whether the plugin
// is degraded and why; a change is published on the watch stream
// (plugin.health), logged and audited. It counts only while the plugin is
// loaded; a restart starts healthy.
func (v *services) ReportHealth(_ context.Context, degraded bool, why string) error {
	why = textutil.Clip(textutil.OneLine(why), plugin.MaxHealthProblem)
	switch {
	case !degraded:
		why = ""
	case strings.TrimSpace(why) == "":
		why = "the plugin reports itself degraded without saying why"
	}
	l, st := v.l, v.st
	l.mu.Lock()
	changed := st.degraded != why
	st.degraded = why
	serving := st.state == stateHealthy
	l.mu.Unlock()
	if !changed || !serving {
		return nil
	}
	l.healthChanged(st)
	if degraded {
		l.log.Error("plugin degraded: it serves calls but not all its work", "plugin", st.name, "problem", why)
		_ = l.audit.Write(&audit.Entry{Source: st.name, Stage: audit.StageCore, Outcome: audit.OutcomeError, Reason: "plugin degraded: " + why})
		return nil
	}
	l.log.Info("plugin no longer degraded", "plugin", st.name)
	_ = l.audit.Write(&audit.Entry{Source: st.name, Stage: audit.StageCore, Outcome: audit.OutcomeOK, Reason: "plugin no longer degraded"})
	return nil
}

// The rate of a plugin's AuditDropped entries: per minute, and the burst.
const (
	dropRate  = 60
	dropBurst = 30
)

// publish puts a plugin's event on the event bus, the one fan-out: the
// core's spawner, the plugins subscribed to its topic (plugin_events.go)
// and outside subscribers all get it from there. It is audited (topic and
// group, never the payload).
func (l *Loader) publish(ctx context.Context, ev *plugin.Event) error {
	if err := l.bus.Publish(ctx, ev); err != nil {
		return fmt.Errorf("publish event: %w", err)
	}
	_ = l.audit.Write(&audit.Entry{Source: ev.Source, Group: ev.Group, Topic: ev.Topic, Correlation: ev.Correlation, Stage: audit.StageEvent, Outcome: audit.OutcomePublished, ID: ev.ID})
	return nil
}

// channel reports whether the plugin is a channel plugin (its manifest
// provides channels): the services of channels are its.
func (v *services) channel() bool {
	return v.st.manifest != nil && len(v.st.manifest.Provides.Channels) > 0
}

// Paused implements plugin.Services: channel plugins only.
func (v *services) Paused(ctx context.Context) (bool, error) {
	if !v.channel() {
		return false, plugin.ErrNotChannel
	}
	if v.l.opts.Core == nil {
		return false, errNoCore
	}
	core, err := v.core(ctx)
	if err != nil {
		return false, err
	}
	return core.Paused(), nil
}

// surface returns the core for a surface service, or ErrNotSurface.
func (v *services) surface(ctx context.Context) (Core, error) {
	if !v.st.surface || v.l.opts.Core == nil {
		return nil, plugin.ErrNotSurface
	}
	return v.core(ctx)
}

// core returns the core once it has started, waiting for it (CoreReady),
// except from the plugin's Init; errCoreStopping once it stops.
func (v *services) core(ctx context.Context) (Core, error) {
	select {
	case <-v.l.closing:
		return nil, errCoreStopping
	default:
	}
	select {
	case <-v.l.ready:
		return v.l.opts.Core, nil
	default:
	}
	if ctx.Value(inInitKey{}) != nil {
		// Called from the plugin's Init, which Load waits for: waiting for
		// the core here would wait for ourselves. (A call from a goroutine
		// the Init started has another ctx, and waits.)
		return nil, errCoreStarting
	}
	select {
	case <-v.l.ready:
		return v.l.opts.Core, nil
	case <-v.l.closing:
		return nil, errCoreStopping
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", errCoreStarting, ctx.Err())
	}
}

// inInitKey marks the ctx of a plugin's Init call, which its service calls
// made within Init carry (in process directly; out of process through the
// call's scope).
type inInitKey struct{}

var (
	errCoreStarting = errors.New("the core is still starting: ask again once Init has returned (the core answers as soon as every plugin has loaded)")
	errCoreStopping = errors.New("the core is stopping")
	errNoCore       = errors.New("this core was built without the state plugins may ask about")
)

// Decide implements plugin.Services: a confirmation of the plugin's
// groups only (grant.go); the surface recorded is the plugin's name; the
// core checks the hash and that nobody decided first.
func (v *services) Decide(ctx context.Context, d plugin.Decision) error {
	core, err := v.surface(ctx)
	if err != nil {
		return err
	}
	if err := v.l.decidable(ctx, v.st, core, d.ID); err != nil {
		return err
	}
	cf, err := core.Decide(ctx, api.Decision{ID: d.ID, Approve: d.Approve, ArgsHash: d.ArgsHash, PreviewDigest: d.PreviewDigest,
		Surface: textutil.Clip(v.st.name, 32), Decider: textutil.Clip(textutil.OneLine(d.Decider), 128)})
	switch {
	case err == nil:
		return nil
	case cf.Decision != "" && errors.Is(err, api.ErrConflict):
		return fmt.Errorf("%w: %s", plugin.ErrAlreadyDecided, textutil.OneLine(err.Error()))
	}
	return err
}

// CoreStatus implements plugin.Services: the tasks listed are those of
// the plugin's groups.
func (v *services) CoreStatus(ctx context.Context) (plugin.CoreStatus, error) {
	core, err := v.surface(ctx)
	if err != nil {
		return plugin.CoreStatus{}, err
	}
	st := core.Status(ctx)
	out := plugin.CoreStatus{Version: st.Version, Started: st.Started, Paused: st.Paused, Sessions: st.Sessions, PendingConfirmations: st.PendingConfirmations}
	if ts, err := core.Tasks(ctx); err == nil {
		for _, t := range ts {
			if !v.st.granted(t.Group) {
				continue
			}
			ts := plugin.TaskSummary{ID: t.ID, Group: t.Group, Schedule: t.Schedule, Enabled: t.Enabled}
			if t.Next != nil {
				ts.Next = *t.Next
			}
			if r := t.Last; r != nil {
				ts.Last = r.State
				if r.Reason != "" {
					ts.Last += ": " + textutil.Clip(r.Reason, 200)
				}
			}
			out.Tasks = append(out.Tasks, ts)
		}
	}
	for _, p := range st.Plugins {
		if !p.Healthy {
			out.Unhealthy = append(out.Unhealthy, p.Name)
		}
	}
	return out, nil
}

// SetPaused implements plugin.Services.
func (v *services) SetPaused(ctx context.Context, paused bool) error {
	core, err := v.surface(ctx)
	if err != nil {
		return err
	}
	core.Pause(ctx, paused)
	return nil
}

// StopSession implements plugin.Services: only a session this plugin's
// own event started.
func (v *services) StopSession(ctx context.Context, id string) error {
	core, err := v.surface(ctx)
	if err != nil {
		return err
	}
	if core.SessionOrigin(id) != v.st.name {
		return fmt.Errorf("session %q was not started by %s's events", textutil.Clip(id, 64), v.st.name)
	}
	return core.CloseSession(ctx, id)
}
