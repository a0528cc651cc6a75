package telegram

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot/models"
)

// Provenance: what the agent gets as the owner's words is only what the
// owner wrote. A message the owner forwards, and the message the owner
// replies to or quotes, are someone else's words (a stranger's, a
// channel's, the agent's own earlier answer): they reach the agent marked
// so, with where they came from, as
//
//	[Forwarded by the owner — not the owner's words. From: user "Mallory" (@mallory, id 666), sent 2026-01-01 12:00 UTC]
//	> the forwarded text,
//	> every line of it quoted
//
// or, for a reply,
//
//	[The owner replies to the message quoted below — its words are not the owner's. From: user "Alice" (id 777), in this chat]
//	> the quoted text (the part the owner selected, if any)
//	[The owner's reply:]
//	the owner's own words
//
// Every line of the other's words starts with "> " — every kind of line
// break counts (\r, U+2028, …) — so none of them can pass for a line of
// the owner's or for a marker line; names and titles are quoted and
// escaped (strconv.Quote), so they cannot break out of the marker line.
// The plugin's skill (skills/telegram.md) tells the agent what the
// markers mean.

// Marker lines of framed messages.
const (
	forwardedMark = "[Forwarded by the owner — not the owner's words. From: %s]"
	repliedMark   = "[The owner replies to the message quoted below — its words are not the owner's. From: %s]"
	replyMark     = "[The owner's reply:]"
	quotePrefix   = "> "
	maxNameRunes  = 64
)

// frameText is the text of the owner's message m as the agent gets it:
// the owner's own words as they are, anyone else's marked and quoted.
// botID is the bot's own user id (a reply to it quotes the agent).
func frameText(m *models.Message, owner, botID int64) string {
	switch {
	case m.ForwardOrigin != nil || m.IsAutomaticForward:
		from := "an unknown origin"
		if m.ForwardOrigin != nil {
			from = describeOrigin(*m.ForwardOrigin, true)
		}
		return fmt.Sprintf(forwardedMark, from) + "\n" + quote(m.Text)
	case m.ReplyToMessage != nil || m.ExternalReply != nil || m.Quote != nil:
		from, text := repliedTo(m, owner, botID)
		if m.Quote != nil && m.Quote.Text != "" {
			text = m.Quote.Text // what the owner selected of it
		}
		return fmt.Sprintf(repliedMark, from) + "\n" + quote(text) + "\n" + replyMark + "\n" + m.Text
	}
	return m.Text
}

// repliedTo describes the message m replies to, and returns its text.
func repliedTo(m *models.Message, owner, botID int64) (from, text string) {
	if r := m.ExternalReply; r != nil {
		from = describeOrigin(r.Origin, false)
		if r.Chat != nil {
			from += ", in " + describeChat(*r.Chat, "the chat")
		} else {
			from += ", in another chat"
		}
		return from, "(its text is not shown here)"
	}
	r := m.ReplyToMessage
	if r == nil {
		return "a message of this chat", "(its text is not shown here)"
	}
	switch {
	case r.From != nil && r.From.ID == owner:
		from = "the owner (an earlier message)"
	case r.From != nil && r.From.ID == botID:
		from = "this bot (the agent's answers and Carapace's notes)"
	case r.SenderChat != nil:
		from = describeChat(*r.SenderChat, "the chat")
	case r.From != nil:
		from = describeUser(*r.From)
	default:
		from = "an unknown sender"
	}
	text = r.Text
	if text == "" {
		text = r.Caption
	}
	if text == "" {
		text = "(no text: a photo, a file or another kind of message)"
	}
	return from + ", in this chat", text
}

// describeOrigin says where a forwarded or quoted message came from;
// dated adds when it was first sent.
func describeOrigin(o models.MessageOrigin, dated bool) string {
	var s string
	var date int
	switch {
	case o.MessageOriginUser != nil:
		s, date = describeUser(o.MessageOriginUser.SenderUser), o.MessageOriginUser.Date
	case o.MessageOriginHiddenUser != nil:
		s, date = "a user who hides their account, named "+quoteName(o.MessageOriginHiddenUser.SenderUserName), o.MessageOriginHiddenUser.Date
	case o.MessageOriginChat != nil:
		s, date = describeChat(o.MessageOriginChat.SenderChat, "the chat")+signed(o.MessageOriginChat.AuthorSignature), o.MessageOriginChat.Date
	case o.MessageOriginChannel != nil:
		s, date = describeChat(o.MessageOriginChannel.Chat, "the channel")+signed(o.MessageOriginChannel.AuthorSignature), o.MessageOriginChannel.Date
	default:
		s = "an unknown origin"
	}
	if dated && date > 0 {
		s += ", sent " + time.Unix(int64(date), 0).UTC().Format("2006-01-02 15:04 MST")
	}
	return s
}

// describeUser names a Telegram user: quoted name, username, id.
func describeUser(u models.User) string {
	name := strings.TrimSpace(u.FirstName + " " + u.LastName)
	s := "user " + quoteName(name)
	if u.IsBot {
		s = "bot " + quoteName(name)
	}
	return s + " (" + handle(u.Username) + "id " + strconv.FormatInt(u.ID, 10) + ")"
}

// describeChat names a chat: kind, quoted title, username, id.
func describeChat(c models.Chat, kind string) string {
	title := c.Title
	if title == "" {
		title = strings.TrimSpace(c.FirstName + " " + c.LastName)
	}
	return kind + " " + quoteName(title) + " (" + handle(c.Username) + "id " + strconv.FormatInt(c.ID, 10) + ")"
}

func signed(sig *string) string {
	if sig == nil || *sig == "" {
		return ""
	}
	return ", signed " + quoteName(*sig)
}

// handle is "@username, " for a username Telegram allows, else "".
func handle(u string) string {
	for _, r := range u {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return ""
		}
	}
	if u == "" || len(u) > 32 {
		return ""
	}
	return "@" + u + ", "
}

// quoteName quotes a name or title (anyone chooses theirs) on one line:
// at most maxNameRunes characters, escaped as a Go string.
func quoteName(s string) string {
	if r := []rune(s); len(r) > maxNameRunes {
		s = string(r[:maxNameRunes]) + "…"
	}
	return strconv.Quote(s)
}

// lineBreaks are what may start a new line for a reader: each becomes
// "\n" before the lines are quoted.
var lineBreaks = strings.NewReplacer("\r\n", "\n", "\r", "\n", "\v", "\n", "\f", "\n", "\u0085", "\n", "\u2028", "\n", "\u2029", "\n")

// quote prefixes every line of s with quotePrefix.
func quote(s string) string {
	lines := strings.Split(lineBreaks.Replace(s), "\n")
	for i, l := range lines {
		lines[i] = quotePrefix + l
	}
	return strings.Join(lines, "\n")
}
