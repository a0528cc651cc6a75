package server

import (
	"bytes"
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

	"github.com/carapace-dev/carapace/core/agent"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/intrinsics"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/outcome"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/pluginhost"
	"github.com/carapace-dev/carapace/core/skills"
	"github.com/carapace-dev/carapace/core/version"
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
	stateHealthy  = "healthy"  // initialised and serving
	stateFailed   = "failed"   // did not load or initialise; never shut down
	stateCrashed  = "crashed"  // its process died; calls get PLUGIN_UNAVAILABLE until a restart
	stateStopping = "stopping" // draining for a restart or unload
	stateRemoved  = "removed"  // unloaded by a restart because it is no longer installed
)

// Plugin sources.
const (
	sourceBuiltin = "builtin"
	sourceUser    = "user"
)

// pluginState is one plugin the core knows of, healthy or not.
type pluginState struct {
	name     string
	source   string
	dir      string // user plugins: the folder under plugins/ (possibly a symlink)
	builtin  *loader.Builtin
	manifest *manifest.Manifest
	config   map[string]any
	groups   []string // config.toml's allowed_groups, replacing the manifest's when set
	skills   fs.FS

	handler plugin.Handler      // the running handler (in process, or a *pluginhost.Process)
	proc    *pluginhost.Process // out-of-process plugins only
	calls   inflight
	events  *events.Subscription // its subscribed events, while healthy (plugin_events.go); guarded by Server.mu

	// Guarded by Server.mu.
	state    string
	category string
	problem  string // for the user (control API, logs); never for the agent
	tools    []string
}

// candidate is a plugin found at discovery, before anything is loaded.
type candidate struct {
	name, source, dir string
	builtin           *loader.Builtin
	problem           error // the folder itself is unusable (bad name, not a directory)
}

// discover lists every plugin: the built-ins, then the folders of
// $CARAPACE_HOME/plugins (a user plugin replaces a built-in of the same
// name; a symlinked folder is followed). The directory name is the
// plugin's identity and must be kebab-case.
func (s *Server) discover() ([]*candidate, error) {
	byName := map[string]*candidate{}
	for i := range s.opts.Builtins {
		b := &s.opts.Builtins[i]
		byName[b.Name] = &candidate{name: b.Name, source: sourceBuiltin, builtin: b}
	}
	entries, err := os.ReadDir(s.opts.Home.PluginsDir())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read plugins folder: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // temporary folders of `plugin install`, editor files
		}
		c := s.userCandidate(name)
		if old, ok := byName[name]; ok && old.source == sourceBuiltin && c.problem == nil {
			s.log.Warn("a user plugin replaces the built-in plugin of the same name", "plugin", name, "dir", c.dir)
		}
		byName[name] = c
	}
	out := make([]*candidate, 0, len(byName))
	for _, c := range byName {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// userCandidate describes plugins/<name>, or nil if it does not exist.
func (s *Server) userCandidate(name string) *candidate {
	dir := filepath.Join(s.opts.Home.PluginsDir(), name)
	c := &candidate{name: name, source: sourceUser, dir: dir}
	if err := manifest.CheckPluginName(name); err != nil {
		c.problem = fmt.Errorf("the folder name is the plugin's identity: %w", err)
		return c
	}
	fi, err := os.Stat(dir) // follows a symlinked folder
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		c.problem = err
	case !fi.IsDir():
		c.problem = fmt.Errorf("%s is not a folder", dir)
	}
	return c
}

// candidateNamed finds plugin name on disk or among the built-ins.
func (s *Server) candidateNamed(name string) *candidate {
	if c := s.userCandidate(name); c != nil {
		return c
	}
	for i := range s.opts.Builtins {
		if b := &s.opts.Builtins[i]; b.Name == name {
			return &candidate{name: name, source: sourceBuiltin, builtin: b}
		}
	}
	return nil
}

// prepare reads and checks a candidate's manifest and config. A problem
// leaves the plugin failed with CONFIG_ERROR; nothing is started.
func (s *Server) prepare(c *candidate, pc config.Plugin) *pluginState {
	st := &pluginState{name: c.name, source: c.source, dir: c.dir, builtin: c.builtin, groups: pc.AllowedGroups}
	if c.problem != nil {
		return s.failed(st, plugin.CategoryConfig, c.problem)
	}
	opts := manifest.Options{AppVersion: version.Semver(s.opts.Version)}
	var err error
	if c.builtin != nil {
		st.manifest, err = manifest.Parse(c.name+"/manifest.json (built in)", c.builtin.Manifest, opts)
		st.skills = c.builtin.Skills
	} else {
		st.manifest, err = manifest.Load(c.dir, opts)
		st.skills = os.DirFS(filepath.Join(c.dir, "skills"))
	}
	if err != nil {
		return s.failed(st, plugin.CategoryConfig, err)
	}
	st.config, err = normaliseConfig(pc.Config)
	if err != nil {
		return s.failed(st, plugin.CategoryConfig, fmt.Errorf("config.toml [plugins.%s.config]: %w", c.name, err))
	}
	if err := st.manifest.ValidateConfig(s.opts.Home.Config()+" [plugins."+c.name+".config]", st.config); err != nil {
		return s.failed(st, plugin.CategoryConfig, err)
	}
	for _, t := range st.manifest.Provides.Tools {
		st.tools = append(st.tools, t.Name)
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
func (s *Server) loadPlugins(ctx context.Context) error {
	cands, err := s.discover()
	if err != nil {
		return err
	}
	sts := make([]*pluginState, 0, len(cands))
	for _, c := range cands {
		sts = append(sts, s.prepare(c, s.cfg.Plugins[c.name]))
	}
	if err := checkConflicts(sts, s.intrinsicOwners()); err != nil {
		return fmt.Errorf("plugins: %w", err)
	}
	pins, err := install.LoadPins(s.opts.Home)
	if err != nil {
		s.log.Error("cannot read the handler pins; user plugins will not start", "err", err)
	}
	var wg sync.WaitGroup
	for _, st := range sts {
		if st.state == stateFailed {
			continue
		}
		wg.Go(func() { s.start(ctx, st, pins) })
	}
	wg.Wait()
	s.mu.Lock()
	s.plugins = sts
	s.mu.Unlock()
	for _, st := range sts {
		if st.state == stateHealthy {
			if err := s.register(st); err != nil {
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
func (s *Server) start(ctx context.Context, st *pluginState, pins map[string]install.Pin) {
	ictx, cancel := context.WithTimeout(ctx, s.opts.InitTimeout)
	defer cancel()
	began := time.Now()
	for _, cr := range st.manifest.Credentials() {
		if !cr.Required {
			continue
		}
		if _, err := s.creds.Get(st.name, cr.Key); err != nil {
			why := "is not set"
			if !errors.Is(err, keychain.ErrNotFound) {
				why = "cannot be read (see the core's log)"
				s.log.Error("credential unreadable", "plugin", st.name, "key", cr.Key, "err", err)
			}
			s.failed(st, plugin.CategoryAuth, fmt.Errorf("required credential %q %s: run `carapace auth set --plugin %s --key %s`, then `carapace plugin restart %s`", cr.Key, why, st.name, cr.Key, st.name))
			return
		}
	}
	if st.builtin != nil {
		dir := s.opts.Home.DataDir(st.name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			s.failed(st, plugin.CategoryConfig, fmt.Errorf("create the data folder: %w", err))
			return
		}
		st.handler = st.builtin.New(loader.Env{DataDir: dir, Logger: s.log.With("plugin", st.name)})
	} else {
		pin, ok := pins[st.name]
		if !ok {
			s.failed(st, plugin.CategoryConfig, fmt.Errorf("plugin %s was not installed with `carapace plugin install`, so its handler has no pinned hash; run `carapace plugin install %s` (add --link for a development folder)", st.name, st.dir))
			return
		}
		proc, err := pluginhost.Start(ictx, pluginhost.Spec{
			Name: st.name, Dir: st.dir, Exec: filepath.Join(st.dir, "handler"), SHA256: pin.SHA256,
			DataDir: s.opts.Home.DataDir(st.name), SocketDir: s.opts.Home.PluginSocketDir(),
			Logger: s.log, // pluginhost names the plugin in every line
			OnExit: func(err error) { s.crashed(st, err) },
		})
		if err != nil {
			s.failed(st, startCategory(err), err)
			return
		}
		st.proc, st.handler = proc, proc
	}
	svc := &services{s: s, st: st}
	if err := initHandler(ictx, st.handler, st.config, svc); err != nil {
		if st.proc != nil {
			killAndWait(st.proc)
		}
		s.failed(st, plugin.CategoryOf(err), err)
		return
	}
	s.mu.Lock()
	st.state = stateHealthy
	s.mu.Unlock()
	pid := 0
	if st.proc != nil {
		pid = st.proc.PID()
	}
	s.log.Info("plugin loaded", "plugin", st.name, "source", st.source, "tools", st.tools, "pid", pid, "took", time.Since(began).Round(time.Millisecond))
	s.subscribePlugin(st)
	s.healthChanged(st)
	s.coreEvent("plugin.ready", "", map[string]any{"plugin": st.name, "version": st.manifest.Version})
	_ = s.audit.Write(&audit.Entry{Source: st.name, Stage: audit.StageCore, Outcome: audit.OutcomeStarted, Reason: fmt.Sprintf("plugin %s %s loaded (%s), tools: %s", st.name, st.manifest.Version, st.source, strings.Join(st.tools, ", "))})
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
func (s *Server) register(st *pluginState) error {
	h := &tracked{st: st}
	tools, err := catalog.FromManifest(st.name, st.manifest, h, st.groups)
	if err != nil {
		return fmt.Errorf("plugin %s: %w", st.name, err)
	}
	if err := s.catalog.Add(tools...); err != nil {
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
func (s *Server) failed(st *pluginState, cat string, err error) *pluginState {
	problem := oneLine(err.Error())
	s.mu.Lock()
	st.state, st.category, st.problem = stateFailed, cat, problem
	s.mu.Unlock()
	s.healthChanged(st)
	s.log.Error("CRITICAL: plugin failed to load; its tools and skills are left out", "plugin", st.name, "category", cat, "err", problem)
	_ = s.audit.Write(&audit.Entry{Source: st.name, Stage: audit.StageCore, Outcome: audit.OutcomeError, Code: cat, Reason: "plugin failed to load: " + clip(problem, 4000)})
	return st
}

// crashed is called when a plugin's process dies on its own. Its tools stay
// catalogued so that calls get PLUGIN_UNAVAILABLE (not UNKNOWN_TOOL) until
// `carapace plugin restart` or a core restart.
func (s *Server) crashed(st *pluginState, err error) {
	problem := "handler process died: " + oneLine(fmt.Sprint(err))
	s.mu.Lock()
	if st.state != stateHealthy {
		// Dying during start or Init makes it failed (start records
		// that); during a restart or shutdown it is expected.
		s.mu.Unlock()
		return
	}
	st.state, st.category, st.problem = stateCrashed, plugin.CategoryInternal, problem
	s.mu.Unlock()
	s.unsubscribePlugin(st)
	s.healthChanged(st)
	s.log.Error("CRITICAL: plugin handler died; its calls get PLUGIN_UNAVAILABLE until `carapace plugin restart "+st.name+"`", "plugin", st.name, "err", err)
	_ = s.audit.Write(&audit.Entry{Source: st.name, Stage: audit.StageCore, Outcome: audit.OutcomeCrashed, Code: plugin.CategoryInternal, Reason: clip(problem, 4000)})
}

// available is the pipeline's stage-6 check.
func (s *Server) available(name string) bool {
	if name == intrinsics.Plugin {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.plugins {
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
func (s *Server) stopPlugin(st *pluginState, removeTools bool) {
	s.mu.Lock()
	was := st.state
	st.state = stateStopping
	s.mu.Unlock()
	s.unsubscribePlugin(st)
	s.healthChanged(st)
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.Core.HandlerTimeout.Duration+time.Second)
	st.calls.closeAndWait(dctx)
	cancel()
	if was == stateHealthy {
		s.shutdownOne(st)
	}
	if st.proc != nil {
		killAndWait(st.proc)
	}
	if removeTools {
		s.catalog.Remove(st.name)
	}
}

// shutdownOne calls a healthy plugin's Shutdown within the shutdown
// timeout; an out-of-process handler that overruns it is killed.
func (s *Server) shutdownOne(st *pluginState) {
	s.coreEvent("plugin.stopping", "", map[string]any{"plugin": st.name})
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Core.ShutdownTimeout.Duration)
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
			outcome = "error: " + oneLine(err.Error())
			s.log.Warn("plugin shutdown failed", "plugin", st.name, "err", err)
		}
	case <-ctx.Done():
		outcome = "timed out; forced"
		s.log.Warn("plugin shutdown timed out; killing it", "plugin", st.name)
	}
	if st.proc != nil {
		st.proc.Kill()
	}
	s.log.Info("plugin stopped", "plugin", st.name, "outcome", outcome)
}

// RestartPlugin implements control.Backend: drain and stop the plugin, then
// load it again from disk (or unload it if it is gone; or load it if it is
// new). Restarts are serialised.
func (s *Server) RestartPlugin(ctx context.Context, name string) (control.PluginStatus, error) {
	if err := manifest.CheckPluginName(name); err != nil {
		return control.PluginStatus{}, fmt.Errorf("%w: %w", control.ErrInvalid, err)
	}
	if s.pipe.Draining() {
		return control.PluginStatus{}, fmt.Errorf("the core is shutting down: %w", control.ErrConflict)
	}
	s.restartMu.Lock()
	defer s.restartMu.Unlock()

	var old *pluginState
	s.mu.Lock()
	for _, p := range s.plugins {
		if p.name == name {
			old = p
		}
	}
	s.mu.Unlock()
	c := s.candidateNamed(name)
	if old == nil && c == nil {
		return control.PluginStatus{}, fmt.Errorf("plugin %s is neither running nor installed: %w", name, control.ErrNotFound)
	}
	// The plugin's section of config.toml is read again, so that a fixed
	// config or allowed_groups needs no core restart. The rest of the
	// file is the core's and takes effect at its next start.
	cfg, err := config.Load(s.opts.Home.Config())
	if err != nil {
		return control.PluginStatus{}, fmt.Errorf("%w: %w", control.ErrInvalid, err)
	}
	if old != nil {
		// Its tools stay catalogued (answering PLUGIN_UNAVAILABLE, not
		// UNKNOWN_TOOL) until the new instance replaces them.
		s.stopPlugin(old, false)
	}
	if c == nil {
		s.catalog.Remove(name)
		s.mu.Lock()
		old.state = stateRemoved
		s.plugins = slices.DeleteFunc(s.plugins, func(p *pluginState) bool { return p == old })
		s.mu.Unlock()
		s.log.Info("plugin unloaded: no longer installed", "plugin", name)
		_ = s.audit.Write(&audit.Entry{Source: name, Stage: audit.StageCore, Outcome: audit.OutcomeClosed, Reason: "plugin unloaded: no longer installed"})
		return control.PluginStatus{Name: name, State: stateRemoved}, nil
	}
	st := s.prepare(c, cfg.Plugins[name])
	if st.state != stateFailed {
		var others []*pluginState
		s.mu.Lock()
		for _, p := range s.plugins {
			if p != old && p.state != stateFailed {
				others = append(others, p)
			}
		}
		s.mu.Unlock()
		if err := checkConflicts(append(others, st), s.intrinsicOwners()); err != nil {
			s.failed(st, plugin.CategoryConfig, err)
		}
	}
	if st.state != stateFailed {
		pins, err := install.LoadPins(s.opts.Home)
		if err != nil {
			s.failed(st, plugin.CategoryConfig, fmt.Errorf("read handler pins: %w", err))
		} else {
			s.start(ctx, st, pins)
		}
	}
	s.catalog.Remove(name)
	if st.state == stateHealthy {
		if err := s.register(st); err != nil {
			if st.proc != nil {
				killAndWait(st.proc)
			}
			s.failed(st, plugin.CategoryConfig, err)
		}
	}
	s.mu.Lock()
	s.plugins = slices.DeleteFunc(s.plugins, func(p *pluginState) bool { return p == old })
	s.plugins = append(s.plugins, st)
	sort.Slice(s.plugins, func(i, j int) bool { return s.plugins[i].name < s.plugins[j].name })
	s.mu.Unlock()
	return s.pluginStatus(st), nil
}

// intrinsicOwners maps the intrinsic tools to their owner.
func (s *Server) intrinsicOwners() map[string]string {
	out := map[string]string{}
	for _, t := range s.catalog.List() {
		if t.Plugin == intrinsics.Plugin {
			out[t.Name] = t.Plugin
		}
	}
	return out
}

// health lists healthy plugins and the others with their categories, for
// get_session_info.
func (s *Server) health() (healthy []string, failed []intrinsics.Failure) {
	healthy, failed = []string{}, []intrinsics.Failure{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.plugins {
		if p.state == stateHealthy {
			healthy = append(healthy, p.name)
		} else {
			failed = append(failed, intrinsics.Failure{Name: p.name, Category: p.category})
		}
	}
	return healthy, failed
}

// healthyPlugins returns the healthy plugins, for the session's skill tree and events.
func (s *Server) healthyPlugins() []*pluginState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*pluginState
	for _, p := range s.plugins {
		if p.state == stateHealthy {
			out = append(out, p)
		}
	}
	return out
}

// tracked is the catalogue's handler for a plugin: it counts in-flight
// calls, so that a restart can drain them, and refuses calls once the
// plugin is stopping. The core initialises and shuts plugins down itself,
// so the catalogue gets only Invoke.
type tracked struct{ st *pluginState }

var _ catalog.Invoker = (*tracked)(nil)

// Invoke implements catalog.Invoker.
func (t *tracked) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	if !t.st.calls.enter() {
		return nil, fmt.Errorf("plugin %s is restarting: %w", t.st.name, outcome.ErrUnavailable)
	}
	defer t.st.calls.leave()
	res, err := t.st.handler.Invoke(ctx, req)
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

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// pluginStatus reports st for the control API.
func (s *Server) pluginStatus(st *pluginState) control.PluginStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := control.PluginStatus{
		Name: st.name, Healthy: st.state == stateHealthy, State: st.state, Source: st.source, Dir: st.dir,
		Problem: st.problem,
	}
	if st.state != stateHealthy {
		ps.Category = st.category
	} else {
		ps.Tools = slices.Clone(st.tools)
	}
	if st.manifest != nil {
		ps.Version = st.manifest.Version
	}
	if st.proc != nil && st.proc.Alive() {
		ps.PID = st.proc.PID()
	}
	return ps
}

// pluginSource is what the agent runner needs from the plugins.
type pluginSource struct{ s *Server }

var _ agent.Plugins = pluginSource{}

// Healthy implements agent.Plugins.
func (p pluginSource) Healthy() []skills.Plugin {
	var out []skills.Plugin
	for _, st := range p.s.healthyPlugins() {
		out = append(out, skills.Plugin{Name: st.name, Manifest: st.manifest, Skills: st.skills})
	}
	return out
}

// BriefProvider implements agent.Plugins: the healthy plugin that declares
// the memory_brief hook, if its handler implements it.
func (p pluginSource) BriefProvider() (string, plugin.BriefProvider) {
	for _, st := range p.s.healthyPlugins() {
		if !slices.Contains(st.manifest.Provides.Hooks, manifest.HookMemoryBrief) {
			continue
		}
		if _, ok := st.handler.(plugin.BriefProvider); !ok {
			p.s.log.Warn("plugin declares the memory_brief hook but its handler does not implement MemoryBrief", "plugin", st.name)
			return "", nil
		}
		return st.name, &tracked{st: st}
	}
	return "", nil
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
