package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/carapace-dev/carapace/internal/textutil"
)

// The plugin polls getUpdates itself rather than through go-telegram/bot,
// for two reasons. The library decodes a whole batch at once, so one
// update it cannot decode (a forward_origin of a type added after it was
// written) fails the batch for ever: polling stops and a restart wedges
// on the same batch. And it asks for the next batch before the last is
// handled, which would let Telegram forget an update the plugin has not
// recorded. Here each update is decoded on its own (decodeUpdates): one
// that cannot be is recorded and audited as dropped and skipped; and the
// next getUpdates, which tells Telegram to forget the batch, is asked for
// only once every update of the batch is recorded in the database.

// Timings of the poll.
const (
	// pollBackoffMax caps the wait between failed getUpdates.
	pollBackoffMax = 30 * time.Second
	// maxUpdatesBody bounds one getUpdates answer (100 updates).
	maxUpdatesBody = 64 << 20
)

// updatesAnswer is a Bot API answer to getUpdates, its updates left raw.
type updatesAnswer struct {
	OK          bool              `json:"ok"`
	Result      []json.RawMessage `json:"result"`
	ErrorCode   int               `json:"error_code"`
	Description string            `json:"description"`
	Parameters  struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

// rawUpdate is one update of a getUpdates answer, decoded on its own.
type rawUpdate struct {
	ID      int64          // 0 when even its update_id could not be read
	Update  *models.Update // nil when it could not be decoded
	Info    updateInfo     // what a lenient look found (kind, chat, user), for one that could not
	Problem string         // why it could not be decoded: never its content
}

// apiError is an answer of the Bot API with ok false.
type apiError struct {
	Code        int
	Description string
	RetryAfter  int
}

func (e *apiError) Error() string {
	return fmt.Sprintf("the Bot API answered %d: %s", e.Code, textutil.Clip(e.Description, 200))
}

// decodeUpdates decodes a getUpdates answer update by update. It fails
// only when the answer as a whole is not one (not JSON, or ok false); an
// update that cannot be decoded is returned with its Problem, and the
// offset to ask for next is past every update whose id could be read.
func decodeUpdates(body []byte) ([]rawUpdate, error) {
	var a updatesAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("the getUpdates answer is not JSON (%d bytes)", len(body))
	}
	if !a.OK {
		return nil, &apiError{Code: a.ErrorCode, Description: a.Description, RetryAfter: a.Parameters.RetryAfter}
	}
	out := make([]rawUpdate, 0, len(a.Result))
	for _, raw := range a.Result {
		out = append(out, decodeUpdate(raw))
	}
	return out, nil
}

// decodeUpdate decodes one update; one it cannot, it describes leniently.
func decodeUpdate(raw json.RawMessage) rawUpdate {
	var u models.Update
	err := unmarshalSafely(raw, &u)
	if err == nil && u.ID > 0 {
		return rawUpdate{ID: u.ID, Update: &u}
	}
	r := rawUpdate{Info: lenientInfo(raw)}
	r.ID = r.Info.ID
	switch {
	case err == nil:
		r.Problem = "no update_id"
	default:
		r.Problem = decodeProblem(err)
	}
	return r
}

// errDecoderPanicked: the library's decoder panicked on an update.
var errDecoderPanicked = errors.New("the decoder panicked")

// unmarshalSafely is json.Unmarshal, with a panic of a decoder (the
// library's UnmarshalJSON methods) turned into an error: one hostile
// update must not take the plugin down.
func unmarshalSafely(raw []byte, v any) (err error) {
	defer func() {
		if recover() != nil {
			err = errDecoderPanicked
		}
	}()
	return json.Unmarshal(raw, v)
}

// decodeProblem says why an update could not be decoded without quoting
// it: a JSON type error names the field, anything else says no more.
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && fieldRE.MatchString(te.Field) {
		return "could not be decoded: field " + te.Field + " has an unexpected type"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "could not be decoded: not JSON"
	}
	return "could not be decoded: a value this version of the plugin does not know (a newer kind of Telegram update?)"
}

// lenientInfo reads what it can of an update that could not be decoded:
// its id, its kind (its field), and the chat and sender of a message or
// a button press — each part on its own, ignoring what does not fit.
func lenientInfo(raw json.RawMessage) updateInfo {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return updateInfo{Kind: "other"}
	}
	var in updateInfo
	_ = json.Unmarshal(top["update_id"], &in.ID)
	var kinds []string
	for k := range top {
		if k != "update_id" {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	in.Kind = "other"
	if len(kinds) > 0 && kindRE.MatchString(kinds[0]) {
		in.Kind = kinds[0]
	}
	var body struct {
		Chat *struct {
			ID   int64  `json:"id"`
			Type string `json:"type"`
		} `json:"chat"`
		From *struct {
			ID int64 `json:"id"`
		} `json:"from"`
		Message *struct {
			Chat *struct {
				ID   int64  `json:"id"`
				Type string `json:"type"`
			} `json:"chat"`
		} `json:"message"`
	}
	if len(kinds) > 0 {
		lenient(top[kinds[0]], &body.Chat, "chat")
		lenient(top[kinds[0]], &body.From, "from")
		lenient(top[kinds[0]], &body.Message, "message")
	}
	if body.From != nil {
		in.User = body.From.ID
	}
	switch {
	case body.Chat != nil:
		in.Chat, in.ChatType = body.Chat.ID, body.Chat.Type
	case body.Message != nil && body.Message.Chat != nil:
		in.Chat, in.ChatType = body.Message.Chat.ID, body.Message.Chat.Type
	}
	if !kindRE.MatchString(in.ChatType) {
		in.ChatType = ""
	}
	return in
}

// kindRE is what an update's kind or a chat's type looks like; what an
// undecodable update has in their place is not recorded.
var kindRE = regexp.MustCompile(`^[a-z_]{1,40}$`)

// fieldRE is a field path of models.Update, which a decoding error may
// name.
var fieldRE = regexp.MustCompile(`^[a-z_][a-z0-9_.]{0,79}$`)

// lenient decodes obj's field key into v, leaving v alone if it does not
// fit.
func lenient[T any](obj json.RawMessage, v *T, key string) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(obj, &fields) != nil {
		return
	}
	var x T
	if json.Unmarshal(fields[key], &x) == nil {
		*v = x
	}
}

// poll long-polls getUpdates from offset last+1 until ctx ends, handling
// each update (in order, each recorded before the next getUpdates) and
// keeping the poll's health (pollHealth).
func (h *Handler) poll(ctx context.Context, last int64) {
	h.replayActions() // before any newer update
	offset := last + 1
	wait := time.Duration(0)
	for ctx.Err() == nil {
		if wait > 0 && sleep(ctx, h.clock, wait) != nil {
			return
		}
		if !h.syncRecorded(ctx) {
			return // stopping: the update stays unconfirmed
		}
		ups, err := h.getUpdates(ctx, offset)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = h.pollFailed(err, wait)
			continue
		}
		wait = 0
		h.health.ok()
		for _, u := range ups {
			if !h.handleRaw(ctx, u) {
				return // stopping: the update stays unconfirmed
			}
			if u.ID >= offset {
				offset = u.ID + 1
			}
		}
	}
}

// pollFailed logs a failed getUpdates, records it for the health report
// and returns how long to wait before the next.
func (h *Handler) pollFailed(err error, wait time.Duration) time.Duration {
	wait = min(max(2*wait, 500*time.Millisecond), pollBackoffMax)
	var ae *apiError
	if errors.As(err, &ae) && ae.RetryAfter > 0 {
		wait = min(time.Duration(ae.RetryAfter)*time.Second, maxWait)
	}
	why := err.Error()
	if errors.As(err, &ae) {
		switch ae.Code {
		case http.StatusUnauthorized, http.StatusNotFound:
			why = "the Bot API refused the bot token (set it again: carapace auth set --plugin telegram --key bot_token)"
		case http.StatusConflict:
			why = "another program polls this bot, or a webhook is set (" + textutil.Clip(ae.Description, 120) + ")"
		}
	}
	h.health.failed(why)
	h.log.Warn("telegram: getUpdates failed; retrying", "err", why, "retry_in", wait)
	return wait
}

// getUpdates asks for the updates from offset on, waiting up to the poll
// timeout for one.
func (h *Handler) getUpdates(ctx context.Context, offset int64) ([]rawUpdate, error) {
	params, _ := json.Marshal(map[string]any{
		"offset":          offset,
		"timeout":         int(h.longPoll().Seconds()),
		"allowed_updates": []string{models.AllowedUpdateMessage, models.AllowedUpdateCallbackQuery},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.APIURL+"/bot"+h.token+"/getUpdates", bytes.NewReader(params))
	if err != nil {
		return nil, errors.New("telegram: getUpdates: " + redact(err, h.token))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.http.Do(req)
	if err != nil {
		return nil, errors.New("telegram: getUpdates: " + redact(err, h.token))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpdatesBody))
	if err != nil {
		return nil, errors.New("telegram: getUpdates: read the answer: " + redact(err, h.token))
	}
	return decodeUpdates(body)
}

// longPoll is how long one getUpdates waits for an update: the poll
// timeout, but at most half of degraded_after_s, so that a poll that
// works answers at least twice before the plugin would call itself
// degraded.
func (h *Handler) longPoll() time.Duration {
	return max(min(h.opts.PollTimeout, h.cfg.StaleAfter/2), time.Second)
}

// handleRaw handles one update of a batch; false when the plugin stops
// before it is recorded.
func (h *Handler) handleRaw(ctx context.Context, u rawUpdate) bool {
	switch {
	case u.Update != nil:
		return h.onUpdate(ctx, u.Update)
	case u.ID == 0:
		// Nothing to record it by, and nothing to confirm it with but
		// the updates around it.
		h.log.Warn("telegram: an update without a readable update_id skipped", "type", u.Info.Kind, "reason", u.Problem)
		return true
	}
	return h.onUndecodable(ctx, u)
}

// onUndecodable records an update that could not be decoded as dropped,
// audits it (never its content) and, when it is the owner's in a chat the
// plugin listens to, tells the owner it could not be read.
func (h *Handler) onUndecodable(ctx context.Context, u rawUpdate) bool {
	fresh, ok := h.record(ctx, u.Info, "drop: "+u.Problem, false, nil)
	if !ok {
		return false
	}
	if !fresh {
		return true
	}
	h.dropped(u.Info, u.Problem)
	owner := h.ownerID()
	if _, mapped := h.cfg.groupOf(owner, u.Info.Chat); owner != 0 && u.Info.User == owner && mapped {
		h.notify(u.Info.Chat, fmt.Sprintf("A message of yours (update %d) could not be read by this version of the Carapace Telegram plugin, "+
			"so it was skipped: it may be of a kind Telegram added recently. Send it again as plain text.", u.ID))
	}
	return true
}

// pollHealth reports the poll degraded, through the core, when no
// getUpdates has succeeded for degraded_after_s (config.StaleAfter), and
// healthy again at the next that does. Meanwhile the plugin serves calls (send_telegram),
// but nothing the owner writes arrives; `carapace plugin list`, the watch
// stream, the menu and `carapace doctor` say so.
type pollHealth struct {
	h *Handler

	mu       sync.Mutex
	timer    Timer
	degraded bool
	lastErr  string    // the last getUpdates failure, for the report
	lastOK   time.Time // the last successful getUpdates (or the start)
	stopped  bool
}

// start arms the watch at the poll's start.
func (p *pollHealth) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastOK = p.h.clock.Now()
	p.armLocked()
}

// armLocked (re)starts the stale timer; p.mu is held.
func (p *pollHealth) armLocked() {
	if p.timer != nil {
		p.timer.Stop()
	}
	if !p.stopped {
		p.timer = p.h.clock.AfterFunc(p.h.cfg.StaleAfter, p.stale)
	}
}

// ok records a successful getUpdates; a degraded poll is reported healthy.
func (p *pollHealth) ok() {
	p.mu.Lock()
	p.lastOK, p.lastErr = p.h.clock.Now(), ""
	p.armLocked()
	was := p.degraded
	p.degraded = false
	p.mu.Unlock()
	if was {
		p.h.log.Info("telegram: getUpdates works again")
		p.report(false, "")
	}
}

// failed records why a getUpdates failed.
func (p *pollHealth) failed(why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr = why
}

// stale fires when no getUpdates succeeded for StaleAfter.
func (p *pollHealth) stale() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.degraded = true
	why := fmt.Sprintf("no message from Telegram can arrive: no getUpdates has succeeded since %s", p.lastOK.UTC().Format(time.RFC3339))
	if p.lastErr != "" {
		why += " (last error: " + p.lastErr + ")"
	} else {
		why += " (the poll is stuck)"
	}
	p.armLocked() // report again, with the newest error, if it goes on
	p.mu.Unlock()
	p.h.log.Error("telegram: "+why, "fix", "check the network and api_url; `carapace plugin restart telegram`")
	p.report(true, why)
}

// stop ends the watch (Shutdown).
func (p *pollHealth) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.timer != nil {
		p.timer.Stop()
	}
}

// report tells the core, logging a failure (an old core, or one stopping).
func (p *pollHealth) report(degraded bool, why string) {
	ctx, cancel := context.WithTimeout(p.h.ctx, 10*time.Second)
	defer cancel()
	if err := p.h.svc.ReportHealth(ctx, degraded, why); err != nil && p.h.ctx.Err() == nil {
		p.h.log.Warn("telegram: could not report the poll's health to the core", "degraded", degraded, "err", err)
	}
}
