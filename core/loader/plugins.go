package loader

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/intrinsics"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/outcome"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugindir"
	"github.com/carapace-dev/carapace/core/pluginhost"
	"github.com/carapace-dev/carapace/core/pluginpolicy"
	"github.com/carapace-dev/carapace/core/skills"
	"github.com/carapace-dev/carapace/internal/textutil"
	"github.com/carapace-dev/carapace/keychain"
)

// Plugin lifecycle timeouts (DESIGN.md decision 2).
const (
	// InitTimeout bounds a plugin's start and Init.
	InitTimeout = 10 * time.Second
	// EventTimeout bounds one event delivery to a plugin.
	EventTimeout = 10 * time.Second
)

// Plugin states, as the control API reports them.
const (
	stateHealthy    = "healthy"            // initialised and serving
	stateDegraded   = "degraded"           // healthy, but the plugin reports it cannot do all its work (ReportHealth); reported, never stored in pluginState.state
	stateFailed     = "failed"             // did not load or initialise; never shut down
	stateRestarting = api.PluginRestarting // its process died or hung, or it did not start again: the core starts it again after a wait (revive.go)
	stateDown       = api.PluginDown       // it crashed too often in a short time: it stays down until a restart (revive.go)
	stateCrashed    = "crashed"            // its process died while the core was stopping: it is not started again
	stateStopping   = "stopping"           // draining for a restart or unload
	stateRemoved    = "removed"            // unloaded by a restart because it is no longer installed
)

// pluginState is one plugin the core knows of, healthy or not.
type pluginState struct {
	name     string
	source   plugindir.Source
	dir      string // user plugins: the folder under plugins/ (possibly a symlink)
	builtin  *Builtin
	manifest *manifest.Manifest
	config   map[string]any
	groups   []string // the groups it is granted (grant.go): config.toml's allowed_groups, else its manifest's; none: every group
	surface  bool     // the surface capability: asked for in the manifest and granted in config.toml
	pin      install.Pin
	pinErr   error                // why an out-of-process plugin has no pin (plugindir.Plugin.PinErr)
	policy   *pluginpolicy.Policy // what an out-of-process plugin may reach; nil in process
	skills   fs.FS

	handler plugin.Handler      // the running handler (in process, or a *pluginhost.Process)
	proc    *pluginhost.Process // out-of-process plugins only
	calls   inflight
	hang    hangWatch            // its calls that timed out with no reply (revive.go)
	events  *events.Subscription // its subscribed events, while healthy (plugin_events.go); guarded by Loader.mu
	// stopMail, closed, ends the delivery of its mailbox (mailbox.go);
	// guarded by Loader.mu.
	stopMail chan struct{}
	// dropped rate-limits its AuditDropped entries (services.go).
	dropped struct {
		mu      sync.Mutex
		limit   *rate.Limiter
		skipped int
	}

	// Guarded by Loader.mu.
	state    string
	category string
	problem  string // for the user (control API, logs); never for the agent
	tools    []string
	// degraded is why the plugin reports itself degraded
	// (Services.ReportHealth); "" when it does not.
	degraded string
}

// candidate is a plugin of the inventory (core/plugindir), before
// anything is loaded; for a built-in, with what creates it.
type candidate struct {
	plugindir.Plugin
	builtin *Builtin
}

// inventory says what the inventory is to take stock of: the built-ins,
// the bundled plugins config.toml enables ([plugins.NAME]), and
// $CARAPACE_HOME/plugins.
func (l *Loader) inventory() plugindir.Options {
	o := plugindir.Options{Home: l.opts.Home, Version: l.opts.Version}
	for _, b := range l.opts.Builtins {
		o.Builtins = append(o.Builtins, plugindir.Builtin{Name: b.Name, Manifest: b.Manifest})
	}
	for _, b := range l.opts.Bundled {
		if _, enabled := l.cfg.Plugins[b.Name]; enabled {
			o.Bundled = append(o.Bundled, b)
		}
	}
	return o
}

// discover lists every plugin of the inventory, by name; the pins of
// plugins whose folder is gone are left out.
func (l *Loader) discover() ([]*candidate, error) {
	inv, err := plugindir.Scan(l.inventory())
	if err != nil {
		return nil, err
	}
	if inv.PinsErr != nil {
		l.log.Error("cannot read the handler pins; user plugins will not start", "err", inv.PinsErr)
	}
	out := make([]*candidate, 0, len(inv.Plugins))
	for _, p := range inv.Plugins {
		if !p.Stale {
			out = append(out, l.candidate(p))
		}
	}
	return out, nil
}

// candidateNamed finds plugin name as discover would; nil if there is none.
func (l *Loader) candidateNamed(name string) *candidate {
	p, ok := plugindir.Find(l.inventory(), name)
	if !ok {
		return nil
	}
	return l.candidate(p)
}

// candidate pairs an inventoried plugin with its built-in, and says when
// a user plugin replaces a plugin of the core's.
func (l *Loader) candidate(p plugindir.Plugin) *candidate {
	if p.Source == plugindir.SourceUser && p.Hides != "" && p.Problem == nil {
		l.log.Warn("a user plugin replaces the "+string(p.Hides)+" plugin of the same name", "plugin", p.Name, "dir", p.Dir)
	}
	c := &candidate{Plugin: p}
	if p.Source == plugindir.SourceBuiltin {
		for i := range l.opts.Builtins {
			if l.opts.Builtins[i].Name == p.Name {
				c.builtin = &l.opts.Builtins[i]
			}
		}
	}
	return c
}

// prepare reads and checks a candidate's manifest and config. A problem
// leaves the plugin failed with CONFIG_ERROR; nothing is started.
func (l *Loader) prepare(c *candidate, pc config.Plugin) *pluginState {
	st := &pluginState{name: c.Name, source: c.Source, dir: c.Dir, builtin: c.builtin, pin: c.Pin, pinErr: c.PinErr, groups: pc.AllowedGroups}
	if err := cmp.Or(c.Problem, c.ManifestErr); err != nil {
		return l.failed(st, plugin.CategoryConfig, err)
	}
	st.manifest = c.Manifest
	if st.groups == nil {
		st.groups = st.manifest.AllowedGroups
	}
	if c.builtin != nil {
		st.skills = c.builtin.Skills
	} else {
		st.skills = os.DirFS(filepath.Join(c.Dir, install.SkillsDir))
	}
	var err error
	st.config, err = normaliseConfig(pc.Config)
	if err != nil {
		return l.failed(st, plugin.CategoryConfig, fmt.Errorf("config.toml [plugins.%s.config]: %w", c.Name, err))
	}
	if err := st.manifest.ValidateConfig(l.opts.Home.Config()+" [plugins."+c.Name+".config]", st.config); err != nil {
		return l.failed(st, plugin.CategoryConfig, err)
	}
	for _, t := range st.manifest.Provides.Tools {
		st.tools = append(st.tools, t.Name)
	}
	if c.builtin == nil {
		pol, err := pluginpolicy.For(l.opts.Home, c.Name, c.Dir, filepath.Join(c.Dir, install.HandlerFile), st.manifest,
			config.Plugin{Config: st.config, Unconfined: pc.Unconfined})
		if err != nil {
			return l.failed(st, plugin.CategoryConfig, err)
		}
		st.policy = &pol
	}
	switch asks := st.manifest.HasCapability(manifest.CapabilitySurface); {
	case asks && pc.Surface:
		st.surface = true
	case asks:
		l.log.Info("plugin asks for the surface capability, not granted: it gets no confirmations and cannot decide them ([plugins."+c.Name+"] surface = true grants it)",
			"plugin", c.Name)
	case pc.Surface:
		return l.failed(st, plugin.CategoryConfig, fmt.Errorf("config.toml [plugins.%s] grants surface = true, but its manifest does not ask for the capability (provides.capabilities): remove the line", c.Name))
	}
	return st
}

// normaliseConfig gives a TOML table the types JSON decoding would give it
// (json.Number, strings for datetimes), the same types whether the handler
// runs in process or out of it.
func normaliseConfig(c map[string]any) (map[string]any, error) {
	if c == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkConflicts fails when two plugins (or a plugin and an intrinsic)
// declare one tool, or two plugins claim the memory_brief hook. At startup
// that stops the core, as seed 000 requires; on a restart the newcomer
// fails instead.
func checkConflicts(sts []*pluginState, taken map[string]string) error {
	owners := map[string]string{}
	for k, v := range taken {
		owners[k] = v
	}
	ms := map[string]*manifest.Manifest{}
	for _, st := range sts {
		if st.state == stateFailed {
			continue
		}
		ms[st.name] = st.manifest
		for _, t := range st.tools {
			if other, ok := owners[t]; ok {
				return fmt.Errorf("tool %q is declared by both plugin %q and %s; tool names must be unique across plugins: rename one (or remove a plugin)", t, st.name, describeOwner(other))
			}
			owners[t] = st.name
		}
	}
	return manifest.CheckHooks(ms)
}

func describeOwner(name string) string {
	if name == intrinsics.Plugin {
		return "the core (an intrinsic tool)"
	}
	return fmt.Sprintf("plugin %q", name)
}

// loadPlugins discovers, checks, starts and initialises every plugin, in
// parallel. A plugin that fails is logged with its category and left out;
// the core boots regardless. A tool name collision or a second
// memory_brief hook fails startup.
func (l *Loader) loadPlugins(ctx context.Context) error {
	cands, err := l.discover()
	if err != nil {
		return err
	}
	sts := make([]*pluginState, 0, len(cands))
	for _, c := range cands {
		sts = append(sts, l.prepare(c, l.cfg.Plugins[c.Name]))
	}
	if err := checkConflicts(sts, l.intrinsicOwners()); err != nil {
		return fmt.Errorf("plugins: %w", err)
	}
	var wg sync.WaitGroup
	for _, st := range sts {
		if st.state == stateFailed {
			continue
		}
		wg.Go(func() {
			l.start(ctx, st)
			l.startedAlive(st)
		})
	}
	wg.Wait()
	l.mu.Lock()
	l.plugins = sts
	l.mu.Unlock()
	for _, st := range sts {
		if st.state == stateHealthy {
			if err := l.register(st); err != nil {
				return err
			}
		}
	}
	return nil
}

// start starts a prepared plugin (its process, for a user plugin) and
// initialises it within InitTimeout. On failure it is left failed, and a
// started process is killed: shutdown is never called on a plugin that did
// not initialise.
func (l *Loader) start(ctx context.Context, st *pluginState) {
	ictx, cancel := context.WithTimeout(ctx, l.opts.InitTimeout)
	defer cancel()
	began := time.Now()
	for _, cr := range st.manifest.Credentials() {
		if !cr.Required {
			continue
		}
		if _, err := l.creds.Get(st.name, cr.Key); err != nil {
			why := "is not set"
			if !errors.Is(err, keychain.ErrNotFound) {
				why = "cannot be read (see the core's log)"
				l.log.Error("credential unreadable", "plugin", st.name, "key", cr.Key, "err", err)
			}
			l.failed(st, plugin.CategoryAuth, fmt.Errorf("required credential %q %s: run `carapace auth set --plugin %s --key %s`, then `carapace plugin restart %s`", cr.Key, why, st.name, cr.Key, st.name))
			return
		}
	}
	if st.builtin != nil {
		dir := l.opts.Home.DataDir(st.name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			l.failed(st, plugin.CategoryConfig, fmt.Errorf("create the data folder: %w", err))
			return
		}
		st.handler = st.builtin.New(Env{DataDir: dir, Logger: l.log.With("plugin", st.name)})
	} else {
		if st.pinErr != nil {
			l.failed(st, plugin.CategoryConfig, st.pinErr)
			return
		}
		spec := pluginhost.Spec{
			Name: st.name, Dir: st.dir, Exec: filepath.Join(st.dir, install.HandlerFile), SHA256: st.pin.SHA256,
			DataDir: l.opts.Home.DataDir(st.name), SocketDir: l.opts.Home.PluginSocketDir(),
			Logger: l.log, // pluginhost names the plugin in every line
			OnExit: func(err error) { l.crashed(st, err) },
		}
		if err := l.confineSpec(st, &spec); err != nil {
			l.failed(st, plugin.CategoryConfig, err)
			return
		}
		proc, err := pluginhost.Start(ictx, spec)
		if err != nil {
			l.failed(st, startCategory(err), err)
			return
		}
		st.proc, st.handler = proc, proc
	}
	svc := &services{l: l, st: st}
	if err := initHandler(context.WithValue(ictx, inInitKey{}, true), st.handler, st.config, svc); err != nil {
		if st.proc != nil {
			killAndWait(st.proc)
		}
		l.failed(st, plugin.CategoryOf(err), err)
		return
	}
	l.mu.Lock()
	st.state = stateHealthy
	l.mu.Unlock()
	pid := 0
	if st.proc != nil {
		pid = st.proc.PID()
	}
	l.log.Info("plugin loaded", "plugin", st.name, "source", st.source, "tools", st.tools, "pid", pid, "took", time.Since(began).Round(time.Millisecond))
	l.subscribePlugin(st)
	l.healthChanged(st)
	l.bus.PublishCore(plugin.TopicPluginReady.Event("", plugin.PluginReady{Plugin: st.name, Version: st.manifest.Version}))
	_ = l.audit.Write(&audit.Entry{Source: st.name, Stage: audit.StageCore, Outcome: audit.OutcomeStarted, Reason: fmt.Sprintf("plugin %s %s loaded (%s), tools: %s", st.name, st.manifest.Version, st.source, strings.Join(st.tools, ", "))})
}

// killAndWait kills a handler's process group and waits (a little) until
// its process is reaped and its socket released, so that a restart can
// bind the socket again.
func killAndWait(p *pluginhost.Process) {
	p.Kill()
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
	}
}

// startCategory classifies a failure to start a handler process.
func startCategory(err error) string {
	if errors.Is(err, pluginhost.ErrPinMismatch) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return plugin.CategoryConfig
	}
	return plugin.CategoryInternal
}

// register puts a healthy plugin's tools in the catalogue.
func (l *Loader) register(st *pluginState) error {
	h := &tracked{l: l, st: st}
	tools, err := catalog.FromManifest(st.name, st.manifest, h, st.groups)
	if err != nil {
		return fmt.Errorf("plugin %s: %w", st.name, err)
	}
	if err := l.catalog.Add(tools...); err != nil {
		return fmt.Errorf("plugin %s: %w", st.name, err)
	}
	return nil
}

func initHandler(ctx context.Context, h plugin.Handler, config map[string]any, svc plugin.Services) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("init panicked: %v", r)
			}
		}()
		done <- h.Init(ctx, config, svc)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return plugin.NewInitError(plugin.CategoryInternal, errors.New("init did not finish in time"))
	}
}

// failed records why a plugin is out of service: logged as CRITICAL and
// audited with the full detail; the agent only ever sees the category.
func (l *Loader) failed(st *pluginState, cat string, err error) *pluginState {
	problem := textutil.OneLine(err.Error())
	l.mu.Lock()
	st.state, st.category, st.problem = stateFailed, cat, problem
	l.mu.Unlock()
	l.healthChanged(st)
	l.log.Error("CRITICAL: plugin failed to load; its tools and skills are left out", "plugin", st.name, "category", cat, "err", problem)
	_ = l.audit.Write(&audit.Entry{Source: st.name, Stage: audit.StageCore, Outcome: audit.OutcomeError, Code: cat, Reason: "plugin failed to load: " + textutil.Clip(problem, 4000)})
	return st
}

// crashed is called when a plugin's process dies on its own (OnExit): the
// crash path of revive.go, which starts it again after a wait or leaves it
// down.
func (l *Loader) crashed(st *pluginState, err error) {
	l.crash(st, "handler process died: "+textutil.OneLine(fmt.Sprint(err)))
}

// available is the pipeline's stage-6 check.
func (l *Loader) available(name string) bool {
	if name == intrinsics.Plugin {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.plugins {
		if p.name == name {
			return p.state == stateHealthy
		}
	}
	return false
}

// stopPlugin takes a plugin out of service for a restart or unload: no new
// calls, in-flight calls drained (up to the handler timeout), Shutdown if it
// was healthy (bounded), its process killed, and its tools removed if
// removeTools.
func (l *Loader) stopPlugin(st *pluginState, removeTools bool) {
	l.mu.Lock()
	was := st.state
	st.state = stateStopping
	l.mu.Unlock()
	l.unsubscribePlugin(st)
	l.healthChanged(st)
	dctx, cancel := context.WithTimeout(context.Background(), l.cfg.Core.HandlerTimeout.Duration+time.Second)
	st.calls.closeAndWait(dctx)
	cancel()
	if was == stateHealthy {
		l.shutdownOne(st)
	}
	if st.proc != nil {
		killAndWait(st.proc)
	}
	if removeTools {
		l.catalog.Remove(st.name)
	}
}

// shutdownOne calls a healthy plugin's Shutdown within the shutdown
// timeout; an out-of-process handler that overruns it is killed.
func (l *Loader) shutdownOne(st *pluginState) {
	l.bus.PublishCore(plugin.TopicPluginStopping.Event("", plugin.PluginStopping{Plugin: st.name}))
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Core.ShutdownTimeout.Duration)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("shutdown panicked: %v", r)
			}
		}()
		done <- st.handler.Shutdown(ctx)
	}()
	outcome := "clean"
	select {
	case err := <-done:
		if err != nil {
			outcome = "error: " + textutil.OneLine(err.Error())
			l.log.Warn("plugin shutdown failed", "plugin", st.name, "err", err)
		}
	case <-ctx.Done():
		outcome = "timed out; forced"
		l.log.Warn("plugin shutdown timed out; killing it", "plugin", st.name)
	}
	if st.proc != nil {
		st.proc.Kill()
	}
	l.log.Info("plugin stopped", "plugin", st.name, "outcome", outcome)
}

// restart is Restart: the plugin's crash record forgotten, then reload.
func (l *Loader) restart(ctx context.Context, name string) (api.PluginStatus, error) {
	if err := manifest.CheckPluginName(name); err != nil {
		return api.PluginStatus{}, fmt.Errorf("%w: %w", api.ErrInvalid, err)
	}
	l.restartMu.Lock()
	defer l.restartMu.Unlock()
	select {
	case <-l.closing:
		return api.PluginStatus{}, fmt.Errorf("the core is stopping: %w", api.ErrConflict)
	default:
	}
	l.forgetCrashes(name)
	st, err := l.reload(ctx, name)
	if err != nil {
		l.stillWaiting(name, err)
		return api.PluginStatus{}, err
	}
	if st.state == stateRemoved {
		return api.PluginStatus{Name: name, State: stateRemoved}, nil
	}
	return l.pluginStatus(st), nil
}

// reload drains and stops the plugin, then loads it again from disk (or
// unloads it if it is gone; or loads it if it is new), and returns its new
// state (the old one, removed, if it was unloaded). On an error nothing
// was stopped or started. l.restartMu is held: restarts and revivals are
// serialised.
func (l *Loader) reload(ctx context.Context, name string) (*pluginState, error) {
	var old *pluginState
	l.mu.Lock()
	for _, p := range l.plugins {
		if p.name == name {
			old = p
		}
	}
	l.mu.Unlock()
	c := l.candidateNamed(name)
	if old == nil && c == nil {
		return nil, fmt.Errorf("plugin %s is neither running nor installed: %w", name, api.ErrNotFound)
	}
	// The plugin's section of config.toml is read again, so that a fixed
	// config or allowed_groups needs no core restart. The rest of the
	// file is the core's and takes effect at its next start.
	cfg, err := config.Load(l.opts.Home.Config())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", api.ErrInvalid, err)
	}
	if old != nil {
		// Its tools stay catalogued (answering PLUGIN_UNAVAILABLE, not
		// UNKNOWN_TOOL) until the new instance replaces them.
		l.stopPlugin(old, false)
	}
	if c == nil {
		l.catalog.Remove(name)
		l.mu.Lock()
		old.state = stateRemoved
		l.plugins = slices.DeleteFunc(l.plugins, func(p *pluginState) bool { return p == old })
		l.mu.Unlock()
		l.dropMailbox(name)
		l.log.Info("plugin unloaded: no longer installed", "plugin", name)
		_ = l.audit.Write(&audit.Entry{Source: name, Stage: audit.StageCore, Outcome: audit.OutcomeClosed, Reason: "plugin unloaded: no longer installed"})
		return old, nil
	}
	st := l.prepare(c, cfg.Plugins[name])
	if st.state != stateFailed {
		var others []*pluginState
		l.mu.Lock()
		for _, p := range l.plugins {
			if p != old && p.state != stateFailed {
				others = append(others, p)
			}
		}
		l.mu.Unlock()
		if err := checkConflicts(append(others, st), l.intrinsicOwners()); err != nil {
			l.failed(st, plugin.CategoryConfig, err)
		}
	}
	if st.state != stateFailed {
		l.start(ctx, st)
	}
	l.catalog.Remove(name)
	if st.state == stateHealthy {
		if err := l.register(st); err != nil {
			if st.proc != nil {
				killAndWait(st.proc)
			}
			l.failed(st, plugin.CategoryConfig, err)
		}
	}
	l.mu.Lock()
	l.plugins = slices.DeleteFunc(l.plugins, func(p *pluginState) bool { return p == old })
	l.plugins = append(l.plugins, st)
	sort.Slice(l.plugins, func(i, j int) bool { return l.plugins[i].name < l.plugins[j].name })
	l.mu.Unlock()
	l.startedAlive(st)
	return st, nil
}

// intrinsicOwners maps the intrinsic tools to their owner.
func (l *Loader) intrinsicOwners() map[string]string {
	out := map[string]string{}
	for _, t := range l.catalog.List() {
		if t.Plugin == intrinsics.Plugin {
			out[t.Name] = t.Plugin
		}
	}
	return out
}

// Health lists healthy plugins and the others with their categories, for
// get_session_info.
func (l *Loader) Health() (healthy []string, failed []intrinsics.Failure) {
	healthy, failed = []string{}, []intrinsics.Failure{}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.plugins {
		if p.state == stateHealthy {
			healthy = append(healthy, p.name)
		} else {
			failed = append(failed, intrinsics.Failure{Name: p.name, Category: p.category})
		}
	}
	return healthy, failed
}

// healthyPlugins returns the healthy plugins, for the session's skill tree and events.
func (l *Loader) healthyPlugins() []*pluginState {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*pluginState
	for _, p := range l.plugins {
		if p.state == stateHealthy {
			out = append(out, p)
		}
	}
	return out
}

// tracked is the catalogue's handler for a plugin: it counts in-flight
// calls, so that a restart can drain them, refuses calls once the plugin
// is stopping, and tells the loader how each call ended (hung plugins,
// revive.go). The core initialises and shuts plugins down itself, so the
// catalogue gets only Invoke.
type tracked struct {
	l  *Loader // nil in tests of the wrapper alone
	st *pluginState
}

var _ catalog.Invoker = (*tracked)(nil)

// Invoke implements catalog.Invoker.
func (t *tracked) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	if !t.st.calls.enter() {
		return nil, fmt.Errorf("plugin %s is restarting: %w", t.st.name, outcome.ErrUnavailable)
	}
	defer t.st.calls.leave()
	if t.st.handler == nil { // did not start: its tools wait for a revival (revive.go)
		return nil, fmt.Errorf("plugin %s is not running: %w", t.st.name, outcome.ErrUnavailable)
	}
	res, err := t.st.handler.Invoke(ctx, req)
	t.l.callEnded(t.st, err)
	if err == nil {
		return res, nil
	}
	if errors.Is(err, pluginhost.ErrUnavailable) {
		return nil, fmt.Errorf("%w: %w", outcome.ErrUnavailable, err)
	}
	if re, ok := errors.AsType[*pluginhost.ResultError](err); ok {
		return nil, &plugin.ToolError{Code: "HANDLER_ERROR", Message: fmt.Sprintf("Handler returned a JSON %s, not an object", re.JSONType)}
	}
	return nil, err
}

// inflight counts a plugin's calls in flight and can be closed to new ones.
type inflight struct {
	mu     sync.Mutex
	n      int
	closed bool
	zero   chan struct{} // closed when n drops to 0 after close
}

func (f *inflight) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.n++
	return true
}

func (f *inflight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 && f.zero != nil {
		close(f.zero)
		f.zero = nil
	}
}

// closeAndWait refuses new calls and waits for those in flight, or ctx.
func (f *inflight) closeAndWait(ctx context.Context) {
	f.mu.Lock()
	f.closed = true
	if f.n == 0 {
		f.mu.Unlock()
		return
	}
	if f.zero == nil {
		f.zero = make(chan struct{})
	}
	zero := f.zero
	f.mu.Unlock()
	select {
	case <-zero:
	case <-ctx.Done():
	}
}

// pluginStatus reports st for the control API.
func (l *Loader) pluginStatus(st *pluginState) api.PluginStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := api.PluginStatus{
		Name: st.name, Healthy: st.state == stateHealthy, State: st.state, Source: string(st.source), Dir: st.dir,
		Problem: st.problem,
	}
	switch {
	case st.state != stateHealthy:
		ps.Category = st.category
	case st.degraded != "":
		// It serves its calls (its tools are listed), but not all its
		// work: not healthy, so that every surface that looks at Healthy
		// shows it.
		ps.Healthy, ps.State, ps.Problem = false, stateDegraded, st.degraded
		ps.Tools = slices.Clone(st.tools)
	default:
		ps.Tools = slices.Clone(st.tools)
	}
	if st.manifest != nil {
		ps.Version = st.manifest.Version
	}
	if st.proc != nil && st.proc.Alive() {
		ps.PID = st.proc.PID()
	}
	ps.Confinement = l.confinement(st.policy)
	if r := l.revivals[st.name]; r != nil {
		ps.Restarts = r.restarts
		if st.state == stateRestarting {
			ps.NextTry = r.next
		}
	}
	return ps
}

// Healthy returns the healthy plugins, for a session's skill tree
// (core/agent's Plugins).
func (l *Loader) Healthy() []skills.Plugin {
	var out []skills.Plugin
	for _, st := range l.healthyPlugins() {
		out = append(out, skills.Plugin{Name: st.name, Manifest: st.manifest, Skills: st.skills})
	}
	return out
}

// BriefProvider returns the healthy plugin that declares the memory_brief
// hook, if its handler implements it (core/agent's Plugins).
func (l *Loader) BriefProvider() (string, plugin.BriefProvider) {
	for _, st := range l.healthyPlugins() {
		if !slices.Contains(st.manifest.Provides.Hooks, manifest.HookMemoryBrief) {
			continue
		}
		if _, ok := st.handler.(plugin.BriefProvider); !ok {
			l.log.Warn("plugin declares the memory_brief hook but its handler does not implement MemoryBrief", "plugin", st.name)
			return "", nil
		}
		return st.name, &tracked{l: l, st: st}
	}
	return "", nil
}

// Preview implements plugin.Previewer for a tool that declares a preview,
// counted like a call so that a restart drains it. A handler that does
// not implement it fails: the pipeline then refuses the call.
func (t *tracked) Preview(ctx context.Context, req *plugin.Request) (*plugin.Preview, error) {
	if !t.st.calls.enter() {
		return nil, fmt.Errorf("plugin %s is restarting: %w", t.st.name, outcome.ErrUnavailable)
	}
	defer t.st.calls.leave()
	if t.st.handler == nil {
		return nil, fmt.Errorf("plugin %s is not running: %w", t.st.name, outcome.ErrUnavailable)
	}
	pv, ok := t.st.handler.(plugin.Previewer)
	if !ok {
		return nil, fmt.Errorf("plugin %s declares a preview for %s but its handler does not implement Preview", t.st.name, req.Tool)
	}
	return pv.Preview(ctx, req)
}

// MemoryBrief implements plugin.BriefProvider for the hook's plugin,
// counted like a call so that a restart drains it.
func (t *tracked) MemoryBrief(ctx context.Context, group string) (*plugin.Brief, error) {
	if !t.st.calls.enter() {
		return nil, fmt.Errorf("plugin %s is restarting", t.st.name)
	}
	defer t.st.calls.leave()
	return t.st.handler.(plugin.BriefProvider).MemoryBrief(ctx, group)
}
