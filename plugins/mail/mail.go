package mail

import (
	"context"
	"crypto/tls"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Name is the plugin's name.
const Name = "mail"

//go:embed manifest.json
var manifest []byte

//go:embed skills
var skills embed.FS

// Manifest returns the plugin's manifest.json.
func Manifest() []byte { return manifest }

// Skills returns the plugin's skills folder.
func Skills() fs.FS {
	sub, err := fs.Sub(skills, "skills")
	if err != nil {
		panic(err) // embedded at build time
	}
	return sub
}

// DialFunc opens a TCP connection: plugin.Dial in the handler (the core's
// egress point), a net.Dialer in tests.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Options configure a Handler.
type Options struct {
	// Dial reaches the servers. Required.
	Dial DialFunc
	// TLSConfig, if set, is the base of every TLS connection (tests give
	// their own roots); the server name is set per server.
	TLSConfig *tls.Config
	// DataDir holds the plugin's database (sends, and the mails seen by
	// the inbox watch). Required.
	DataDir string
	Logger  *slog.Logger
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// IdleRefresh is how often a watch ends IDLE to look for new mail
	// itself (default 9 min): it bounds how late a mail is seen whose
	// notification was lost, or came just before IDLE began, and keeps
	// NATs from dropping the connection. PollEvery is how often it polls
	// a server without IDLE (default 1 min), RetryEvery how long it waits
	// after a failure (default 30 s).
	IdleRefresh, PollEvery, RetryEvery time.Duration

	// crash, in tests, is called at the named points of the inbox watch
	// (before-decide, decided, published): a test's helper process kills
	// itself there.
	crash func(point string)
}

// Handler is the mail plugin's handler.
type Handler struct {
	opts     Options
	log      *slog.Logger
	cfg      *config
	services plugin.Services
	st       *store
	now      func() time.Time

	// sendMu serialises sends: the cap check, the record and the SMTP
	// transaction of one send happen before the next one's check.
	sendMu sync.Mutex

	stop    context.CancelFunc
	watches sync.WaitGroup
}

// New returns a handler; Init configures it.
func New(o Options) *Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IdleRefresh == 0 {
		o.IdleRefresh = 9 * time.Minute
	}
	if o.PollEvery == 0 {
		o.PollEvery = time.Minute
	}
	if o.crash == nil {
		o.crash = func(string) {}
	}
	if o.RetryEvery == 0 {
		o.RetryEvery = 30 * time.Second
	}
	return &Handler{opts: o, log: o.Logger, now: o.Now}
}

// Init implements plugin.Handler: it parses the config, opens the
// database and starts the inbox watches.
func (h *Handler) Init(ctx context.Context, config map[string]any, services plugin.Services) error {
	cfg, err := parseConfig(config)
	if err != nil {
		return plugin.NewInitError(plugin.CategoryConfig, fmt.Errorf("[plugins.mail.config] %w", err))
	}
	if h.opts.Dial == nil {
		return plugin.NewInitError(plugin.CategoryInternal, errors.New("mail: no dialer"))
	}
	if h.opts.DataDir == "" {
		return plugin.NewInitError(plugin.CategoryInternal, errors.New("mail: no data folder (CARAPACE_PLUGIN_DATA)"))
	}
	st, err := openStore(ctx, h.opts.DataDir)
	if err != nil {
		return plugin.NewInitError(plugin.CategoryInternal, err)
	}
	if err := st.recoverPublishing(ctx, h.now()); err != nil {
		st.close()
		return plugin.NewInitError(plugin.CategoryInternal, err)
	}
	h.cfg, h.services, h.st = cfg, services, st
	wctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	for _, a := range cfg.Accounts {
		if a.InboundGroup == "" {
			continue
		}
		h.watches.Add(1)
		go func() {
			defer h.watches.Done()
			h.watch(wctx, a)
		}()
	}
	return nil
}

// Shutdown implements plugin.Handler.
func (h *Handler) Shutdown(ctx context.Context) error {
	if h.stop != nil {
		h.stop()
	}
	done := make(chan struct{})
	go func() { h.watches.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	if h.st != nil {
		return h.st.close()
	}
	return nil
}

// HandleEvent implements plugin.EventHandler: the core tells a channel
// plugin when a session it started begins and ends; a mail's session
// needs no answer on the mail side, so these are only logged.
func (h *Handler) HandleEvent(_ context.Context, ev *plugin.Event) error {
	h.log.Debug("event", "topic", ev.Topic)
	return nil
}

// Invoke implements plugin.Handler.
func (h *Handler) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	switch req.Tool {
	case "mail_search":
		return h.search(ctx, req)
	case "mail_read":
		return h.read(ctx, req)
	case "mail_draft":
		return h.draft(ctx, req)
	case "mail_send":
		return h.sendTool(ctx, req)
	case "mail_mark":
		return h.mark(ctx, req)
	}
	return nil, plugin.NewToolError(fmt.Sprintf("the mail plugin does not provide %q", clipQ(req.Tool)), false)
}

// accountFor returns the account a call uses: the one named (which the
// group must be allowed), else the group's first.
func (h *Handler) accountFor(group, name, field string) (*Account, error) {
	allowed := h.cfg.accountsFor(group)
	if name == "" {
		if len(allowed) == 0 {
			return nil, toolErr(CodeNoAccount, field, "this group may use no mail account: the user grants one in [plugins.mail.config] groups")
		}
		return allowed[0], nil
	}
	if h.cfg.account(name) == nil {
		return nil, toolErr(CodeNoAccount, field, "there is no mail account %q", clipQ(name))
	}
	for _, a := range allowed {
		if a.Name == name {
			return a, nil
		}
	}
	return nil, toolErr(CodeAccountNotAllowed, field, "this group may not use the mail account %q: the user grants it in [plugins.mail.config] groups", clipQ(name))
}

// Argument helpers.

func argString(req *plugin.Request, k string) string {
	s, _ := req.Arguments[k].(string)
	return s
}

func argBool(req *plugin.Request, k string) bool {
	b, _ := req.Arguments[k].(bool)
	return b
}

func argInt(req *plugin.Request, k string, def int64) (int64, error) {
	v, ok := req.Arguments[k]
	if !ok {
		return def, nil
	}
	n, err := plugin.Int(v)
	if err != nil {
		return 0, toolErr(CodeBadArgument, k, "%s must be an integer", k)
	}
	return n, nil
}

func argStrings(req *plugin.Request, k string) ([]string, error) {
	v, ok := req.Arguments[k]
	if !ok || v == nil {
		return nil, nil
	}
	switch t := v.(type) {
	case string:
		return []string{t}, nil
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return nil, toolErr(CodeBadArgument, k, "%s must be a list of strings", k)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, toolErr(CodeBadArgument, k, "%s must be a list of strings", k)
}

// asMap turns a struct into the JSON object a tool returns.
func asMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}
