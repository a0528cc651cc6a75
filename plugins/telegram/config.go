package telegram

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// config is [plugins.telegram.config], validated by the core against the
// manifest's config_schema and checked again here (a handler must not
// trust that it runs behind the core).
type config struct {
	OwnerID    int64            // 0: not configured
	OwnerGroup string           // the group of the owner's private chat
	Chats      map[int64]string // bound group chats → their groups
	APIURL     string
	Debounce   time.Duration
	// StaleAfter is how long the poll may go without a successful
	// getUpdates before the plugin reports itself degraded.
	StaleAfter time.Duration
}

// Defaults of the config.
const (
	DefaultOwnerGroup = "main"
	DefaultAPIURL     = "https://api.telegram.org"
	DefaultDebounce   = 1500 * time.Millisecond
	DefaultStaleAfter = 2 * time.Minute // a long poll returns at least every 30 s: four of them
)

var groupRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// parseConfig reads the config map the core passes to Init.
func parseConfig(m map[string]any) (config, error) {
	c := config{OwnerGroup: DefaultOwnerGroup, APIURL: DefaultAPIURL, Debounce: DefaultDebounce, StaleAfter: DefaultStaleAfter, Chats: map[int64]string{}}
	for k, v := range m {
		switch k {
		case "owner_id":
			n, err := plugin.Int(v)
			if err != nil || n < 1 {
				return c, fmt.Errorf("owner_id: want a Telegram user id (a positive integer): message @userinfobot in Telegram to learn yours, or leave owner_id out and run `carapace telegram pair`")
			}
			c.OwnerID = n
		case "owner_group":
			s, _ := v.(string)
			if !groupRE.MatchString(s) {
				return c, fmt.Errorf("owner_group: want a group name of 1 to 64 letters, digits, '_' or '-'")
			}
			c.OwnerGroup = s
		case "chats":
			obj, ok := v.(map[string]any)
			if !ok {
				return c, fmt.Errorf(`chats: want a table of chat id = "group", e.g. [plugins.telegram.config.chats] "-1001234567890" = "family"`)
			}
			for id, g := range obj {
				n, err := strconv.ParseInt(id, 10, 64)
				gs, _ := g.(string)
				if err != nil || n == 0 || !groupRE.MatchString(gs) {
					return c, fmt.Errorf(`chats: %q: want "chat id" = "group name" (the chat id as Telegram gives it, e.g. "-1001234567890")`, textutil.Clip(id, 40))
				}
				c.Chats[n] = gs
			}
		case "api_url":
			s, _ := v.(string)
			if err := checkAPIURL(s); err != nil {
				return c, err
			}
			c.APIURL = strings.TrimRight(s, "/")
		case "debounce_ms":
			n, err := plugin.Int(v)
			if err != nil || n < 0 || n > 10000 {
				return c, fmt.Errorf("debounce_ms: want a number of milliseconds from 0 to 10000")
			}
			c.Debounce = time.Duration(n) * time.Millisecond
		case "degraded_after_s":
			n, err := plugin.Int(v)
			if err != nil || n < 5 || n > 3600 {
				return c, fmt.Errorf("degraded_after_s: want a number of seconds from 5 to 3600")
			}
			c.StaleAfter = time.Duration(n) * time.Second
		default:
			return c, fmt.Errorf("unknown setting %q: the telegram plugin takes owner_id, owner_group, chats, api_url, debounce_ms and degraded_after_s", textutil.Clip(k, 40))
		}
	}
	if c.OwnerID != 0 {
		if g, ok := c.Chats[c.OwnerID]; ok && g != c.OwnerGroup {
			return c, fmt.Errorf("chats: %d is the owner's private chat, whose group is owner_group (%s): remove it from chats", c.OwnerID, c.OwnerGroup)
		}
	}
	return c, nil
}

// checkAPIURL allows https anywhere and plain http only on the loopback:
// the token travels in every request's path.
func checkAPIURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("api_url: want an address such as %s", DefaultAPIURL)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		switch u.Hostname() {
		case "127.0.0.1", "localhost", "::1":
			return nil
		}
		return fmt.Errorf("api_url: plain http is allowed only on the loopback (127.0.0.1, localhost, [::1]), since the bot token travels in every request: use https")
	}
	return fmt.Errorf("api_url: want an https address such as %s", DefaultAPIURL)
}

// groupOf returns the group a chat maps to for the owner, and whether it
// maps at all: the owner's private chat to OwnerGroup, bound chats to
// theirs.
func (c *config) groupOf(owner, chat int64) (string, bool) {
	if owner != 0 && chat == owner {
		return c.OwnerGroup, true
	}
	g, ok := c.Chats[chat]
	return g, ok
}
