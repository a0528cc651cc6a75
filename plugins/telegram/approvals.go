package telegram

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

var (
	confIDRE   = regexp.MustCompile(`^[0-9a-f]{32}$`)
	argsHashRE = regexp.MustCompile(`^[0-9a-f]{12,128}$`)
	// previewDigestRE: a plugin's digest (plugin.Preview.Check), or none.
	previewDigestRE = regexp.MustCompile(`^[!-~]{0,128}$`)
)

// cardArgs is the most of the arguments a card shows (runes); the rest
// is one button away (Details).
const cardArgs = 1500

// maxHiddenShown is how many hidden values a card lists one by one.
const maxHiddenShown = 5

// surface reports whether the core grants the plugin the surface
// services: what the plugin learned (reconcile asks at start); if it has
// not learned it yet, it asks now.
func (h *Handler) surface(ctx context.Context) bool {
	h.mu.Lock()
	g := h.surf
	h.mu.Unlock()
	if g != surfaceUnknown {
		return g == surfaceGranted
	}
	_, err := h.svc.CoreStatus(ctx)
	h.learnSurface(err)
	return !errors.Is(err, plugin.ErrNotSurface)
}

// learnSurface records what a surface service's answer says of the grant,
// which the core fixes for the life of the plugin's instance (a restart,
// which reads config.toml again, starts a new one): ErrNotSurface refuses
// it, logged once; an answer grants it; another error says nothing.
func (h *Handler) learnSurface(err error) {
	g := surfaceGranted
	switch {
	case errors.Is(err, plugin.ErrNotSurface):
		g = surfaceRefused
	case err != nil:
		return
	}
	h.mu.Lock()
	was := h.surf
	h.surf = g
	h.mu.Unlock()
	if g == surfaceRefused && was != surfaceRefused {
		h.log.Info("telegram: approvals on the phone are off: grant them with [plugins.telegram] surface = true in config.toml")
	}
}

// onRequested sends the owner an approval card with Approve and Deny
// buttons.
func (h *Handler) onRequested(ctx context.Context, ev *plugin.Event) error {
	c, err := plugin.TopicConfirmationRequested.Decode(ev) // the core's api.Confirmation, as the control API shows it
	if err != nil {
		return fmt.Errorf("telegram: %w", err)
	}
	owner := h.ownerID()
	if owner == 0 || !h.surface(ctx) {
		return nil
	}
	if !confIDRE.MatchString(c.ID) || !argsHashRE.MatchString(c.ArgsHash) || !previewDigestRE.MatchString(c.PreviewDigest) {
		return fmt.Errorf("telegram: confirmation.requested with a malformed id, args_hash or preview_digest: ignored")
	}
	v := renderApproval(c)
	tokens := map[string]string{}
	actions := []string{"deny"}
	if v.Approve || v.DetailsApprove {
		actions = append(actions, "approve")
	}
	if v.Details {
		actions = append(actions, "details")
	}
	for _, a := range actions {
		t, err := newToken()
		if err != nil {
			return err
		}
		tokens[a] = t
	}
	htmlText, plain, full := v.HTML, v.Plain, v.Args
	h.cardMu.Lock()
	defer h.cardMu.Unlock()
	var exists bool
	err = h.db.tx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT 1 FROM cards WHERE confirmation = ?", c.ID).Scan(new(int)); err == nil {
			exists = true
			return nil
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO cards(confirmation, args_hash, preview_digest, chat_id, text, arguments, state, created_at) VALUES(?, ?, ?, ?, ?, ?, 'pending', ?)",
			c.ID, c.ArgsHash, c.PreviewDigest, owner, htmlText, full, ms(h.clock.Now())); err != nil {
			return err
		}
		for a, t := range tokens {
			if _, err := tx.ExecContext(ctx, "INSERT INTO tokens(token, confirmation, action) VALUES(?, ?, ?)", t, c.ID, a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("telegram: record the approval card of %s: %w", c.ID, err)
	}
	if exists {
		return nil
	}
	row := []models.InlineKeyboardButton{}
	if t, ok := tokens["approve"]; ok && v.Approve {
		row = append(row, models.InlineKeyboardButton{Text: "✅ Approve", CallbackData: t})
	}
	row = append(row, models.InlineKeyboardButton{Text: "❌ Deny", CallbackData: tokens["deny"]})
	kb := [][]models.InlineKeyboardButton{row}
	if t, ok := tokens["details"]; ok {
		kb = append(kb, []models.InlineKeyboardButton{{Text: "📄 Details", CallbackData: t}})
	}
	ids, err := h.send.send(h.ctx, owner, message{Text: htmlText, HTML: true, Plain: plain, Markup: &models.InlineKeyboardMarkup{InlineKeyboard: kb}})
	if err != nil || len(ids) == 0 {
		h.log.Error("telegram: could not send an approval card", "confirmation", c.ID, "err", err)
		return nil
	}
	if _, err := h.db.db.ExecContext(ctx, "UPDATE cards SET message_id = ? WHERE confirmation = ?", ids[0], c.ID); err != nil {
		h.log.Error("telegram: record the approval card's message", "confirmation", c.ID, "err", err)
	}
	h.log.Info("telegram: approval card shown", "confirmation", c.ID, "tool", c.Tool, "group", c.Group, "message", ids[0])
	return nil
}

// approvalView is how the plugin shows a confirmation: its card, and
// what the card's Details button sends. What you approve is what runs:
// Approve is offered only where every byte that runs has been shown —
// on the card when nothing is hidden, left out or cut; on the last
// message of Details when the card cuts the arguments; never when the
// core's sanitiser hid something (Hidden) or the arguments were left out
// of the event (the owner reviews and approves those on the computer).
type approvalView struct {
	HTML, Plain string // the card, as HTML and as its plain fallback
	Args        string // the arguments as displayed, whole: what Details sends
	Approve     bool   // the card offers Approve
	Details     bool   // the card cuts the arguments: Details sends them all
	// DetailsApprove says the last message of Details offers Approve:
	// nothing is hidden, and Details can show every byte.
	DetailsApprove bool
}

// renderApproval renders c's card and decides where Approve may appear.
// Unlike api.Confirmation.Exact it does not count Raw arguments as exact:
// the core never sends a plugin the arguments as they run, and a plugin
// cannot make a raw decision.
//
// A confirmation with a preview (what a mail to send says) shows it whole
// on the card, above the arguments, and may be approved there only; a
// preview the card cannot hold whole in one message (maxCard), or that
// the event left out, is not shown: the card says where to read it, and
// offers Deny only.
func renderApproval(c api.Confirmation) approvalView {
	v := approvalView{Args: displayArgs(c.Arguments)}
	hasPreview := c.Preview != "" || c.PreviewOmitted || c.PreviewDigest != ""
	exact := !c.ArgumentsOmitted && len(c.Hidden) == 0 && (!hasPreview || c.Preview != "" && c.PreviewDigest != "" && !c.PreviewOmitted)
	shown, cut := v.Args, false
	if r := []rune(v.Args); !c.ArgumentsOmitted && len(r) > cardArgs {
		shown, cut = string(r[:cardArgs]), true
	}
	v.Details = cut
	v.Approve = exact && !cut
	if exact && cut && !hasPreview { // Details shows the arguments, not the preview
		_, v.DetailsApprove = detailsPieces(c.ID, v.Args)
	}
	pv := cardPreview{show: c.Preview != "" && !c.PreviewOmitted}
	if hasPreview {
		pv.text = escapeInvisible(strings.TrimSuffix(c.Preview, "\n"))
		pv.chars = utf8.RuneCountInString(c.Preview)
	}
	v.HTML, v.Plain = cardText(c, pv, shown, cut, len([]rune(v.Args)), v.DetailsApprove)
	if pv.show && units(v.Plain) > maxCard {
		pv.show, v.Approve = false, false
		v.HTML, v.Plain = cardText(c, pv, shown, cut, len([]rune(v.Args)), v.DetailsApprove)
	}
	return v
}

// maxCard is the most UTF-16 units a card's text may have with a preview
// shown whole: one message, with room for the outcome its edit appends
// (closeCard).
const maxCard = MaxMessage - 300

// cardPreview is what a card shows of a confirmation's preview.
type cardPreview struct {
	text  string // the preview, escaped (escapeInvisible); "" for none
	chars int    // its length in characters, as it came
	show  bool   // the card shows it whole; else it says where to read it
}

// units is how many UTF-16 code units s has: what Telegram counts.
func units(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// detailsHeader starts the first message of Details.
func detailsHeader(id string) string { return "Arguments of " + api.ShortID(id) + ":\n" }

// detailsPieces is what Details sends: the arguments as displayed, whole,
// in messages Telegram accepts (SplitExact). ok is false when they cannot
// be split so that every byte shows (a run of spaces longer than a
// message): then the last message offers no Approve.
func detailsPieces(id, args string) (pieces []string, ok bool) {
	return SplitExact(detailsHeader(id)+args, MaxMessage)
}

// cardText renders a card: HTML with every value escaped, and the same as
// plain text for the fallback. args is what the card shows of the
// arguments, total how many characters they have; detailsApprove says the
// last message of Details will offer Approve.
func cardText(c api.Confirmation, pv cardPreview, args string, cut bool, total int, detailsApprove bool) (htmlText, plain string) {
	digest := c.ArgsHash
	if len(digest) > 12 {
		digest = digest[:12]
	}
	var hb, pb strings.Builder
	line := func(label, value string, code bool) {
		if code {
			fmt.Fprintf(&hb, "%s: <code>%s</code>\n", label, html.EscapeString(value))
		} else {
			fmt.Fprintf(&hb, "%s: %s\n", label, html.EscapeString(value))
		}
		fmt.Fprintf(&pb, "%s: %s\n", label, value)
	}
	text := func(s string) {
		hb.WriteString(html.EscapeString(s))
		pb.WriteString(s)
	}
	id8 := api.ShortID(c.ID)
	hb.WriteString("<b>Approval needed</b>\n")
	pb.WriteString("Approval needed\n")
	line("Tool", escapeInvisible(c.Tool), true)
	line("Group", escapeInvisible(c.Group), true)
	line("Digest", digest, true)
	line("Id", id8, true)
	if !c.ExpiresAt.IsZero() {
		line("Expires", c.ExpiresAt.UTC().Format("15:04:05 MST"), false)
	}
	if sum := escapeInvisible(textutil.Clip(c.Summary, 1000)); sum != "" {
		text("\n" + sum + "\n")
	}
	if why := whyText(c.Why, id8); why != "" {
		text("\n" + why)
	}
	switch {
	case pv.show:
		hb.WriteString("\nWhat it will do:\n<pre>" + html.EscapeString(pv.text) + "</pre>\n")
		pb.WriteString("\nWhat it will do:\n" + pv.text + "\n")
	case c.PreviewOmitted || pv.text != "":
		size := ""
		if pv.chars > 0 {
			size = fmt.Sprintf(" (%d characters)", pv.chars)
		}
		text(fmt.Sprintf("\nWhat it will do%s is too long for a Telegram message, so it cannot be approved here: read it whole on the computer (carapace confirm show %s) and approve there with carapace confirm approve %s. You can deny here.\n",
			size, id8, id8))
	}
	if c.ArgumentsOmitted {
		text("\nThe arguments are too large for this card: review them on the computer (carapace confirm show " + id8 +
			") and approve there with carapace confirm approve " + id8 + ". You can deny here.")
		return hb.String(), pb.String()
	}
	if len(c.Hidden) > 0 {
		text("\n" + hiddenText(c.Hidden, id8))
	}
	hb.WriteString("\nArguments:\n<pre>" + html.EscapeString(args) + "</pre>")
	pb.WriteString("\nArguments:\n" + args)
	if cut {
		s := fmt.Sprintf("\n(%d of %d characters shown: Details sends them all", len([]rune(args)), total)
		switch {
		case detailsApprove:
			s += "; Approve is on its last message, once you have seen every one)"
		case len(c.Hidden) == 0:
			s += "; they cannot all be shown exactly here, so approve on the computer: carapace confirm approve " + id8 + ")"
		default:
			s += ")"
		}
		text(s)
	}
	return hb.String(), pb.String()
}

// hiddenText says what the core's sanitiser hid from a card, and where to
// see and approve what runs.
func hiddenText(hidden []api.Hidden, id8 string) string {
	var b strings.Builder
	b.WriteString("Hidden: the arguments below are not what runs — the core redacted values that looked like secrets — so they cannot be approved here.\n")
	for i, h := range hidden {
		if i == maxHiddenShown {
			fmt.Fprintf(&b, "• and %d more\n", len(hidden)-i)
			break
		}
		path := escapeInvisible(textutil.Clip(h.Path, 100))
		if path == "" {
			path = "(the arguments)"
		}
		chars := "an unknown number of characters"
		if h.Chars > 0 {
			chars = fmt.Sprintf("%d characters", h.Chars)
		}
		fmt.Fprintf(&b, "• %s: %s, %s hidden\n", path, escapeInvisible(textutil.Clip(h.Kind, 40)), chars)
	}
	fmt.Fprintf(&b, "To see what runs and approve it, on the computer: carapace confirm show --raw %s, then carapace confirm approve --raw %s. You can deny here.\n", id8, id8)
	return b.String()
}

// displayArgs renders arguments for a person: indented JSON, every leaf
// value as it is, with characters that would hide or reorder text (format
// and bidirectional controls, separators, private-use and unassigned
// characters) written as JSON escapes, so that what is shown is what
// runs.
func displayArgs(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers exactly as sent
	var v any
	if err := dec.Decode(&v); err != nil {
		return escapeInvisible(string(raw))
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // the card escapes for HTML itself; here < stays <
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return escapeInvisible(string(raw))
	}
	return escapeInvisible(strings.TrimSuffix(out.String(), "\n"))
}

// escapeInvisible writes characters a person cannot see as \uXXXX (each
// half of an astral character's surrogate pair as its own escape). Inside
// a JSON string that is the same value; such characters cannot occur
// outside one in valid JSON.
func escapeInvisible(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case !invisible(r):
			b.WriteRune(r)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04X\u%04X`, hi, lo)
		default:
			fmt.Fprintf(&b, `\u%04X`, r)
		}
	}
	return b.String()
}

// invisible reports whether r hides or reorders text, or shows as nothing
// a person can check: control, format (bidirectional overrides, zero-width
// characters), private-use, surrogate and unassigned code points, line and
// paragraph separators, and U+FFFD (which invalid UTF-8 decodes to).
func invisible(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r == utf8.RuneError:
		return true
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zl, unicode.Zp):
		return true
	}
	return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs)
}

// newToken returns a random callback token: 16 bytes, 22 characters.
func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("telegram: random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// pressEffect does what the owner's press of a card's button asks
// (classify let only the owner's presses in the owner's private chat
// through) and returns how to answer it. Deciding happens here; the
// answer, and the arguments a Details press asks for, are sent by the
// reply. A press run again after a crash decides nothing twice: the
// core refuses a second decision (ErrAlreadyDecided), and a card that
// ended has no valid buttons.
//
// A button counts only on the message it was shown on: Details and Deny
// on the card, Approve on the card when the card shows every byte, else
// only on the last message of Details (and Deny there too).
func (h *Handler) pressEffect(a ownerAction) (reply func()) {
	answer := func(text string) func() { return func() { h.answerPress(a.Query, text) } }
	var conf, action, argsHash, previewDigest, args string
	var msgID, detailsID int64
	err := h.db.db.QueryRowContext(h.ctx, `SELECT t.confirmation, t.action, c.args_hash, c.preview_digest, c.arguments, c.message_id, c.details_message
		FROM tokens t JOIN cards c ON c.confirmation = t.confirmation WHERE t.token = ? AND c.state = 'pending'`, a.Args).
		Scan(&conf, &action, &argsHash, &previewDigest, &args, &msgID, &detailsID)
	if err != nil {
		return answer("This button is no longer valid.")
	}
	tokens, err := h.cardTokens(conf)
	if err != nil {
		h.log.Error("telegram: read a card's buttons", "confirmation", conf, "err", err)
		return answer("This button is no longer valid.")
	}
	onCard := msgID == 0 || int64(a.Message) == msgID
	onDetails := detailsID != 0 && int64(a.Message) == detailsID
	_, cut := tokens["details"]
	valid := map[string]bool{"details": onCard, "deny": onCard || onDetails, "approve": (!cut && onCard) || (cut && onDetails)}
	if !valid[action] {
		return answer("This button is no longer valid.")
	}
	owner := h.ownerID()
	if action == "details" {
		return func() {
			h.answerPress(a.Query, "Sending the full arguments.")
			h.sendDetails(conf, args, tokens)
		}
	}
	approve := action == "approve"
	err = h.svc.Decide(h.ctx, plugin.Decision{ID: conf, Approve: approve, ArgsHash: argsHash, PreviewDigest: previewDigest, Decider: formatID(owner)})
	switch {
	case err == nil:
		h.log.Info("telegram: decided on the phone", "confirmation", conf, "approve", approve)
		if approve {
			return answer("Approved.")
		}
		return answer("Denied.")
	case errors.Is(err, plugin.ErrAlreadyDecided):
		return answer("Already decided: " + strings.TrimPrefix(strings.TrimPrefix(err.Error(), plugin.ErrAlreadyDecided.Error()), ": "))
	case errors.Is(err, plugin.ErrNotSurface):
		return answer("Approving on Telegram is not allowed: set [plugins.telegram] surface = true in config.toml.")
	}
	h.log.Warn("telegram: the core refused a decision", "confirmation", conf, "err", err)
	return answer("Not decided: " + err.Error())
}

// cardTokens returns the buttons of confirmation conf's card: action →
// token.
func (h *Handler) cardTokens(conf string) (map[string]string, error) {
	rows, err := h.db.db.QueryContext(h.ctx, "SELECT action, token FROM tokens WHERE confirmation = ?", conf)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var a, t string
		if err := rows.Scan(&a, &t); err != nil {
			return nil, err
		}
		out[a] = t
	}
	return out, rows.Err()
}

// sendDetails sends the owner every byte of a card's arguments, in as
// many messages as it takes. When the card has an Approve button (nothing
// is hidden) and the pieces show every byte, the last message carries
// Approve and Deny: the owner has then seen everything that runs.
func (h *Handler) sendDetails(conf, args string, tokens map[string]string) {
	owner := h.ownerID()
	pieces, exact := detailsPieces(conf, args)
	if !exact {
		pieces = Split(detailsHeader(conf)+args, MaxMessage)
	}
	var markup models.ReplyMarkup
	if t, ok := tokens["approve"]; ok && exact {
		markup = &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{
			{Text: "✅ Approve", CallbackData: t}, {Text: "❌ Deny", CallbackData: tokens["deny"]}}}}
	}
	ids, err := h.send.sendPieces(h.ctx, owner, pieces, markup)
	if err != nil {
		h.log.Warn("telegram: could not send an approval's details", "confirmation", conf, "err", err)
		return
	}
	if markup == nil || len(ids) == 0 {
		return
	}
	h.cardMu.Lock()
	defer h.cardMu.Unlock()
	res, err := h.db.db.ExecContext(h.ctx, "UPDATE cards SET details_message = ? WHERE confirmation = ? AND state = 'pending'", ids[len(ids)-1], conf)
	if err != nil {
		h.log.Error("telegram: record the details' message", "confirmation", conf, "err", err)
		return
	}
	if n, _ := res.RowsAffected(); n == 0 { // it ended meanwhile: its buttons go
		h.send.clearButtons(h.ctx, owner, ids[len(ids)-1])
	}
}

// answerPress answers a button press (the phone stops its spinner and
// shows text for a moment).
func (h *Handler) answerPress(query, text string) {
	if _, err := h.api.AnswerCallbackQuery(h.ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: query, Text: textutil.Clip(text, 190)}); err != nil {
		h.log.Warn("telegram: answerCallbackQuery failed", "err", err)
	}
}

// onResolved edits the card of a confirmation decided anywhere, expired or
// withdrawn: it says how it ended, and loses its buttons.
func (h *Handler) onResolved(ctx context.Context, ev *plugin.Event) error {
	c, err := plugin.TopicConfirmationResolved.Decode(ev)
	if err != nil {
		return fmt.Errorf("telegram: %w", err)
	}
	return h.closeCard(ctx, c.ID, nonEmpty(c.Decision, "resolved"), outcomeText(c))
}

// closeCard ends the pending card of confirmation id, if there is one: its
// state becomes state, its buttons' tokens go, and the message on the
// phone gets outcome below its text and loses its buttons.
func (h *Handler) closeCard(ctx context.Context, id, state, outcome string) error {
	h.cardMu.Lock()
	defer h.cardMu.Unlock()
	var text string
	var chat, msgID, detailsID int64
	err := h.db.db.QueryRowContext(ctx, "SELECT text, chat_id, message_id, details_message FROM cards WHERE confirmation = ? AND state = 'pending'", id).
		Scan(&text, &chat, &msgID, &detailsID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("telegram: read the card of %s: %w", id, err)
	}
	err = h.db.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE cards SET state = ? WHERE confirmation = ?", state, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM tokens WHERE confirmation = ?", id)
		return err
	})
	if err != nil {
		return fmt.Errorf("telegram: record how %s ended: %w", id, err)
	}
	if detailsID != 0 {
		h.send.clearButtons(h.ctx, chat, int(detailsID))
	}
	if msgID == 0 {
		return nil // the card never reached the phone
	}
	newHTML := text + "\n\n<b>" + html.EscapeString(outcome) + "</b>"
	if err := h.send.edit(h.ctx, chat, int(msgID), newHTML, outcome); err != nil {
		h.log.Warn("telegram: could not edit an approval card", "confirmation", id, "err", err)
	}
	return nil
}

// closeStaleCards ends the cards still pending when the core restarted:
// their confirmations died with it.
func (h *Handler) closeStaleCards(ctx context.Context) {
	rows, err := h.db.db.QueryContext(ctx, "SELECT confirmation FROM cards WHERE state = 'pending'")
	if err != nil {
		h.log.Error("telegram: read the pending approval cards", "err", err)
		return
	}
	var ids []string
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	for _, id := range ids {
		var chat, msgID int64
		_ = h.db.db.QueryRowContext(ctx, "SELECT chat_id, message_id FROM cards WHERE confirmation = ?", id).Scan(&chat, &msgID)
		if err := h.closeCard(ctx, id, "restarted", outcomeRestarted); err != nil {
			h.log.Error("telegram: close a stale approval card", "confirmation", id, "err", err)
			continue
		}
		if msgID == 0 && chat != 0 {
			// The plugin died between sending the card and recording its
			// message: it may be on the phone, with buttons; say it ended.
			if _, err := h.send.send(ctx, chat, message{Text: "Approval " + api.ShortID(id) + ": " + outcomeRestarted}); err != nil {
				h.log.Warn("telegram: could not say an approval ended", "confirmation", id, "err", err)
			}
		}
	}
}

// outcomeText says how a confirmation ended.
// outcomeRestarted ends a card whose confirmation died with the core.
const outcomeRestarted = "Ended: Carapace restarted, and the call waiting for this approval ended with it."

func outcomeText(c api.Confirmation) string {
	by := ""
	if c.Surface != "" {
		by = " on " + c.Surface
	}
	if c.Decider != "" {
		by += " by " + c.Decider
	}
	switch c.Decision {
	case "approved":
		return "Approved" + by + "."
	case "denied":
		return "Denied" + by + "."
	case "expired":
		return "Expired: nobody answered in time, so it was denied."
	case "withdrawn":
		if c.Reason != "" {
			return "Withdrawn: " + textutil.Clip(c.Reason, 200)
		}
		return "Withdrawn."
	}
	return "No longer pending (" + textutil.Clip(c.Decision, 40) + ")."
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// maxWhy bounds the reasons a card shows, so that the card, its summary
// and its arguments fit one message; the core's reasons are shorter.
const maxWhy = 800

// whyText says why the core asks (a URL not given, a tainted session),
// one reason a line; past maxWhy characters it points to the computer.
func whyText(why []string, id8 string) string {
	var b strings.Builder
	n := 0
	for i, w := range why {
		w = escapeInvisible(w)
		if n += len([]rune(w)); n > maxWhy && i > 0 {
			fmt.Fprintf(&b, "Why: and %d more reasons: carapace confirm show %s\n", len(why)-i, id8)
			break
		}
		b.WriteString("Why: " + textutil.Clip(w, maxWhy) + "\n")
	}
	return b.String()
}
