// Package server assembles the core and runs it. Run loads config.toml,
// takes the home's lock (a second core stops there, before touching any
// socket), listens on the control socket, opens the audit log, fills the
// catalogue with the core's own tools (core/intrinsics, then the task
// tools of core/tasks, whose scheduler it opens), opens the event bus,
// builds the confirmation gate (core/confirm), loads the plugins
// (core/loader), and builds the pipeline, the session sockets and the
// agent runner (core/agent). It serves the control API until ctx ends or a
// stop is asked for, then stops in order: the scheduler fires no more, the
// pipeline drains (up to the handler timeout), the plugins shut down, what
// waits for the user is withdrawn, the containers stop, the sessions
// close, and the stop is audited.
//
// Besides Run (server.go), it holds only glue, each piece a few lines that
// hand one package what another declares it needs: control.Backend
// (backend.go: each method forwards to the package that owns it — the
// gate's one Decide, its listings, the runner's sessions); the bus
// (events.go: its opening with the spawner's subscription, the gate's
// Publisher, the sessions' events, and the feed of changes control's
// watch source follows); control.TaskBackend with the scheduler's firing
// of task.triggered (tasks.go); and the home's lock (lock.go). It decides
// nothing itself: who hears of a confirmation is core/confirm's, what the
// watch shows is core/control's, what an event carries is the plugin
// SDK's. What the core is assembled from — the built-in and bundled
// plugins and the container engines — is chosen by the caller
// (cmd/wiring).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/agent"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/confirm"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/intrinsics"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/pipeline"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/prove"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/core/session"
	"github.com/carapace-dev/carapace/core/tasks"
	"github.com/carapace-dev/carapace/internal/clock"
	"github.com/carapace-dev/carapace/keychain"
)

var _ agent.Plugins = (*loader.Loader)(nil)

// Options configure Run.
type Options struct {
	Home    home.Dir
	Logger  *slog.Logger
	Version string
	// Builtins are the plugins compiled into the core
	// (cmd/wiring chooses them; tests add their own).
	Builtins []loader.Builtin
	// Bundled are the first-party out-of-process plugins shipped with the
	// build (cmd/wiring finds them beside the executable).
	Bundled []loader.Bundled
	// Ready, if set, is called once the core accepts requests.
	Ready func(*Server)
	// InitTimeout bounds each plugin's start and Init; zero means
	// loader.InitTimeout (10 s).
	InitTimeout time.Duration
	// ConfineSupport replaces what this system can confine plugins with
	// (loader.Options.ConfineSupport): tests give one without Landlock.
	ConfineSupport *confine.Support
	// EgressNet replaces the network under every plugin's egress point
	// (loader.Options.EgressNet): tests stand in for DNS and for a
	// fake-IP tunnel. Nil: the system's.
	EgressNet *loader.EgressNet
	// Revival says how crashed and hung plugins are started again; the
	// zero value is the loader's defaults.
	Revival loader.Revival
	// Credentials replaces the credential store; nil means
	// keychain.Default for the home.
	Credentials keychain.Store
	// BriefTimeout bounds the memory brief hook at session start; zero
	// means BriefTimeout (5 s).
	BriefTimeout time.Duration
	// Clock times the warm containers' idle time (core/agent); nil is the
	// system clock.
	Clock clock.Clock
	// NewEngine returns the container engine config.toml names ("docker",
	// "podman", "apple"): cmd/wiring.Engines, or a test's. Nil
	// means the core has none, and container sessions are refused.
	NewEngine func(name string) (runtime.Engine, error)
	// NoShadows leaves out the empty read-only mounts over the places a
	// session could leave instructions for the next (core/agent's
	// shadow.go): only for tests that prove the image's managed settings
	// hold by themselves.
	NoShadows bool
	// ProbeBinary is the static linux probe the proof's box runs (`carapace
	// doctor --prove`); empty means linux-<arch>/carapace-probe beside the
	// executable (prove.ProbePath). Tests give one they built.
	ProbeBinary string
	// ProveFaults break the proof on purpose: tests only, to see that a
	// broken promise fails its check (prove.Faults).
	ProveFaults prove.Faults
}

// Server is a running core.
type Server struct {
	opts    Options
	log     *slog.Logger
	cfg     *config.Config
	started time.Time

	audit    *audit.Log
	catalog  *catalog.Catalog
	gate     *confirm.Gate
	pipe     *pipeline.Pipeline
	sessions *session.Manager
	creds    keychain.Store
	agents   *agent.Runner
	bus      *events.Bus
	tasks    *tasks.Scheduler

	spawnSub    *events.Subscription // the spawner's, taken when the bus opens
	spawnerDone chan struct{}

	plugins *loader.Loader
	prover  *prove.Prover
	stop    chan struct{}
	once    sync.Once
}

// Run starts the core and blocks until ctx ends or a stop is requested
// through the control API, then shuts down gracefully.
func Run(ctx context.Context, opts Options) error {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, log: opts.Logger, started: time.Now().UTC(), stop: make(chan struct{})}
	if err := opts.Home.Ensure(); err != nil {
		return err
	}
	cfg, err := config.Load(opts.Home.Config())
	if err != nil {
		return err
	}
	s.cfg = cfg
	// A bad [llm] section is a configuration error: report it now, not at
	// the first container session.
	if err := agent.CheckConfig(cfg); err != nil {
		return fmt.Errorf("%s: %w", opts.Home.Config(), err)
	}

	// The lock first: if another core is running, stop here before
	// touching its sockets or files.
	release, err := lockHome(opts.Home)
	if err != nil {
		return err
	}
	defer release()
	ln, err := control.Listen(opts.Home.ControlSocket())
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := os.WriteFile(opts.Home.PidFile(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	defer os.Remove(opts.Home.PidFile())

	s.audit, err = audit.Open(opts.Home.AuditLog(), audit.Options{
		MaxBytes: int64(cfg.Audit.MaxSizeMB) << 20, MaxFiles: cfg.Audit.MaxFiles, Logger: s.log,
	})
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	defer s.audit.Close()

	s.creds = opts.Credentials
	if s.creds == nil {
		s.creds = keychain.Default(opts.Home.CredentialsDir())
	}
	s.catalog = catalog.New()
	ih := &intrinsics.Handler{Catalog: s.catalog, Health: func() ([]string, []intrinsics.Failure) { return s.plugins.Health() }}
	itools, err := ih.Tools()
	if err != nil {
		return err
	}
	if err := s.catalog.Add(itools...); err != nil {
		return err
	}
	if err := s.openTasks(ctx); err != nil {
		return err
	}
	defer s.tasks.Close()
	ttools, err := (&tasks.Tools{Scheduler: s.tasks, Origin: func(id string) string { return s.SessionOrigin(id) }}).CatalogTools()
	if err != nil {
		return err
	}
	if err := s.catalog.Add(ttools...); err != nil {
		return err
	}
	closeBus, err := s.openBus()
	if err != nil {
		return err
	}
	defer closeBus()
	// The confirmation gate audits each change and publishes it on the
	// bus (core/confirm's record.go says who hears of a confirmation).
	s.gate = confirm.New(confirm.Options{
		Timeout: cfg.Confirm.Timeout.Duration, MaxPending: cfg.Confirm.MaxPending,
		Audit: s.audit, Publish: confirmationBus{s.bus}, Logger: s.log,
	})
	s.plugins = loader.New(loader.Options{
		Home: opts.Home, Version: opts.Version, Config: cfg, Logger: s.log, Audit: s.audit, Catalog: s.catalog,
		Credentials: s.creds, Bus: s.bus, Builtins: opts.Builtins, Bundled: opts.Bundled, InitTimeout: opts.InitTimeout, Core: s,
		ConfineSupport: opts.ConfineSupport,
		EgressNet:      opts.EgressNet,
		Revival:        opts.Revival,
	})
	if err := s.plugins.Load(ctx); err != nil {
		return err
	}

	s.pipe = pipeline.New(pipeline.Options{
		Catalog: s.catalog, Audit: s.audit, Gate: s.gate, Logger: s.log,
		HandlerTimeout: cfg.Core.HandlerTimeout.Duration,
		Available:      s.plugins.Available,
		Rejections:     pipeline.Rate{PerMinute: cfg.Audit.RejectionsPerMinute, Burst: max(1, cfg.Audit.RejectionsPerMinute/6)},
		RateFor: func(tool string) pipeline.Rate {
			r := cfg.RateFor(tool)
			return pipeline.Rate{PerMinute: r.PerMinute, Burst: r.Burst}
		},
	})
	s.sessions = session.NewManager(session.Options{
		Home: opts.Home, Pipeline: s.pipe, Audit: s.audit, Logger: s.log, MaxSessions: cfg.Core.MaxSessions,
		Observe: s.observeSession,
	})

	s.agents = agent.New(agent.Options{
		Home: opts.Home, Config: cfg, Logger: s.log, Version: opts.Version, Audit: s.audit, Sessions: s.sessions,
		Bus: s.bus, Plugins: s.plugins, Catalog: s.catalog, Credentials: s.creds,
		NewEngine: opts.NewEngine, BriefTimeout: opts.BriefTimeout, NoShadows: opts.NoShadows, TaskRuns: s.tasks,
		Clock: opts.Clock,
		// The watchers see warm containers come and go in core.status.
		WarmChanged: func() { s.bus.PublishCore(plugin.TopicCoreStatus.Event("", s.Status(context.Background()))) },
	})
	agentsCtx, stopAgents := context.WithCancel(ctx)
	defer stopAgents()
	tasksCtx, stopTasksCtx := context.WithCancel(ctx)
	tasksDone := make(chan struct{})
	go func() { defer close(tasksDone); s.tasks.Run(tasksCtx) }()
	stopTasks := func() { stopTasksCtx(); <-tasksDone } // nothing fires once the core stops
	defer stopTasks()
	s.agents.Start(agentsCtx)
	support := confine.Probe()
	if opts.ConfineSupport != nil {
		support = *opts.ConfineSupport
	}
	s.prover = prove.New(prove.Options{Home: opts.Home, Logger: s.log, Support: support, Box: s.agents, Engine: cfg.Runtime.Engine,
		ModelUpstream: cfg.LLM.Upstream, ProbeBinary: opts.ProbeBinary, Faults: opts.ProveFaults})
	s.startSpawner()

	ctl := control.NewServer(s, s.log)
	serveErr := make(chan error, 1)
	go func() { serveErr <- ctl.Serve(ln) }()

	// A core that cannot audit does not start: the log is its only
	// detective control, and every request would be refused anyway.
	if err := s.audit.Write(&audit.Entry{Source: "core", Stage: audit.StageCore, Outcome: audit.OutcomeStarted, Reason: "version " + opts.Version}); err != nil {
		_ = ctl.Shutdown(context.Background())
		s.plugins.Shutdown()
		s.sessions.CloseAll()
		return fmt.Errorf("cannot write the audit log %s, so the core will not start: %w", opts.Home.AuditLog(), err)
	}
	s.plugins.CoreReady()
	s.log.Info("core ready", "home", string(opts.Home), "tools", s.catalog.Len(), "pid", os.Getpid())
	if opts.Ready != nil {
		opts.Ready(s)
	}

	var runErr error
	select {
	case <-ctx.Done():
		s.log.Info("stop signal received; draining")
	case <-s.stop:
		s.log.Info("stop requested; draining")
	case err := <-serveErr:
		if err != nil && !errors.Is(err, net.ErrClosed) {
			runErr = fmt.Errorf("control API: %w", err)
		}
	}
	stopTasks()
	s.tasks.Stopping() // the sessions it started are about to be closed
	s.shutdown()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = ctl.Shutdown(sctx)
	cancel()
	return runErr
}

// shutdown stops the core in order: drain (up to the handler timeout),
// shut every initialised plugin down in parallel (each bounded), withdraw
// what waits for the user, stop the containers, close the sessions, and
// record the outcome.
func (s *Server) shutdown() {
	s.once.Do(func() { close(s.stop) })
	start := time.Now()
	s.plugins.Drain() // no plugin is started again from now on
	s.pipe.Drain()
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.Core.HandlerTimeout.Duration+time.Second)
	drained := s.pipe.Wait(dctx) == nil
	cancel()

	s.plugins.Shutdown()
	s.gate.WithdrawAll("the core is stopping")
	s.agents.Stop()
	s.sessions.CloseAll()
	s.agents.Clear()
	reason := fmt.Sprintf("graceful stop in %s", time.Since(start).Round(time.Millisecond))
	if !drained {
		reason += "; some handlers did not finish before the drain deadline"
	}
	_ = s.audit.Write(&audit.Entry{Source: "core", Stage: audit.StageCore, Outcome: audit.OutcomeClosed, Reason: reason})
	s.log.Info("core stopped", "took", time.Since(start).Round(time.Millisecond), "drained", drained)
}
