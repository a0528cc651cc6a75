package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carapace-dev/carapace/core/llmproxy"
	"github.com/carapace-dev/carapace/core/session"
)

// The model API reaches the container through a second socket per
// session: the core's LLM proxy serves it, `ipc relay` inside the container
// listens on 127.0.0.1:[llm] port and copies bytes to it.
const (
	llmSocketContainer = "/run/carapace/llm.sock"
	// placeholderKey is what the container holds instead of the model
	// API's key: the proxy drops it and adds the real one.
	placeholderKey = "carapace-placeholder"
)

// llmShared is what every session's proxy shares: the budgets (per group)
// and the transport (its TLS configuration and connection pool).
type llmShared struct {
	once      sync.Once
	err       error
	upstream  *url.URL
	transport http.RoundTripper
	mu        sync.Mutex
	budgets   map[string]llmproxy.Budget
}

// llmSetup prepares, once, what the proxies share.
func (r *Runner) llmSetup() error {
	l := &r.llm
	l.once.Do(func() {
		u, err := url.Parse(r.cfg.LLM.Upstream)
		if err != nil {
			l.err = fmt.Errorf("llm.upstream: %w", err)
			return
		}
		u.Path = ""
		l.upstream = u
		l.budgets = map[string]llmproxy.Budget{}
		if r.cfg.LLM.CAFile == "" {
			return // the proxy's default: the system roots
		}
		l.transport, l.err = llmproxy.TransportFor(r.cfg.LLM.CAFile)
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
	p, err := llmproxy.New(llmproxy.Options{
		Upstream: r.llm.upstream, Transport: r.llm.transport,
		Credential: llmproxy.FromStore(r.creds),
		Session:    info.ID, Group: info.Group,
		RequestsPerMinute: r.cfg.LLM.RequestsPerMinute,
		Budget:            r.budget(info.Group),
		Audit:             r.audit,
		Logger:            r.log.With("component", "llm", "session", info.ID),
	})
	if err != nil {
		return fmt.Errorf("model API proxy: %w", err)
	}
	path := r.llmSocket(info.ID)
	served := make(chan error, 1)
	var h http.Handler = r.markReached(info.ID, p)
	if seen != nil {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			seen.Add(1)
			inner.ServeHTTP(w, req)
		})
	}
	go func() { served <- llmproxy.Serve(ctx, path, h) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		select {
		case err := <-served:
			if err == nil {
				err = errors.New("stopped before listening")
			}
			return fmt.Errorf("model API proxy: %w", err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("model API proxy: its socket did not appear")
		}
	}
}

// llmEnv is the environment that points the agent at its relay.
func (r *Runner) llmEnv(session string) []string {
	port := strconv.Itoa(r.cfg.LLM.Port)
	return []string{
		"CARAPACE_LLM_SOCKET=" + llmSocketContainer,
		"CARAPACE_LLM_PORT=" + port,
		"ANTHROPIC_BASE_URL=http://127.0.0.1:" + port,
		"ANTHROPIC_API_KEY=" + placeholderKey + "-" + session,
	}
}
