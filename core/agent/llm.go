package agent

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/llmproxy"
	"github.com/carapace-dev/carapace/core/session"
)

// The model API reaches the container through a second socket per
// session: the core's LLM proxy serves it, `ipc-relay` inside the container
// listens on 127.0.0.1:[llm] port and copies bytes to it.
const (
	llmSocketContainer = "/run/carapace/llm.sock"
	// placeholderKey is what the container holds instead of the model
	// API's key: the proxy drops it and adds the real one.
	placeholderKey = "carapace-placeholder"
)

// llmShared is what every session's proxy shares: the budgets (per group)
// and, per upstream, its origin and transport (its TLS configuration and
// connection pool).
type llmShared struct {
	once      sync.Once
	err       error
	upstreams map[string]llmUpstream // by name; "" is [llm]'s
	mu        sync.Mutex
	budgets   map[string]llmproxy.Budget
}

// llmUpstream is one upstream, ready for the proxies.
type llmUpstream struct {
	cfg       config.LLMUpstream
	url       *url.URL
	transport http.RoundTripper // nil: the proxy's default (system roots)
}

// llmSetup prepares, once, what the proxies share: every upstream of
// config.toml, each checked (its URL, its ca_file).
func (r *Runner) llmSetup() error {
	l := &r.llm
	l.once.Do(func() {
		l.budgets = map[string]llmproxy.Budget{}
		l.upstreams = map[string]llmUpstream{}
		all := map[string]config.LLMUpstream{"": r.cfg.LLM.DefaultUpstream()}
		for name, u := range r.cfg.LLM.Upstreams {
			all[name] = u
		}
		for _, name := range slices.Sorted(maps.Keys(all)) {
			key := "llm"
			if name != "" {
				key = "llm.upstreams." + name
			}
			c := all[name]
			u, err := url.Parse(c.Upstream)
			if err == nil {
				err = llmproxy.CheckUpstream(u)
			}
			if err != nil {
				l.err = fmt.Errorf("%s.upstream: %w", key, err)
				return
			}
			u.Path = ""
			up := llmUpstream{cfg: c, url: u}
			if c.CAFile != "" {
				t, err := llmproxy.TransportFor(c.CAFile)
				if err != nil {
					// TransportFor's errors name llm.ca_file.
					l.err = fmt.Errorf("%s: %w", key, err)
					if name == "" {
						l.err = err
					}
					return
				}
				up.transport = t
			}
			l.upstreams[name] = up
		}
	})
	return l.err
}

// budget returns group's daily token budget, shared by its sessions.
func (r *Runner) budget(group string) llmproxy.Budget {
	if r.cfg.LLM.DailyTokens <= 0 {
		return nil
	}
	r.llm.mu.Lock()
	defer r.llm.mu.Unlock()
	b, ok := r.llm.budgets[group]
	if !ok {
		b = llmproxy.NewDailyBudget(r.cfg.LLM.DailyTokens, time.Now)
		r.llm.budgets[group] = b
	}
	return b
}

// llmSocket is the host path of session id's model API socket, beside its
// IPC socket in the private sessions folder.
func (r *Runner) llmSocket(id string) string {
	return r.opts.Home.Path("run", "sessions", id+".llm.sock")
}

// startLLMProxy serves session info's model API socket until ctx ends. It
// returns once the socket exists, so that it can be mounted. seen, if not
// nil, counts the requests that reach the proxy (a probe's: RunProbe).
func (r *Runner) startLLMProxy(ctx context.Context, info session.Info, seen *atomic.Int64) error {
	if err := r.llmSetup(); err != nil {
		return err
	}
	name, _ := r.cfg.UpstreamFor(info.Group)
	up := r.llm.upstreams[name]
	p, err := llmproxy.New(llmproxy.Options{
		Upstream: up.url, Transport: up.transport, Provider: up.cfg.Provider,
		Credential: llmproxy.FromStoreFor(r.creds, up.cfg.Provider, up.cfg.Auth),
		Models:     r.cfg.Groups[info.Group].Models,
		Session:    info.ID, Group: info.Group,
		RequestsPerMinute: r.cfg.LLM.RequestsPerMinute,
		Budget:            r.budget(info.Group),
		Audit:             r.audit,
		Logger:            r.log.With("component", "llm", "session", info.ID),
	})
	if err != nil {
		return fmt.Errorf("model API proxy: %w", err)
	}
	var h http.Handler = r.markReached(info.ID, p)
	if seen != nil {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			seen.Add(1)
			inner.ServeHTTP(w, req)
		})
	}
	// Listening when Start returns: the container may start at once. (It
	// was polled for every 5 ms: 5 ms of every cold session's start.)
	served, err := llmproxy.Start(ctx, r.llmSocket(info.ID), h)
	if err != nil {
		return fmt.Errorf("model API proxy: %w", err)
	}
	go func() {
		if err := <-served; err != nil {
			r.log.Warn("the model API proxy of a session stopped", "session", info.ID, "err", err)
		}
	}()
	return nil
}

// llmEnv is the environment that points the agent at its relay, and
// tells Claude Code the models its group names (config.ModelsFor: the
// group's, else its upstream's). The group's model is
// ANTHROPIC_MODEL, and also the opus and sonnet slots
// (ANTHROPIC_DEFAULT_OPUS_MODEL, ANTHROPIC_DEFAULT_SONNET_MODEL) that a
// subagent or plan mode may ask for by alias; its small, fast model, for
// background work, is the haiku slot (ANTHROPIC_DEFAULT_HAIKU_MODEL) and
// ANTHROPIC_SMALL_FAST_MODEL (the older name). A group that names a model
// but no small one uses its model for both, so that no call asks for a
// Claude model the group's upstream may not have, or the group may not
// use.
func (r *Runner) llmEnv(session, group string) []string {
	port := strconv.Itoa(r.cfg.LLM.Port)
	env := []string{
		"CARAPACE_LLM_SOCKET=" + llmSocketContainer,
		"CARAPACE_LLM_PORT=" + port,
		"ANTHROPIC_BASE_URL=http://127.0.0.1:" + port,
		"ANTHROPIC_API_KEY=" + placeholderKey + "-" + session,
	}
	model, small := r.cfg.ModelsFor(group)
	if model != "" {
		env = append(env, "ANTHROPIC_MODEL="+model, "ANTHROPIC_DEFAULT_OPUS_MODEL="+model, "ANTHROPIC_DEFAULT_SONNET_MODEL="+model)
	}
	if small != "" {
		env = append(env, "ANTHROPIC_DEFAULT_HAIKU_MODEL="+small, "ANTHROPIC_SMALL_FAST_MODEL="+small)
	}
	return env
}
