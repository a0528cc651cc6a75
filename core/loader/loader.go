package loader

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/clock"
	"github.com/carapace-dev/carapace/keychain"
)

// Options configure a Loader.
type Options struct {
	Home    home.Dir
	Version string // the core's, for the manifests' app_compat
	Config  *config.Config
	Logger  *slog.Logger
	Audit   *audit.Log
	// Catalog gets the healthy plugins' tools; the intrinsics are in it
	// before Load.
	Catalog     *catalog.Catalog
	Credentials keychain.Store
	// Bus carries the plugin.* events and the events plugins publish and
	// subscribe to.
	Bus *events.Bus
	// Builtins are the plugins compiled into the core.
	Builtins []Builtin
	// Bundled are the first-party out-of-process plugins shipped beside
	// the core (cmd/wiring finds them).
	Bundled []Bundled
	// InitTimeout bounds each plugin's start and Init; zero means
	// InitTimeout.
	InitTimeout time.Duration
	// ConfineSupport replaces what this system can confine plugins with
	// (confine.Probe): tests give one without Landlock. Nil: the probe.
	ConfineSupport *confine.Support
	// EgressNet, if set, replaces the resolver and the dialler of every
	// plugin's egress point: tests stand in for DNS (a test machine's
	// resolver may answer nothing) and for a fake-IP tunnel. Nil: the
	// system's resolver, and a dialler that checks each address again.
	EgressNet *EgressNet
	// Core is what the surface services ask of the rest of the core; nil
	// refuses them. It is called only once CoreReady has been, until
	// Shutdown.
	Core Core
	// Revival says how crashed and hung plugins are started again
	// (revive.go); the zero value is the defaults.
	Revival Revival
	// Clock times the revivals; nil is the system clock.
	Clock Clock
}

// Core is what the surface services need from the rest of the core: the
// control API's operations (core/server implements them), and which
// plugin's event started a session.
type Core interface {
	Decide(ctx context.Context, d api.Decision) (api.Confirmation, error)
	// Confirmations lists the pending confirmations, and with recent the
	// resolved ones still remembered.
	Confirmations(ctx context.Context, recent bool) []api.Confirmation
	Status(ctx context.Context) api.Status
	Pause(ctx context.Context, paused bool) api.Status
	// Paused reports whether sessions for events are paused: what
	// Status(ctx).Paused says, without gathering the rest.
	Paused() bool
	CloseSession(ctx context.Context, id string) error
	// SessionOrigin names the plugin whose event started session id; ""
	// for any other session.
	SessionOrigin(id string) string
	// Tasks lists the scheduled tasks.
	Tasks(ctx context.Context) ([]api.Task, error)
}

// Loader holds every plugin the core knows of, healthy or not. Create it
// with New; Load loads them. It is safe for concurrent use.
type Loader struct {
	opts    Options
	cfg     *config.Config
	log     *slog.Logger
	audit   *audit.Log
	catalog *catalog.Catalog
	creds   keychain.Store
	bus     *events.Bus

	mu        sync.Mutex
	plugins   []*pluginState // sorted by name
	restartMu sync.Mutex     // serialises restarts and revivals

	revival  Revival
	clock    Clock
	revivals map[string]*revival // crash records by plugin name (revive.go); guarded by mu
	noRevive bool                // the core is stopping: nothing is started again; guarded by mu
	life     context.Context     // a revival's start; cancelled by Shutdown
	endLife  context.CancelFunc

	ready     chan struct{} // closed by CoreReady
	readyOnce sync.Once
	closing   chan struct{} // closed by Shutdown
	closeOnce sync.Once

	mailMu  sync.Mutex
	mail    map[string]*mailbox  // undelivered channel answers and confirmations, by plugin (mailbox.go)
	mailSub *events.Subscription // files them into mail
}

// New returns a Loader; nothing is loaded until Load.
func New(o Options) *Loader {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.InitTimeout <= 0 {
		o.InitTimeout = InitTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	life, endLife := context.WithCancel(context.Background())
	return &Loader{opts: o, cfg: o.Config, log: o.Logger, audit: o.Audit, catalog: o.Catalog, creds: o.Credentials, bus: o.Bus,
		revival: o.Revival.withDefaults(), clock: o.Clock, life: life, endLife: endLife,
		ready: make(chan struct{}), closing: make(chan struct{})}
}

// CoreReady tells the loader the rest of the core is up: until then, the
// surface services (Options.Core) wait, and refuse a plugin still in its
// Init, which Load is waiting for.
func (l *Loader) CoreReady() { l.readyOnce.Do(func() { close(l.ready) }) }

// Load takes stock of the plugins (core/plugindir: the built-ins, the
// enabled bundled plugins, then $CARAPACE_HOME/plugins), starts and
// initialises them in parallel, and catalogues the healthy ones' tools. A plugin that fails is left out, logged and audited; an
// error is returned only for what stops the core (conflicting tool names).
func (l *Loader) Load(ctx context.Context) error {
	l.startMail()
	// A plugin that dies while the others still load is started again
	// only once they are all listed (a revival takes restartMu too).
	l.restartMu.Lock()
	defer l.restartMu.Unlock()
	return l.loadPlugins(ctx)
}

// Restart drains and stops plugin name, then loads it again from disk (or
// unloads it if it is gone; or loads it if it is new). It forgets the
// plugin's crashes: one that was down, or waiting to be started again, is
// started now with a clean record. Restarts are serialised. The caller
// refuses it while the core drains; after Shutdown it is refused.
func (l *Loader) Restart(ctx context.Context, name string) (api.PluginStatus, error) {
	return l.restart(ctx, name)
}

// Statuses returns every plugin's status, sorted by name.
func (l *Loader) Statuses() []api.PluginStatus {
	l.mu.Lock()
	ps := append([]*pluginState(nil), l.plugins...)
	l.mu.Unlock()
	out := make([]api.PluginStatus, 0, len(ps))
	for _, p := range ps {
		out = append(out, l.pluginStatus(p))
	}
	return out
}

// Available reports whether plugin name serves calls: the pipeline's
// stage-6 check.
func (l *Loader) Available(name string) bool { return l.available(name) }

// Shutdown shuts every initialised plugin down, in parallel (each bounded
// by the shutdown timeout), kills the processes of the others, and removes
// their tools: the core is stopping.
func (l *Loader) Shutdown() {
	l.closeOnce.Do(func() { close(l.closing) })
	l.Drain()
	l.endLife()
	// A restart or revival under way finishes (its start cut short)
	// before the plugins are listed, so that none is left running.
	l.restartMu.Lock()
	defer l.restartMu.Unlock()
	l.stopMail()
	var wg sync.WaitGroup
	l.mu.Lock()
	ps := append([]*pluginState(nil), l.plugins...)
	l.mu.Unlock()
	for _, p := range ps {
		wg.Go(func() {
			l.unsubscribePlugin(p)
			l.mu.Lock()
			healthy := p.state == stateHealthy
			p.state = stateStopping
			l.mu.Unlock()
			if healthy {
				l.shutdownOne(p) // never shut down a plugin that did not initialise
			} else if p.proc != nil {
				killAndWait(p.proc) // a crashed handler: make sure its process group is gone
			}
			l.catalog.Remove(p.name)
		})
	}
	wg.Wait()
}

// healthChanged publishes plugin.health with st's status.
func (l *Loader) healthChanged(st *pluginState) {
	l.bus.PublishCore(plugin.TopicPluginHealth.Event("", l.pluginStatus(st)))
}
