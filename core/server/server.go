// Package server assembles the core: configuration, audit log, catalogue
// (intrinsics and plugins), confirmation gate, pipeline, session sockets and
// the control API; runs it until asked to stop; then shuts it down in the
// order of seed 000's Shutdown Sequence: drain, shut plugins down, clean up.
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

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/confirm"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/intrinsics"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/pipeline"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/session"
	"github.com/carapace-dev/carapace/plugins"
)

// Timeouts of plugin lifecycle calls.
const (
	InitTimeout = 10 * time.Second
)

// Options configure Run.
type Options struct {
	Home    home.Dir
	Logger  *slog.Logger
	Version string
	// Builtins replaces the built-in plugin list; nil means plugins.Builtins().
	Builtins []plugins.Builtin
	// Ready, if set, is called once the core accepts requests.
	Ready func(*Server)
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

	mu      sync.Mutex
	plugins []*pluginState
	stop    chan struct{}
	once    sync.Once
}

type pluginState struct {
	name     string
	handler  plugin.Handler
	healthy  bool
	category string
}

// Run starts the core and blocks until ctx ends or a stop is requested
// through the control API, then shuts down gracefully.
func Run(ctx context.Context, opts Options) error {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Builtins == nil {
		opts.Builtins = plugins.Builtins()
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

	s.catalog = catalog.New()
	ih := &intrinsics.Handler{Catalog: s.catalog, Health: s.health}
	itools, err := ih.Tools()
	if err != nil {
		return err
	}
	if err := s.catalog.Add(itools...); err != nil {
		return err
	}
	if err := s.loadPlugins(ctx); err != nil {
		return err
	}

	s.gate = &confirm.Gate{Timeout: cfg.Core.ConfirmationTimeout.Duration, Notify: func(p confirm.Pending) {
		s.log.Warn("confirmation required", "id", p.ID, "tool", p.Tool, "group", p.Group, "session", p.Session,
			"expires", p.Expires.Format(time.RFC3339), "approve", "carapace confirm approve "+p.ID)
	}}
	s.pipe = pipeline.New(pipeline.Options{
		Catalog: s.catalog, Audit: s.audit, Gate: s.gate, Logger: s.log,
		HandlerTimeout: cfg.Core.HandlerTimeout.Duration,
		Rejections:     pipeline.Rate{PerMinute: cfg.Audit.RejectionsPerMinute, Burst: max(1, cfg.Audit.RejectionsPerMinute/6)},
		RateFor: func(tool string) pipeline.Rate {
			r := cfg.RateFor(tool)
			return pipeline.Rate{PerMinute: r.PerMinute, Burst: r.Burst}
		},
	})
	s.sessions = session.NewManager(session.Options{
		Home: opts.Home, Pipeline: s.pipe, Audit: s.audit, Logger: s.log, MaxSessions: cfg.Core.MaxSessions,
	})

	ctl := control.NewServer(s, s.log)
	serveErr := make(chan error, 1)
	go func() { serveErr <- ctl.Serve(ln) }()

	// A core that cannot audit does not start: the log is its only
	// detective control, and every request would be refused anyway.
	if err := s.audit.Write(&audit.Entry{Source: "core", Stage: audit.StageCore, Outcome: audit.OutcomeStarted, Reason: "version " + opts.Version}); err != nil {
		_ = ctl.Shutdown(context.Background())
		s.sessions.CloseAll()
		return fmt.Errorf("cannot write the audit log %s, so the core will not start: %w", opts.Home.AuditLog(), err)
	}
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
	s.shutdown()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = ctl.Shutdown(sctx)
	cancel()
	return runErr
}

// shutdown is seed 000's sequence: drain (up to the handler timeout), shut
// every initialised plugin down in parallel (each bounded), then close the
// sessions and record the outcome.
func (s *Server) shutdown() {
	s.once.Do(func() { close(s.stop) })
	start := time.Now()
	s.pipe.Drain()
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.Core.HandlerTimeout.Duration+time.Second)
	drained := s.pipe.Wait(dctx) == nil
	cancel()

	var wg sync.WaitGroup
	s.mu.Lock()
	ps := append([]*pluginState(nil), s.plugins...)
	s.mu.Unlock()
	for _, p := range ps {
		if !p.healthy {
			continue // never shut down a plugin that did not initialise
		}
		wg.Add(1)
		go func(p *pluginState) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Core.ShutdownTimeout.Duration)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.handler.Shutdown(ctx) }()
			select {
			case err := <-done:
				if err != nil {
					s.log.Warn("plugin shutdown failed", "plugin", p.name, "err", err)
				}
			case <-ctx.Done():
				s.log.Warn("plugin shutdown timed out", "plugin", p.name)
			}
			s.catalog.Remove(p.name)
		}(p)
	}
	wg.Wait()
	s.sessions.CloseAll()
	reason := fmt.Sprintf("graceful stop in %s", time.Since(start).Round(time.Millisecond))
	if !drained {
		reason += "; some handlers did not finish before the drain deadline"
	}
	_ = s.audit.Write(&audit.Entry{Source: "core", Stage: audit.StageCore, Outcome: audit.OutcomeClosed, Reason: reason})
	s.log.Info("core stopped", "took", time.Since(start).Round(time.Millisecond), "drained", drained)
}

// loadPlugins initialises the built-in plugins. A plugin that fails is
// logged with its category and left out; the core boots regardless. A tool
// name collision fails startup.
func (s *Server) loadPlugins(ctx context.Context) error {
	svc := &services{s: s}
	_ = svc
	for _, b := range s.opts.Builtins {
		st := &pluginState{name: b.Name}
		s.plugins = append(s.plugins, st)
		m, err := manifest.Parse(b.Name+"/manifest.json", b.Manifest)
		if err != nil {
			s.pluginFailed(st, "CONFIG_ERROR", err)
			continue
		}
		h := b.New()
		tools, err := catalog.FromManifest(b.Name, m, h, s.cfg.Plugins[b.Name].AllowedGroups)
		if err != nil {
			s.pluginFailed(st, "CONFIG_ERROR", err)
			continue
		}
		ictx, cancel := context.WithTimeout(ctx, InitTimeout)
		err = initHandler(ictx, h, svc)
		cancel()
		if err != nil {
			s.pluginFailed(st, category(err), err)
			continue
		}
		if err := s.catalog.Add(tools...); err != nil {
			return fmt.Errorf("plugin %s: %w", b.Name, err)
		}
		st.handler, st.healthy = h, true
	}
	return nil
}

func initHandler(ctx context.Context, h plugin.Handler, svc plugin.Services) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("init panicked: %v", r)
			}
		}()
		done <- h.Init(ctx, map[string]any{}, svc)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("init did not finish within %s", InitTimeout)
	}
}

func category(err error) string {
	var c interface{ Category() string }
	if errors.As(err, &c) {
		switch v := c.Category(); v {
		case "NETWORK_ERROR", "AUTH_ERROR", "CONFIG_ERROR", "INTERNAL_ERROR":
			return v
		}
	}
	return "INTERNAL_ERROR"
}

func (s *Server) pluginFailed(st *pluginState, cat string, err error) {
	st.category = cat
	s.log.Error("CRITICAL: plugin failed to initialise; its tools and skills are left out", "plugin", st.name, "category", cat, "err", err)
	_ = s.audit.Write(&audit.Entry{Source: st.name, Stage: audit.StageCore, Outcome: audit.OutcomeError, Code: cat, Reason: "plugin failed to initialise: " + err.Error()})
}

func (s *Server) health() (healthy []string, failed []intrinsics.Failure) {
	healthy, failed = []string{}, []intrinsics.Failure{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.plugins {
		if p.healthy {
			healthy = append(healthy, p.name)
		} else {
			failed = append(failed, intrinsics.Failure{Name: p.name, Category: p.category})
		}
	}
	return healthy, failed
}

// services are the core services handed to one plugin, scoped per request.
type services struct {
	s      *Server
	plugin string
}

func (v *services) GetToolCatalog(context.Context) ([]plugin.ToolInfo, error) {
	var out []plugin.ToolInfo
	for _, t := range v.s.catalog.List() {
		out = append(out, plugin.ToolInfo{Name: t.Name, Plugin: t.Plugin, Description: t.Description, RiskLevel: t.RiskLevel})
	}
	return out, nil
}

func (v *services) GetSessionInfo(ctx context.Context) (plugin.SessionInfo, error) {
	sess, ok := pipeline.SessionFrom(ctx)
	if !ok {
		return plugin.SessionInfo{}, plugin.ErrNoRequest
	}
	return plugin.SessionInfo{ID: sess.ID, Group: sess.Group, Started: sess.Started}, nil
}

func (v *services) GetAuditLog(ctx context.Context, f plugin.AuditFilter) ([]plugin.AuditEntry, error) {
	return nil, plugin.ErrNoRequest // TODO(issue 3): wired in the next step
}

func (v *services) ReadCredential(ctx context.Context, key string) (string, error) {
	return "", plugin.ErrNoCredential
}

func (v *services) PublishEvent(ctx context.Context, ev *plugin.Event) error {
	return plugin.ErrNotChannel
}
