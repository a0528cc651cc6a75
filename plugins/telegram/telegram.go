package telegram

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/clock"
	"github.com/carapace-dev/carapace/internal/textutil"
	"github.com/carapace-dev/carapace/plugins/telegram/pairing"
)

// Name is the plugin's name.
const Name = "telegram"

//go:embed manifest.json
var manifest []byte

//go:embed skills
var skills embed.FS

// Manifest returns the plugin's manifest.json.
func Manifest() []byte { return manifest }

// Skills returns the plugin's skills folder.
func Skills() fs.FS {
	sub, _ := fs.Sub(skills, "skills")
	return sub
}

// CredentialKey is the key of the bot token in the credential store.
const CredentialKey = "bot_token"

// Timings of a chat's conversation.
const (
	// startTimeout bounds the wait for channel.started after a prompt is
	// handed over: the core drops an event silently when the group is not
	// configured for message.inbound or sessions are paused, and the chat
	// must not wait for ever.
	startTimeout = 15 * time.Minute
	// debounceCapFactor caps a burst: a prompt goes at the latest this
	// many debounce periods after its first message.
	debounceCapFactor = 3
	// defaultPollTimeout is the long-poll timeout of getUpdates.
	defaultPollTimeout = 30 * time.Second
)

// Options configure New.
type Options struct {
	// DataDir is the plugin's private data folder (CARAPACE_PLUGIN_DATA):
	// its database, its lock and the pairing file live there. Required.
	DataDir string
	// Clock is the plugin's time (default: the system clock).
	Clock Clock
	// Logger receives the plugin's log (default slog.Default()); an
	// out-of-process handler's stderr goes to the core's log.
	Logger *slog.Logger
	// PollTimeout is the getUpdates long-poll timeout (default 30 s).
	PollTimeout time.Duration
	// Transport carries the Bot API's requests: an out-of-process handler
	// gives the SDK's (plugin.HTTPClient), through its egress point, the
	// only way out of its confinement. Nil: http.DefaultTransport.
	Transport http.RoundTripper

	// crash, in tests, is called at the steps of the exactly-once
	// protocol (see the package documentation) to kill the process there,
	// and at "reconciled" once reconcile has decided.
	crash func(point string)
}

// Handler is the Telegram plugin. Create it with New.
type Handler struct {
	opts  Options
	clock Clock
	log   *slog.Logger

	cfg    config
	svc    plugin.Services
	lockF  *os.File
	db     *store
	bot    *bot.Bot
	api    botAPI
	send   *sender
	http   bot.HttpClient // every request to the Bot API: the egress guard
	token  string
	health *pollHealth
	botID  int64
	botUN  string

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // background work
	bgMu     sync.Mutex     // guards bgDone against wg.Add racing Shutdown's wg.Wait
	bgDone   bool           // Shutdown has begun waiting: no new background work
	pollDone chan struct{}
	unsynced *recordSync // the poll's: an update recorded relaxed, not yet known durable

	mu       sync.Mutex
	closed   bool
	owner    int64
	chats    map[int64]*chatState
	sessions map[string]int64 // session → chat, from channel.started
	pausedTo map[int64]bool   // prompts the owner was told wait for /resume
	down     map[string]bool  // the other plugins the owner was told are down (plugindown.go)
	surf     surfaceGrant     // what the plugin learned of its surface grant (learnSurface)

	cardMu sync.Mutex // approval cards: sending one against resolving it
}

// surfaceGrant is what the plugin knows of its surface capability.
type surfaceGrant uint8

const (
	surfaceUnknown surfaceGrant = iota // not asked yet
	surfaceGranted
	surfaceRefused
)

// chatState is what the plugin keeps in memory about one chat.
type chatState struct {
	id       int64
	inflight int64  // the prompt a session works on (or that was handed over), 0 if none
	session  string // its session, once channel.started said
	typing   context.CancelFunc
	debounce Timer // pending dispatch
	startT   Timer // the startTimeout of the prompt in flight
}

var (
	_ plugin.Handler      = (*Handler)(nil)
	_ plugin.EventHandler = (*Handler)(nil)
	_ plugin.Verifier     = (*Handler)(nil)
)

// New returns the plugin's handler.
func New(opts Options) *Handler {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PollTimeout <= 0 {
		opts.PollTimeout = defaultPollTimeout
	}
	h := &Handler{opts: opts, clock: opts.Clock, log: opts.Logger.With("plugin", Name),
		chats: map[int64]*chatState{}, sessions: map[string]int64{}, pausedTo: map[int64]bool{}, down: map[string]bool{}}
	h.health = &pollHealth{h: h}
	return h
}

func (h *Handler) crash(point string) {
	if h.opts.crash != nil {
		h.opts.crash(point)
	}
}

// Init reads the config and the token, takes the data folder's lock, opens
// the database, checks the token with getMe and starts polling.
func (h *Handler) Init(ctx context.Context, cfgMap map[string]any, svc plugin.Services) (err error) {
	cfg, err := parseConfig(cfgMap)
	if err != nil {
		return plugin.NewInitError(plugin.CategoryConfig, fmt.Errorf("telegram: [plugins.telegram.config] %w", err))
	}
	h.cfg, h.svc = cfg, svc
	if h.opts.DataDir == "" {
		return plugin.NewInitError(plugin.CategoryInternal, errors.New("telegram: no data folder (CARAPACE_PLUGIN_DATA): the core sets it when it starts the plugin"))
	}
	if err := os.MkdirAll(h.opts.DataDir, 0o700); err != nil {
		return plugin.NewInitError(plugin.CategoryInternal, fmt.Errorf("telegram: data folder: %w", err))
	}
	token, err := svc.ReadCredential(ctx, CredentialKey)
	if errors.Is(err, plugin.ErrNoCredential) || (err == nil && strings.TrimSpace(token) == "") {
		return plugin.NewInitError(plugin.CategoryAuth, errors.New("telegram: no bot token: create a bot with @BotFather in Telegram (/newbot), "+
			"then run `carapace auth set --plugin telegram --key bot_token` and `carapace plugin restart telegram`"))
	}
	if err != nil {
		return plugin.NewInitError(plugin.CategoryInternal, fmt.Errorf("telegram: read the bot token: %w", err))
	}
	token = strings.TrimSpace(token)

	if h.lockF, err = lock(h.opts.DataDir); err != nil {
		return plugin.NewInitError(plugin.CategoryInternal, err)
	}
	defer func() {
		if err != nil {
			h.release()
		}
	}()
	if h.db, err = openStore(ctx, h.opts.DataDir); err != nil {
		return plugin.NewInitError(plugin.CategoryInternal, err)
	}
	if err := h.db.prune(ctx, h.clock.Now()); err != nil {
		h.log.Warn("telegram: could not prune the database", "err", err)
	}
	owner := cfg.OwnerID
	if owner == 0 {
		if owner, err = h.db.metaInt(ctx, pairing.OwnerKey); err != nil {
			return plugin.NewInitError(plugin.CategoryInternal, fmt.Errorf("telegram: read the owner: %w", err))
		}
	}
	if owner == 0 && !pairing.Pending(h.opts.DataDir) {
		return plugin.NewInitError(plugin.CategoryConfig, errors.New("telegram: no owner: run `carapace telegram pair` and send the bot the /start code it prints, "+
			"or set owner_id (your Telegram user id) in [plugins.telegram.config]"))
	}
	h.owner = owner
	if owner == 0 {
		// Unpaired: the messages a former owner left queued are nobody's
		// now, and must not reach the agent (nor its answers the former
		// owner's chat) once someone else pairs.
		n, err := h.db.stopQueued(ctx, h.clock.Now())
		if err != nil {
			return plugin.NewInitError(plugin.CategoryInternal, fmt.Errorf("telegram: drop a former owner's queued messages: %w", err))
		}
		if n > 0 {
			h.log.Info("telegram: no owner: a former owner's queued messages and pending commands dropped", "prompts_and_actions", n)
		}
	}
	last, err := h.db.metaInt(ctx, "last_update_id")
	if err != nil {
		return plugin.NewInitError(plugin.CategoryInternal, fmt.Errorf("telegram: read the last update: %w", err))
	}

	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.token = token
	h.http = &egressGuard{client: &http.Client{Timeout: h.opts.PollTimeout + 15*time.Second, Transport: h.opts.Transport}}
	// The library sends; the plugin polls itself (poll.go).
	h.bot, err = bot.New(token,
		bot.WithServerURL(cfg.APIURL),
		bot.WithSkipGetMe(),
		bot.WithHTTPClient(h.opts.PollTimeout, h.http),
		bot.WithErrorsHandler(func(err error) { h.log.Warn("telegram: Bot API", "err", redact(err, token)) }),
	)
	if err != nil {
		return plugin.NewInitError(plugin.CategoryConfig, fmt.Errorf("telegram: %w", err))
	}
	h.api = h.bot
	h.send = newSender(h.api, h.clock, h.log)
	me, err := h.bot.GetMe(ctx)
	switch {
	case errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorNotFound):
		return plugin.NewInitError(plugin.CategoryAuth, errors.New("telegram: the Bot API refused the bot token: get it again from @BotFather (/token), "+
			"set it with `carapace auth set --plugin telegram --key bot_token`, then `carapace plugin restart telegram`"))
	case err != nil:
		return plugin.NewInitError(plugin.CategoryNetwork, fmt.Errorf("telegram: could not reach the Bot API at %s (getMe: %v): check the network or api_url, then `carapace plugin restart telegram`", cfg.APIURL, redact(err, token)))
	}
	h.botID, h.botUN = me.ID, me.Username
	if _, err := h.bot.DeleteWebhook(ctx, &bot.DeleteWebhookParams{}); err != nil {
		h.log.Warn("telegram: deleteWebhook failed; polling fails while a webhook is set", "err", redact(err, token))
	}
	if _, err := h.api.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: botCommands()}); err != nil {
		h.log.Warn("telegram: setMyCommands failed; the commands still work", "err", redact(err, token))
	}
	if err := h.recoverState(ctx); err != nil {
		return plugin.NewInitError(plugin.CategoryInternal, fmt.Errorf("telegram: recover the chats' state: %w", err))
	}
	h.pollDone = make(chan struct{})
	h.health.start()
	go func() {
		defer close(h.pollDone)
		h.poll(h.ctx, last)
	}()
	h.goBG(h.reconcile)
	h.log.Info("telegram: polling", "bot", me.Username, "owner_known", owner != 0, "pairing", owner == 0, "resume_after_update", last)
	return nil
}

// redact removes the token from an error's text.
func redact(err error, token string) string {
	if err == nil {
		return ""
	}
	return strings.ReplaceAll(err.Error(), token, "***")
}

// release frees what Init took.
func (h *Handler) release() {
	if h.cancel != nil {
		h.cancel()
	}
	if h.db != nil {
		_ = h.db.close()
		h.db = nil
	}
	_ = unlock(h.lockF)
	h.lockF = nil
}

// Shutdown stops polling and every background task, then closes the
// database and releases the lock.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	for _, c := range h.chats {
		if c.debounce != nil {
			c.debounce.Stop()
		}
		if c.startT != nil {
			c.startT.Stop()
		}
		if c.typing != nil {
			c.typing()
		}
	}
	h.mu.Unlock()
	h.health.stop()
	h.cancel()
	done := make(chan struct{})
	go func() {
		if h.pollDone != nil {
			<-h.pollDone
		}
		h.bgMu.Lock()
		h.bgDone = true
		h.bgMu.Unlock()
		h.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("telegram: shutdown: background work did not stop in time: %w", ctx.Err())
	}
	h.release()
	return nil
}

// Verify checks the token with getMe.
func (h *Handler) Verify(ctx context.Context) (*plugin.VerifyResult, error) {
	if h.bot == nil {
		return &plugin.VerifyResult{OK: false, Message: "the plugin has not started"}, nil
	}
	me, err := h.bot.GetMe(ctx)
	if err != nil {
		return &plugin.VerifyResult{OK: false, Message: "the Bot API did not accept the token or could not be reached"}, nil
	}
	return &plugin.VerifyResult{OK: true, Message: "bot @" + me.Username + " is reachable"}, nil
}

// goBG runs f in the background, tracked for Shutdown; once Shutdown
// waits, nothing new starts (what it would have done is in the database,
// or was a note), and goBG returns false.
func (h *Handler) goBG(f func()) bool {
	h.bgMu.Lock()
	defer h.bgMu.Unlock()
	if h.bgDone {
		return false
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		f()
	}()
	return true
}

// notify sends the owner's chat (or a bound chat) a short plain note, in
// the background.
func (h *Handler) notify(chat int64, text string) {
	h.goBG(func() {
		if _, err := h.send.send(h.ctx, chat, message{Text: text}); err != nil && h.ctx.Err() == nil {
			h.log.Warn("telegram: could not send a note", "chat", chat, "err", err)
		}
	})
}

// ownerID returns the owner's user id (0 while pairing).
func (h *Handler) ownerID() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.owner
}

// Invoke runs send_telegram.
func (h *Handler) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	switch req.Tool {
	case "send_telegram":
		return h.sendTool(ctx, req)
	}
	return nil, plugin.NewToolError(fmt.Sprintf("the telegram plugin has no tool %q; it has send_telegram", textutil.Clip(req.Tool, 64)), false)
}

// HandleEvent handles the events the plugin subscribes to (the manifest's
// "subscribes"): a chat's session started and its answer (onStarted,
// onReply in chats.go), a confirmation to show on the phone or to close
// there (onRequested, onResolved in approvals.go), and another plugin gone
// down (onPluginHealth in plugindown.go). The core delivers
// them at least once, in order. Only the core's own events count: another
// plugin could publish the same topics.
func (h *Handler) HandleEvent(ctx context.Context, ev *plugin.Event) error {
	if ev.Source != "core" {
		h.log.Warn("telegram: event not from the core ignored", "topic", ev.Topic, "source", ev.Source)
		return nil
	}
	switch ev.Topic {
	case plugin.TopicChannelStarted.Name():
		return h.onStarted(ctx, ev)
	case plugin.TopicChannelReply.Name():
		return h.onReply(ctx, ev)
	case plugin.TopicConfirmationRequested.Name():
		return h.onRequested(ctx, ev)
	case plugin.TopicConfirmationResolved.Name():
		return h.onResolved(ctx, ev)
	case plugin.TopicPluginHealth.Name():
		return h.onPluginHealth(ctx, ev)
	}
	return nil
}

// sendTool sends the agent's text to a chat of the session's group.
func (h *Handler) sendTool(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	text, _ := req.Arguments["text"].(string)
	if strings.TrimSpace(text) == "" {
		return nil, &plugin.ToolError{Code: "EMPTY_TEXT", Message: "text is empty: give the message to send", Field: "text"}
	}
	allowed := h.allowedChats(req.Group)
	h.mu.Lock()
	own, hasOwn := h.sessions[req.Session]
	h.mu.Unlock()
	var target int64
	if v, ok := req.Arguments["chat"]; ok {
		n, err := plugin.Int(v)
		if err != nil || !containsChat(allowed, n) {
			return nil, &plugin.ToolError{Code: "CHAT_NOT_ALLOWED", Field: "chat",
				Message: fmt.Sprintf("chat %v is not one this session may write to; allowed: %s", v, describeChats(allowed))}
		}
		target = n
	} else if hasOwn {
		target = own
	} else if o := h.ownerID(); o != 0 && h.cfg.OwnerGroup == req.Group {
		target = o
	} else {
		return nil, &plugin.ToolError{Code: "NO_CHAT", Field: "chat",
			Message: fmt.Sprintf("this session has no Telegram chat of its own; give \"chat\", one of: %s", describeChats(allowed))}
	}
	ids, err := h.send.send(ctx, target, message{Text: text})
	if err != nil {
		var tooMany *bot.TooManyRequestsError
		switch {
		case errors.Is(err, errMaybeSent):
			return nil, &plugin.ToolError{Code: "MAYBE_SENT", Message: fmt.Sprintf("Telegram did not answer after %d of the message's pieces were sent, "+
				"so the next piece may or may not have arrived; do not send it again: tell the user in your answer instead", len(ids))}
		case errors.As(err, &tooMany):
			return nil, &plugin.ToolError{Code: "TELEGRAM_FLOOD", Message: "Telegram is limiting this bot's messages; try again later", Retriable: true, RetryAfter: tooMany.RetryAfter}
		case ctx.Err() != nil:
			return nil, &plugin.ToolError{Code: "MAYBE_SENT", Message: fmt.Sprintf("the call timed out after %d pieces were sent; the rest was not sent", len(ids))}
		}
		h.log.Warn("telegram: send_telegram failed", "chat", target, "session", req.Session, "err", err)
		return nil, &plugin.ToolError{Code: "SEND_FAILED", Message: "Telegram refused the message (the bot may have been blocked or removed from the chat)"}
	}
	idsAny := make([]any, len(ids))
	for i, id := range ids {
		idsAny[i] = id
	}
	return map[string]any{"chat": target, "messages": len(ids), "message_ids": idsAny}, nil
}

// allowedChats lists the chats a session of group may write to: the
// owner's private chat if its group is owner_group, and the chats bound to
// group.
func (h *Handler) allowedChats(group string) []int64 {
	var out []int64
	if o := h.ownerID(); o != 0 && h.cfg.OwnerGroup == group {
		out = append(out, o)
	}
	var bound []int64
	for id, g := range h.cfg.Chats {
		if g == group {
			bound = append(bound, id)
		}
	}
	slices.Sort(bound)
	return append(out, bound...)
}

func containsChat(list []int64, id int64) bool {
	for _, c := range list {
		if c == id {
			return true
		}
	}
	return false
}

func describeChats(list []int64) string {
	if len(list) == 0 {
		return "none (no Telegram chat is bound to this group)"
	}
	s := make([]string, len(list))
	for i, c := range list {
		s[i] = strconv.FormatInt(c, 10)
	}
	return strings.Join(s, ", ")
}
