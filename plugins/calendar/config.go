package calendar

import (
	"fmt"
	"strings"
	"time"
)

// CredentialKey is the CalDAV password's key: carapace auth set --plugin
// calendar --key caldav_password.
const CredentialKey = "caldav_password"

// Config is [plugins.calendar.config], validated by the manifest's
// config_schema before Init.
type Config struct {
	Backend         string // caldav (default) or eventkit
	URL             string // caldav_url
	Username        string
	DefaultCalendar string
	RemindersList   string
	Location        *time.Location // time_zone; default the machine's
}

// ParseConfig reads the plugin's config.
func ParseConfig(m map[string]any) (Config, error) {
	str := func(k string) string {
		v, _ := m[k].(string)
		return strings.TrimSpace(v)
	}
	c := Config{
		Backend: str("backend"), URL: str("caldav_url"), Username: str("username"),
		DefaultCalendar: str("default_calendar"), RemindersList: str("reminders_list"),
		Location: time.Local,
	}
	if c.Backend == "" {
		c.Backend = "caldav"
	}
	if tz := str("time_zone"); tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" {
			return c, fmt.Errorf("time_zone %q is not an IANA zone name (e.g. Europe/Paris, America/New_York): fix it with carapace config edit", tz)
		}
		c.Location = l
	}
	switch c.Backend {
	case "caldav":
		if c.URL == "" || c.Username == "" {
			return c, fmt.Errorf("the CalDAV backend needs caldav_url and username in [plugins.calendar.config] (docs/CALENDAR.md), and the password: carapace auth set --plugin calendar --key %s", CredentialKey)
		}
		if _, err := CheckURL(c.URL); err != nil {
			return c, err
		}
	case "eventkit":
	default:
		return c, fmt.Errorf("backend %q: caldav or eventkit", c.Backend)
	}
	return c, nil
}
